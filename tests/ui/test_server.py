"""``rayform ui`` as it runs: the real server in its own process (main thread, uvicorn), where
queries get the catalog's timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest


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


@pytest.mark.skipif(sys.platform != "linux", reason="scheduling policies are read from /proc")
def test_ordinary_scheduling_moves_a_real_time_process_tree(time_shared: Any) -> None:
    ordinary_scheduling = time_shared
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # no-op check of the call
        fifo = subprocess.Popen([sys.executable, "-c",
                                 "import os, subprocess, sys; "
                                 "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); "
                                 "subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'])"])
    except PermissionError:
        pytest.skip("no permission to set scheduling policies")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until the child has made its real-time grandchild
            children = Path(f"/proc/{fifo.pid}/task/{fifo.pid}/children").read_text().split()
            if children:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the real-time child started no grandchild")
        if os.sched_getscheduler(fifo.pid) != os.SCHED_FIFO:
            pytest.skip("this sandbox does not let a process take SCHED_FIFO")
        assert ordinary_scheduling(fifo.pid) >= 2  # the child and its grandchild
        assert os.sched_getscheduler(fifo.pid) == os.SCHED_OTHER
        assert os.sched_getscheduler(int(children[0])) == os.SCHED_OTHER
        assert ordinary_scheduling(fifo.pid) == 0
    finally:
        for child in Path(f"/proc/{fifo.pid}/task/{fifo.pid}/children").read_text().split() \
                if fifo.poll() is None else ():
            os.kill(int(child), 9)
        fifo.kill()
        fifo.wait()
