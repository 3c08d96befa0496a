"""Curation benchmarks (issue 22): numeric checks, sampled video checks, SQL over findings.

Run ``python benchmarks/bench_curate.py`` (``BENCH_QUICK=1`` for one repeat). Each part prints the
figure, the limit measured in the same run on the same cores, and the ratio limit / figure:

1. Every numeric check (``--video off``) on 12 episodes: copies of the real Unitree G1 LeRobot
   episodes (``../shared/realdata``). Limit: reading the same numeric columns into numpy (what
   any check must do first). Target: <= 1 s.
2. Sampled video checks (``video.*``, ``--video sample``: a GOP head per second, 8 at most per
   camera) on the same 12 episodes. Limit: PyAV alone on the same plan (probe each file, seek to
   each head's keyframe, decode its frames), threads as the check uses them. Target: <= 5 s.
3. SQL aggregates over ``<dataset>.findings`` for 100, 1k and 10k segments (3 findings each):
   counts per check and severity, and a per-segment verdict roll-up. Limit: the same group-bys
   with ``pyarrow.Table.group_by`` on the table in memory. The time per 10x segments is printed.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import workload as w

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._notes import notes_rows, replace_findings
from rayform.curation import curate
from rayform.curation._checks_video import sample_heads
from rayform.curation._series import load_series, numeric_columns

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "unitree-g1-lerobot-v21"
EPISODES = 12
REPEATS = 1 if w.QUICK else 3
SIZES = (100, 1_000, 10_000)
VIDEO_KEY = "observation.images.cam_high"


def build_copies(root: Path) -> Path:
    """12 LeRobot v2.1 episodes: real episodes 29 and 30 copied, renumbered."""
    out = root / "g1x12"
    (out / "meta").mkdir(parents=True)
    episodes, first = [], 0
    for i in range(EPISODES):
        source = (29, 30)[i % 2]
        table = pq.read_table(REAL / f"data/chunk-000/episode_{source:06d}.parquet")
        n = table.num_rows
        table = table.set_column(table.schema.get_field_index("episode_index"), "episode_index",
                                 pa.array(np.full(n, i, np.int64)))
        table = table.set_column(table.schema.get_field_index("index"), "index",
                                 pa.array(np.arange(first, first + n, dtype=np.int64)))
        first += n
        data = out / f"data/chunk-000/episode_{i:06d}.parquet"
        data.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, data)
        video = out / f"videos/chunk-000/{VIDEO_KEY}/episode_{i:06d}.mp4"
        video.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REAL / f"videos/chunk-000/{VIDEO_KEY}/episode_{source:06d}.mp4", video)
        episodes.append({"episode_index": i, "tasks": ["pick"], "length": n})
    info = json.loads((REAL / "meta/info.json").read_text())
    info.update(total_episodes=EPISODES, total_frames=first, total_videos=EPISODES)
    (out / "meta/info.json").write_text(json.dumps(info))
    (out / "meta/episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    shutil.copyfile(REAL / "meta/tasks.jsonl", out / "meta/tasks.jsonl")
    return out


def best(fn: object) -> float:
    return min(w.timed(fn) for _ in range(REPEATS))  # type: ignore[arg-type]


def numeric(dataset: DatasetEntry) -> None:
    columns = numeric_columns(dataset)

    def read() -> None:
        fresh = dataset.refresh()
        for sid in fresh.segment_ids():
            load_series(fresh, sid, columns)

    limit = best(read)
    figure = best(lambda: curate(dataset.refresh(), video="off", persist=False))
    w.report("numeric checks, 12 episodes", f"{figure:.3f} s", f"{limit:.3f} s", limit / figure,
             f"target <= 1 s: {'met' if figure <= 1 else 'MISSED'}")


def video(dataset: DatasetEntry) -> None:
    from rayform.media import probe_video_asset
    from rayform.media._video_codec import require_av

    av = require_av()
    plans = []
    for sid in dataset.segment_ids():
        seg = dataset.open_segment(sid)
        [layer] = seg.record.layers.values()
        for digest in layer.assets:
            path = seg.asset_path(digest)
            info = probe_video_asset(path)
            heads = sample_heads(info.frame_timestamps_ns, info.is_keyframe, 0,
                                 len(info.frame_timestamps_ns), "sample")
            plans.append((path, info, heads))
    frames = sum(b - a for _, _, heads in plans for a, b in heads)

    def bare() -> None:
        """PyAV alone on the same plan: probe, seek to each head's keyframe, decode its frames."""
        for path, _, heads in plans:
            info = probe_video_asset(path)
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                for start, stop in heads:
                    if start:
                        container.seek(int(info.frame_timestamps_ns[start]
                                           * info.time_base.denominator
                                           // (info.time_base.numerator * 1_000_000_000)),
                                       stream=stream, backward=True, any_frame=False)
                    for n, frame in enumerate(container.decode(stream)):
                        frame.planes[0].line_size  # noqa: B018 - touch the decoded frame
                        if n + 1 >= stop - start:
                            break

    limit = best(bare)
    figure = best(lambda: curate(dataset.refresh(), checks=["video.*"], video="sample",
                                 persist=False))
    w.report(f"sampled video checks, 12 episodes, {frames} frames", f"{figure:.3f} s",
             f"{limit:.3f} s", limit / figure,
             f"target <= 5 s: {'met' if figure <= 5 else 'MISSED'}")


QUERIES = (
    'SELECT "check", severity, count(*) AS n, count(DISTINCT segment) AS segments '
    'FROM {name}.findings GROUP BY "check", severity',
    "SELECT segment, max(CASE WHEN severity = 'error' THEN 2 WHEN severity = 'warning' THEN 1 "
    "ELSE 0 END) AS worst FROM {name}.findings GROUP BY segment",
)


def sql_aggregates(catalog: Catalog) -> None:
    checks = ("values.offset", "series.spike", "episode.idle")
    severities = ("error", "warning", "info")
    previous = None
    catalog.sql("SELECT 1").to_arrow_table()  # the session is made once per process
    for size in SIZES:
        name = f"findings{size}"
        catalog.create_dataset(name)
        rows = [{"segment": f"episode_{s:06d}", "segment_version": "0" * 16, "dataset_version": 1,
                 "kind": "finding", "check": c, "label": c, "severity": severities[(s + k) % 3],
                 "start_row": s % 50, "end_row": s % 50 + 10, "value": float(s), "message": "m"}
                for s in range(size) for k, c in enumerate(checks)]
        table = notes_rows(rows)
        replace_findings(catalog, name, table, dataset_version=1, config="bench", checked={})

        def run_sql(name: str = name) -> None:
            for query in QUERIES:
                catalog.sql(query.format(name=name)).to_arrow_table()

        def run_arrow(table: pa.Table = table) -> None:
            table.group_by(["check", "severity"]).aggregate([("segment", "count"),
                                                             ("segment", "count_distinct")])
            ranked = table.append_column("rank", pa.array(
                [{"error": 2, "warning": 1}.get(s, 0)
                 for s in table.column("severity").to_pylist()], pa.int8()))
            ranked.group_by("segment").aggregate([("rank", "max")])

        figure, limit = best(run_sql), best(run_arrow)
        per10 = "" if previous is None else f"   x{figure / previous:.1f} per 10x segments"
        previous = figure
        w.report(f"SQL over findings, {size:,} segments", f"{figure * 1e3:.1f} ms",
                 f"{limit * 1e3:.1f} ms", limit / figure, "" + per10)


def main() -> int:
    print(f"bench_curate ({'quick' if w.QUICK else 'full'} mode, {w.cores()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog.create(str(Path(tmp) / "catalog"))
        if REAL.is_dir():
            dataset = catalog.create_dataset("g1")
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dataset.register([str(build_copies(Path(tmp)))]).wait()
            print(f"  registered 12 episodes in {time.perf_counter() - t0:.1f} s")
            numeric(dataset)
            video(dataset)
        else:
            print(f"  numeric and video parts skipped: no real data at {REAL}")
        sql_aggregates(catalog)
    return w.report_exit_code()


if __name__ == "__main__":
    sys.exit(main())
