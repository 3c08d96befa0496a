"""Ingest and statistics on Ray at 1 and 2 workers against the single-process path.

Workload (the standard one): 8 episodes x 20 s written with rayform's RecordingWriter; 7-D joints
and 7-D actions at 100 Hz, a 224x224 JPEG camera at 30 Hz. ``BENCH_QUICK=1``: 2 episodes x 2 s and
one repetition.

Printed per task: the median wall time of the single-process path and of Ray with at most 1 and
2 tasks in flight (on one local 2-CPU cluster, started once and warmed up), the physical limit
measured in the same run and the ratio to it, and Ray's overhead over the single-process path.

Limits: ingest — reading, hashing (sha256) and writing the same bytes once, as the object store
does; statistics — numpy's min/max/mean/std/quantiles over the same values already in memory.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import workload as w

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter, compute_statistics

QUICK = w.QUICK
NUM_EPISODES = 2 if QUICK else 8
EPISODE_S = 2 if QUICK else 20
REPEATS = 1 if QUICK else 3
STATE_HZ = 100
CAMERA_HZ = 30
SIDE = 224
JOINTS = "/joints/position:Scalars:scalars"
ACTIONS = "/action:Scalars:scalars"


def _camera_frames(seed: int, count: int) -> list[bytes]:
    import simplejpeg

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE]
    base = np.stack([xx, yy, (xx + yy) // 2], axis=-1).astype(np.int16)
    frames = []
    for i in range(count):
        noise = rng.integers(-12, 13, size=(SIDE, SIDE, 3), dtype=np.int16)
        image = np.clip((base + 3 * i) % 256 + noise, 0, 255).astype(np.uint8)
        frames.append(simplejpeg.encode_jpeg(image, quality=90, colorspace="RGB"))
    return frames


def write_workload(root: Path) -> list[Path]:
    """The standard episodes, written once."""
    paths = []
    for e in range(NUM_EPISODES):
        rng = np.random.default_rng(e)
        n = EPISODE_S * STATE_HZ
        t_ns = np.arange(n, dtype=np.int64) * (1_000_000_000 // STATE_HZ)
        cam_ns = np.arange(EPISODE_S * CAMERA_HZ, dtype=np.int64) * (1_000_000_000 // CAMERA_HZ)
        path = root / f"episode_{e:03d}.rfr"
        with RecordingWriter(path, recording_id=f"episode_{e:03d}") as rec:
            rec.set_properties(task="pick cube", success=e % 3 != 0)
            state_tl = {"frame_index": np.arange(n), "time": t_ns.astype("timedelta64[ns]")}
            rec.log_scalars("/joints/position", timelines=state_tl,
                            values=np.cumsum(rng.normal(0, 0.01, (n, 7)), axis=0).astype(np.float32))
            rec.log_scalars("/action", timelines=state_tl,
                            values=rng.normal(0, 0.1, (n, 7)).astype(np.float32))
            rec.log_encoded_images(
                "/cam0/rgb",
                timelines={"frame_index": (cam_ns // (1_000_000_000 // STATE_HZ)),
                           "time": cam_ns.astype("timedelta64[ns]")},
                blobs=_camera_frames(e, len(cam_ns)), media_type="image/jpeg")
        paths.append(path)
    return paths


median_time = functools.partial(w.median_time, repeats=REPEATS)


def copy_limit(paths: list[Path], scratch: Path) -> float:
    """Read, sha256 and write every byte once (what put_object must do at least)."""
    def run() -> None:
        out = scratch / "copy"
        out.mkdir(exist_ok=True)
        for p in paths:
            h = hashlib.sha256()
            with p.open("rb") as fin, (out / p.name).open("wb") as fout:
                while chunk := fin.read(1 << 22):
                    h.update(chunk)
                    fout.write(chunk)
        shutil.rmtree(out)
    return median_time(run)


def numpy_limit(values: list[np.ndarray]) -> float:
    """numpy statistics over the same values, already in memory (float64, as rayform uses)."""
    def run() -> None:
        data = np.concatenate(values).astype(np.float64)
        for part in (*values, data):
            part = part.astype(np.float64)
            part.min(axis=0), part.max(axis=0), part.mean(axis=0), part.std(axis=0)
            np.quantile(part, [0.01, 0.1, 0.5, 0.9, 0.99], axis=0)
    return median_time(run)


def row(name: str, seconds: float, limit: float, single: float | None) -> str:
    overhead = "" if single is None else f"{seconds - single:+8.3f} s ({seconds / single:5.2f}x)"
    return (f"  {name:<28} {seconds:8.3f} s   limit {limit:7.3f} s   "
            f"ratio {seconds / limit:7.1f}x   cores {w.cores()}   rss {w.peak_rss_mib():,.0f} MiB"
            f"   {overhead}")


def main() -> None:
    import ray

    from rayform import ray as rf_ray

    root = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    try:
        t0 = time.perf_counter()
        paths = write_workload(root / "src")
        size_mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"workload: {NUM_EPISODES} episodes x {EPISODE_S} s, {size_mb:.1f} MB "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
        print(f"ray.init (local cluster, 2 CPUs): {time.perf_counter() - t0:.2f} s (once)")
        runs = iter(range(1_000_000))

        def fresh_dataset() -> DatasetEntry:
            return Catalog.create(root / f"cat{next(runs)}").create_dataset("robots")

        def ray_ingest(options: rf_ray.TaskOptions) -> None:
            rf_ray.register_many(fresh_dataset(), paths, options=options)

        # Warm the workers (process start, imports) so the figures show steady-state overhead.
        t0 = time.perf_counter()
        rf_ray.register_many(fresh_dataset(), paths[:2],
                             options=rf_ray.TaskOptions(max_concurrency=2))
        print(f"first Ray call (cold workers): {time.perf_counter() - t0:.2f} s")

        print("\ningest (register all episodes, one atomic commit)")
        limit = copy_limit(paths, root)
        single = median_time(lambda: fresh_dataset().register(paths))
        print(row("single process", single, limit, None))
        for workers in (1, 2):
            opts = rf_ray.TaskOptions(max_concurrency=workers)
            took = median_time(functools.partial(ray_ingest, opts))
            print(row(f"ray, {workers} worker(s)", took, limit, single))

        print("\nstatistics (joints + actions, per segment and overall, with q01..q99)")
        ds = fresh_dataset()
        ds.register(paths)
        values = [ds.open_segment(s).column(c, "frame_index").values.flatten()
                  .to_numpy().reshape(-1, 7) for s in ds.segment_ids() for c in (JOINTS, ACTIONS)]
        limit = numpy_limit(values)
        columns = [JOINTS, ACTIONS]
        expected = compute_statistics(ds, columns).to_arrow()
        single = median_time(lambda: compute_statistics(ds, columns))
        print(row("single process", single, limit, None))
        for workers in (1, 2):
            opts = rf_ray.TaskOptions(max_concurrency=workers)
            got = rf_ray.compute_statistics(ds, columns, options=opts)
            assert got.to_arrow().equals(expected), "distributed statistics differ"
            took = median_time(functools.partial(rf_ray.compute_statistics, ds, columns,
                                                 options=opts))
            print(row(f"ray, {workers} worker(s)", took, limit, single))
        print("\n(identical figures checked: Ray statistics == single-process statistics)")
        print("On 2 shared cores Ray's per-task scheduling, pickling and result transfer dominate;"
              " the overhead column states it.")
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        import ray  # noqa: F401
    except ImportError:
        print("bench_ray: skipped (ray is not installed: pip install 'rayform[ray]')")
        sys.exit(0)
    main()
