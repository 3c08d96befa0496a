"""Catalog benchmarks (issue 2): a 10,000-segment catalog, reader() latest-at, registration.

Run ``python benchmarks/bench_catalog.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run,
``BENCH_PARTS=1,3`` to run some parts only).
Each part prints the measured figure, the physical limit measured in the same run and the ratio:

1. A catalog of 10,000 small segments: open, ``segment_table()``, ``get_index_ranges()`` and a SQL
   filter on a property. Target: open + get_index_ranges <= 0.5 s (measured with nothing cached,
   and once more as the first call of a fresh process). Limit: reading the bytes of the newest
   snapshot header and its segment index (what any open must at least read).
2. ``reader()`` latest-at alignment of a 100 Hz stream (1M rows) onto a 15 Hz grid, against bare
   ``numpy.searchsorted`` + take on the same arrays. Target: within 3x.
3. Registration throughput of native recordings against a plain file copy of the same bytes
   (``shutil.copyfile``). Target: >= 50 % of the copy rate. Also printed: sha256 of the same bytes
   on every core, and the bound ``1 / (1/copy + 1/hash)`` for a store that must copy and hash.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import workload as w

import rayform
from rayform.catalog import Catalog
from rayform.catalog._snapshot import clear_cache
from rayform.catalog._versions import latest_version_number, version_key
from rayform.storage._store import object_key, sha256_file

QUICK = w.QUICK
NUM_SEGMENTS = 500 if QUICK else 10_000
REGISTER_BATCH = 1_000
STREAM_ROWS = 100_000 if QUICK else 1_000_000
STREAM_SEGMENTS = 10
NUM_JOINTS = 7
STREAM_RATE_HZ = 100
GRID_RATE_HZ = 15
REG_FILES = 2 if QUICK else 8
REG_FILE_MB = 4 if QUICK else 32
REPEATS = 3 if QUICK else 5
QUICK_NOTE = " (quick mode: too small to judge)" if QUICK else ""


median_time = functools.partial(w.median_time, repeats=REPEATS)


report = w.report


# ----------------------------------------------------------------------- 1. 10k segments
def write_small(path: Path, i: int) -> Path:
    frames = np.arange(20, dtype=np.int64)
    with rayform.RecordingWriter(path, recording_id=f"seg{i:05d}") as rec:
        rec.set_properties(task=f"task-{i % 7}", success=i % 3 == 0, site=f"site-{i % 4}",
                           episode=i)
        rec.log_scalars("/joints/position",
                        timelines={"frame_index": frames + i,
                                   "real_time": ((frames + i) * 10_000_000).astype(
                                       "datetime64[ns]")},
                        values=np.full((20, NUM_JOINTS), float(i)))
        rec.log_scalars("/gripper", timelines={"frame_index": frames[::4] + i},
                        values=np.full(5, float(i)))
    return path


def bench_many_segments(work: Path) -> dict[str, float]:
    print(f"1. catalog of {NUM_SEGMENTS:,} small segments")
    src = work / "small"
    src.mkdir()
    t0 = time.perf_counter()
    paths = [write_small(src / f"{i}.rfr", i) for i in range(NUM_SEGMENTS)]
    t_write = time.perf_counter() - t0
    catalog = Catalog.create(work / "many")
    ds = catalog.create_dataset("many")
    t0 = time.perf_counter()
    for lo in range(0, NUM_SEGMENTS, REGISTER_BATCH):
        ds.register(paths[lo:lo + REGISTER_BATCH], progress=False).wait()
    t_register = time.perf_counter() - t0
    print(f"  (setup: wrote in {t_write:.1f} s, registered in {t_register:.1f} s, "
          f"{NUM_SEGMENTS / t_register:,.0f} segments/s)")
    url = catalog.url
    header_path = Path(url) / version_key("many", latest_version_number(catalog.store, "many"))
    digest = json.loads(header_path.read_bytes())["segment_index"]
    index_path = Path(url) / object_key(digest)
    print(f"  newest snapshot: header {header_path.stat().st_size:,} B, segment index "
          f"{index_path.stat().st_size / 1e6:.2f} MB")

    def read_metadata() -> int:
        return len(header_path.read_bytes()) + len(index_path.read_bytes())

    def open_ds() -> rayform.DatasetEntry:
        clear_cache()  # nothing read before: as in a fresh process
        entry = Catalog.open(url).get_dataset("many")
        entry.segment_ids()  # the segment index is read lazily: make open include it
        return entry

    def open_and_ranges() -> object:
        clear_cache()
        return Catalog.open(url).get_dataset("many").get_index_ranges().to_arrow_table()

    opened = open_ds()
    t_limit = median_time(read_metadata)
    t_open = median_time(open_ds)
    t_ranges = median_time(lambda: opened.get_index_ranges().to_arrow_table())
    t_table = median_time(lambda: opened.segment_table().to_arrow_table())
    t_open_ranges = median_time(open_and_ranges)
    t_process = statistics.median(_fresh_process_open_ranges(url) for _ in range(3))
    sql_catalog = Catalog.open(url)
    query = ('SELECT rerun_segment_id FROM many.segments WHERE "property:task" = $task '
             'AND "property:success"')

    def sql_filter() -> int:
        table = sql_catalog.sql(query, param_values={"task": "task-3"}).to_arrow_table()
        return int(table.num_rows)

    expected = sum(1 for i in range(NUM_SEGMENTS) if i % 7 == 3 and i % 3 == 0)
    assert sql_filter() == expected, "SQL filter returned the wrong segments"
    t_sql = median_time(sql_filter)
    assert opened.get_index_ranges().to_arrow_table().num_rows == NUM_SEGMENTS
    limit = f"{t_limit * 1e3:.2f} ms"
    print("  (limit: reading the snapshot header and segment index bytes)")
    report("open (Catalog.open + get_dataset + index)", f"{t_open * 1e3:.1f} ms", limit,
           t_open / t_limit, "")
    report("get_index_ranges() (opened dataset)", f"{t_ranges * 1e3:.1f} ms", limit,
           t_ranges / t_limit, "")
    report("segment_table() (opened dataset)", f"{t_table * 1e3:.1f} ms", limit,
           t_table / t_limit, "")
    report("SQL filter on a property", f"{t_sql * 1e3:.1f} ms", limit, t_sql / t_limit, "")
    verdict = "met" if t_open_ranges <= 0.5 else "MISSED"
    report("open + get_index_ranges()", f"{t_open_ranges * 1e3:.1f} ms", limit,
           t_open_ranges / t_limit, f"target <= 500 ms: {verdict}{QUICK_NOTE}")
    verdict = "met" if t_process <= 0.5 else "MISSED"
    report("  same, first call in a fresh process", f"{t_process * 1e3:.1f} ms", limit,
           t_process / t_limit, f"target <= 500 ms: {verdict}")
    return {"open_ranges_s": t_open_ranges}


FRESH_PROCESS = """
import sys, time
import rayform
from rayform.catalog import Catalog
t0 = time.perf_counter()
table = Catalog.open(sys.argv[1]).get_dataset("many").get_index_ranges().to_arrow_table()
print(time.perf_counter() - t0, table.num_rows)
"""


def _fresh_process_open_ranges(url: str) -> float:
    """open + get_index_ranges timed inside a new interpreter (imports not counted)."""
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS, url], capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[1]) == NUM_SEGMENTS
    return float(out[0])


# ------------------------------------------------------------------ 2. reader latest-at
def bench_reader(work: Path) -> dict[str, float]:
    rows_per_seg = STREAM_ROWS // STREAM_SEGMENTS
    print(f"2. reader() latest-at: {STREAM_ROWS:,} rows at {STREAM_RATE_HZ} Hz in "
          f"{STREAM_SEGMENTS} segments onto a {GRID_RATE_HZ} Hz grid")
    rng = np.random.default_rng(0)
    step_ns = 1_000_000_000 // STREAM_RATE_HZ
    grids: dict[str, np.ndarray] = {}
    paths = []
    for s in range(STREAM_SEGMENTS):
        # Jittered 100 Hz timestamps, as a real clock would give.
        t_ns = np.arange(rows_per_seg, dtype=np.int64) * step_ns
        t_ns += rng.integers(0, step_ns // 4, rows_per_seg)
        values = rng.standard_normal((rows_per_seg, NUM_JOINTS)).astype(np.float32)
        path = work / f"stream{s}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"stream{s}") as rec:
            rec.log_scalars("/joints/position",
                            timelines={"real_time": t_ns.astype("datetime64[ns]")},
                            values=values)
        paths.append(path)
        grids[f"stream{s}"] = np.arange(t_ns[0], t_ns[-1], 1_000_000_000 // GRID_RATE_HZ,
                                        dtype=np.int64).astype("datetime64[ns]")
    catalog = Catalog.create(work / "stream")
    catalog.create_dataset("stream").register(paths, progress=False).wait()
    url = catalog.url
    column = "/joints/position:Scalars:scalars"
    total_grid = sum(len(g) for g in grids.values())

    # The same arrays the reader aligns: int64 index and [N, 7] values per segment.
    ds = Catalog.open(url).get_dataset("stream")
    arrays = []
    for sid in ds.segment_ids():
        rows = ds.open_segment(sid).column(column, "real_time")
        flat = rows.values.flatten().to_numpy().reshape(-1, NUM_JOINTS)
        arrays.append((rows.index, flat, grids[sid].astype(np.int64)))

    def bare_numpy() -> int:
        n = 0
        for index, values, grid in arrays:
            pos = np.searchsorted(index, grid, side="right") - 1
            out = values.take(np.maximum(pos, 0), axis=0)
            out[pos < 0] = np.nan
            n += len(out)
        return n

    reopened = Catalog.open(url)

    def reader_fresh() -> int:
        view = reopened.get_dataset("stream")  # a new view: every column is loaded again
        table = view.reader("real_time", fill_latest_at=True,
                            using_index_values=grids).to_arrow_table()
        return int(table.num_rows)

    warm = Catalog.open(url).get_dataset("stream")

    def reader_warm() -> int:
        table = warm.reader("real_time", fill_latest_at=True,
                            using_index_values=grids).to_arrow_table()
        return int(table.num_rows)

    assert bare_numpy() == reader_fresh() == reader_warm() == total_grid
    check = warm.reader_arrow("real_time", fill_latest_at=True, using_index_values=grids)
    got = np.asarray(check.column(column).combine_chunks().flatten()).reshape(-1, NUM_JOINTS)
    expect = np.concatenate([v[np.searchsorted(i, g, side="right") - 1] for i, v, g in arrays])
    np.testing.assert_array_equal(got, expect)
    times: dict[str, list[float]] = {"numpy": [], "warm": [], "fresh": []}
    for _ in range(2 * REPEATS + 1):  # interleaved: all three see the same machine load
        for name, fn in (("numpy", bare_numpy), ("warm", reader_warm), ("fresh", reader_fresh)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    t_numpy, t_warm, t_fresh = (statistics.median(times[k]) for k in ("numpy", "warm", "fresh"))
    limit = f"{t_numpy * 1e3:.1f} ms"
    verdict = "met" if t_warm <= 3 * t_numpy else "MISSED"
    report(f"reader() -> Arrow ({total_grid:,} rows)", f"{t_warm * 1e3:.1f} ms", limit,
           t_warm / t_numpy, f"target <= 3x: {verdict}{QUICK_NOTE}")
    report("  same on a new view (columns re-read)", f"{t_fresh * 1e3:.1f} ms", limit,
           t_fresh / t_numpy, "(includes memory-mapping 10 files)")
    return {"reader_ratio": t_warm / t_numpy}


# ------------------------------------------------------------------------ 3. registration
def bench_registration(work: Path) -> dict[str, float]:
    print(f"3. registration of {REG_FILES} native recordings of ~{REG_FILE_MB} MB")
    rng = np.random.default_rng(1)
    src = work / "reg"
    src.mkdir()
    blob = 20_000
    blobs_per_file = REG_FILE_MB * 1_000_000 // blob
    paths = []
    for f in range(REG_FILES):
        frames = np.arange(blobs_per_file, dtype=np.int64)
        payload = [rng.bytes(blob) for _ in range(blobs_per_file)]  # stands in for JPEGs
        path = src / f"ep{f}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"ep{f}") as rec:
            rec.set_properties(task="pick", success=True)
            rec.log_encoded_images("/cam0/rgb", timelines={"frame_index": frames},
                                   blobs=payload, media_type="image/jpeg")
            rec.log_scalars("/joints/position", timelines={"frame_index": frames},
                            values=rng.standard_normal((blobs_per_file, NUM_JOINTS)))
        paths.append(path)
    total = sum(p.stat().st_size for p in paths)

    def copy_files(dest: Path) -> float:
        dest.mkdir()
        t0 = time.perf_counter()
        for p in paths:
            shutil.copyfile(p, dest / p.name)
        elapsed = time.perf_counter() - t0
        shutil.rmtree(dest)
        return elapsed

    def register(root: Path) -> float:
        Catalog.create(root).create_dataset("d")  # only the registration itself is timed
        ds = Catalog.open(root).get_dataset("d")
        t0 = time.perf_counter()
        ds.register(paths, progress=False).wait()
        elapsed = time.perf_counter() - t0
        shutil.rmtree(root)
        return elapsed

    def hash_files(_: Path) -> float:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(sha256_file, paths))
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {"copy": [], "register": [], "sha256": []}
    for r in range(REPEATS + 1):  # interleaved so all see the same disk and CPU conditions
        for name, fn in (("copy", copy_files), ("register", register), ("sha256", hash_files)):
            os.sync()  # start each from a clean page cache: no writeback of the previous one
            elapsed = fn(work / f"{name}{r}")
            if r:  # the first round warms the page cache
                times[name].append(elapsed)
    t_copy, t_reg, t_hash = (statistics.median(times[k]) for k in ("copy", "register", "sha256"))
    rate_copy, rate_reg, rate_hash = (total / t / 1e6 for t in (t_copy, t_reg, t_hash))
    rate_bound = total / (t_copy + t_hash) / 1e6
    ratio = rate_reg / rate_copy
    verdict = "met" if ratio >= 0.5 else "MISSED"
    report(f"register ({total / 1e6:.0f} MB)", f"{rate_reg:,.0f} MB/s", f"{rate_copy:,.0f} MB/s",
           ratio, f"target >= 0.50: {verdict}{QUICK_NOTE}")
    report(f"  reference: sha256 on {os.cpu_count()} threads", f"{rate_hash:,.0f} MB/s",
           f"{rate_copy:,.0f} MB/s", rate_hash / rate_copy, "(every byte must be hashed)")
    report("  register vs copy-then-hash bound", f"{rate_reg:,.0f} MB/s", f"{rate_bound:,.0f} MB/s",
           rate_reg / rate_bound, "(bound: 1 / (1/copy rate + 1/hash rate))")
    return {"register_ratio": ratio}


def main() -> int:
    print(f"bench_catalog ({'quick' if QUICK else 'full'} mode, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-") as tmp:
        work = Path(tmp)
        parts = (bench_many_segments, bench_reader, bench_registration)
        chosen = os.environ.get("BENCH_PARTS")  # e.g. BENCH_PARTS=1,3
        for number, part in enumerate(parts, start=1):
            if chosen and str(number) not in chosen.split(","):
                continue
            sub = work / part.__name__
            sub.mkdir()
            part(sub)
            shutil.rmtree(sub)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
