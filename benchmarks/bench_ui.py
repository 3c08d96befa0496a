"""``rayform ui`` page loads: the server's answer per page, and (full mode, where Chromium is
installed) the browser's load, on the demo catalog and on a 10,000-segment synthetic catalog.

Run ``python benchmarks/bench_ui.py`` (``BENCH_QUICK=1``: 1 demo episode and 200 segments,
server side only, no statistics).

Each page is fetched through Starlette's test client (the whole HTTP stack in process: routing,
templates, JSON) and timed as the median of several loads; the limit beside it is the catalog
work the page needs done straight in Python (the same queries, the same episode read), measured
in the same run, and the ratio is what the web layer costs on top. The 10k catalog is
``bench_scale.build`` (one numeric template recording behind every segment). The browser figure is
the navigation's ``loadEventEnd`` in headless Chromium against ``rayform ui`` itself, plus, on
the demo's episode page, the time until the H.264 camera can show a frame.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import workload as w
from bench_scale import build as build_synthetic

from rayform.catalog import Catalog
from rayform.demo import DemoSpec, build_demo
from rayform.ui import create_app
from rayform.ui._episode import load_episode
from rayform.ui._overview import catalog_overview
from rayform.ui._segment_table import SegmentTables, TableQuery, segment_page

REPEATS = 2 if w.QUICK else 5
SYNTHETIC_SEGMENTS = 200 if w.QUICK else 10_000
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def median_s(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fetch(client: Any, path: str) -> Callable[[], object]:
    def get() -> object:
        reply = client.get(path)
        if reply.status_code != 200:
            raise RuntimeError(f"{path}: {reply.status_code} {reply.text[:200]}")
        return reply
    return get


def server_side(label: str, url: str, dataset: str, segment: str, cache: Path) -> None:
    from starlette.testclient import TestClient

    catalog = Catalog.open(url)
    ds = catalog.get_dataset(dataset)
    last_page = max(1, -(-len(ds.segment_ids()) // 50))
    tables = SegmentTables()  # the page's own cache, as the server keeps it
    pages: list[tuple[str, str, Callable[[], object]]] = [
        ("datasets", "/", lambda: catalog_overview(catalog, tables)),
        ("segment table, page 1", f"/datasets/{dataset}",
         lambda: segment_page(tables, ds, TableQuery())),
    ]
    if last_page > 1:
        pages.append((f"segment table, page {last_page}", f"/datasets/{dataset}?page={last_page}",
                      lambda: segment_page(tables, ds, TableQuery(page=last_page))))
    pages += [
        ("segment table, filtered", f"/datasets/{dataset}?where=rerun_num_rows+%3E+0",
         lambda: segment_page(tables, ds, TableQuery(where="rerun_num_rows > 0"))),
        ("episode", f"/datasets/{dataset}/segments/{segment}",
         lambda: load_episode(catalog.get_dataset(dataset), segment, catalog_url=url)),
        ("sql count(*)", f"/sql?q=SELECT+count(*)+FROM+{dataset}.segments",
         lambda: catalog.sql(f"SELECT count(*) FROM {dataset}.segments").to_arrow_table()),
    ]
    with TestClient(create_app(catalog, cache_dir=cache)) as client:
        for name, path, direct in pages:
            t0 = time.perf_counter()
            fetch(client, path)()  # first: imports, the segment table built and registered
            first_s = time.perf_counter() - t0
            page_s = median_s(fetch(client, path))
            limit_s = median_s(direct)
            print(f"  {label:<16} {name:<26} {page_s * 1e3:8.1f} ms (first {first_s * 1e3:7.1f})"
                  f"   catalog work alone {limit_s * 1e3:8.1f} ms   ratio "
                  f"{page_s / max(limit_s, 1e-9):5.2f}")
        if w.QUICK or len(ds.segment_ids()) > 1_000:
            return  # statistics read every segment: a demo-sized figure only (10k: minutes)
        t0 = time.perf_counter()
        fetch(client, f"/api/datasets/{dataset}/statistics")()
        print(f"  {label:<16} {'statistics (first)':<26} {(time.perf_counter() - t0) * 1e3:8.1f}"
              " ms   (computed once per snapshot, then cached)")


def browser_side(label: str, url: str, dataset: str, segment: str, cache: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    env = {**os.environ, "RAYFORM_CACHE_DIR": str(cache),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "rayform.cli", "--catalog", url, "ui",
                             "--no-browser", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    base = None
    for line in proc.stdout:
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if found:
            base = found[1]
            break
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--mute-audio"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        if base is None:
            raise RuntimeError("rayform ui printed no URL")
        for name, path in (("datasets", "/"), ("segment table", f"/datasets/{dataset}"),
                           ("episode", f"/datasets/{dataset}/segments/{segment}"),
                           ("sql", f"/sql?q=SELECT+count(*)+FROM+{dataset}.segments")):
            loads = []
            for _ in range(REPEATS):
                driver.get(base + path)
                loads.append(driver.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "return n.loadEventEnd - n.startTime;") / 1e3)
            print(f"  {label:<16} browser {name:<18} {statistics.median(loads) * 1e3:8.1f} ms "
                  "(navigation to load event)")
        t0 = time.perf_counter()
        driver.get(base + f"/datasets/{dataset}/segments/{segment}")
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(
            "const v = document.querySelector('video'); return !v || v.readyState >= 2"))
        print(f"  {label:<16} browser {'episode + video frame':<18} "
              f"{(time.perf_counter() - t0) * 1e3:8.1f} ms")
    finally:
        driver.quit()
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def main() -> int:
    print(f"rayform ui page loads ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"medians of {REPEATS})")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        demo_url = str(root / "demo")
        build_demo(demo_url, DemoSpec(num_episodes=1 if w.QUICK else 4,
                                      duration_s=1.0 if w.QUICK else 4.0))
        synthetic_url = build_synthetic(root, SYNTHETIC_SEGMENTS)
        targets = [("demo", demo_url, "demo", "episode_000"),
                   (f"{SYNTHETIC_SEGMENTS:,} segments", synthetic_url, "many",
                    "seg0000000")]
        for label, url, dataset, segment in targets:
            server_side(label, url, dataset, segment, root / f"cache-{dataset}")
        browser = not w.QUICK and CHROMIUM.is_file() and CHROMEDRIVER.is_file()
        if not browser:
            print("  browser loads: skipped (" + ("quick mode" if w.QUICK else
                  "no /usr/bin/chromium or /usr/bin/chromedriver") + ")")
            return 0
        for label, url, dataset, segment in targets:
            browser_side(label, url, dataset, segment, root / f"cache-{dataset}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
