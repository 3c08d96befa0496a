"""``rayform ui`` as it runs: the real server in its own process (main thread, uvicorn), where
queries get the catalog's timeout."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=120) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_served_ui_answers_and_cancels_a_runaway_query(server_url: str) -> None:
    status, body = _get(server_url + "/api/datasets")
    assert status == 200 and "demo" in [d["name"] for d in body["datasets"]]  # type: ignore[union-attr]
    query = urllib.parse.quote("SELECT count(*) FROM range(1000000000000)")
    t0 = time.perf_counter()
    status, body = _get(f"{server_url}/api/sql?q={query}")
    elapsed = time.perf_counter() - t0
    assert status == 400 and "timeout" in str(body["error"]), body
    assert elapsed < 60, f"the query ran {elapsed:.0f} s despite the 3 s timeout"
    status, _ = _get(server_url + "/api/datasets")  # and the server still answers
    assert status == 200
