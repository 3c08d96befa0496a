"""Dataloader benchmark (issue 3): the standard workload through RerunMapDataset / RerunIterableDataset.

Run ``python benchmarks/bench_dataloader.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run,
``BENCH_PARTS=1,2`` to run some parts only).

The standard workload, written with rayform's RecordingWriter: 8 episodes x 20 s; joint positions
7-D at 100 Hz; action deltas 7-D at 100 Hz; one 224x224 JPEG camera at 30 Hz; a 15 Hz grid on the
``real_time`` timestamp timeline; fields state, a 16-step action window and the camera; batch 32.

Printed, each with the physical limit measured in the same run and the ratio:

1. numeric fields only (state + action window), one process: samples/s. Target >= 50,000.
   Limit: numpy fancy-index gather of the same rows (what any loader must at least do).
2. state + action + JPEG camera: samples/s for the map and iterable datasets at num_workers 0
   and 2, time to first batch. Limit: bare JPEG decode of the same bytes, on one core and on all
   cores (threads), measured right before each run. Target >= 80 % of the bare decode rate
   (one core, as the design's per-core decode rates; the all-core ratio is printed too).
3. ``SampleIndex.build`` over 10,000 segments. Target <= 1 s. Limit: the dataset's
   ``index_ranges_arrow()`` (the metadata read that build starts from).
4. Peak RSS of the benchmark process and of its worker processes.
"""

from __future__ import annotations

import io
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    SampleIndex,
)
from rayform.media._image import decode_image

QUICK = os.environ.get("BENCH_QUICK") == "1"
PARTS = {int(p) for p in os.environ.get("BENCH_PARTS", "1,2,3").split(",") if p.strip()}
NUM_EPISODES = 2 if QUICK else 8
EPISODE_S = 3 if QUICK else 20
INDEX_SEGMENTS = 300 if QUICK else 10_000
NUMERIC_EPOCHS = 2 if QUICK else 10
REPEATS = 1 if QUICK else 3
STATE_HZ, ACTION_HZ, CAMERA_HZ, GRID_HZ = 100, 100, 30, 15
ACTION_STEPS, BATCH, IMAGE = 16, 32, 224
JOINTS = "/joints/position:Scalars:scalars"
ACTION = "/action/delta:Scalars:scalars"
CAMERA = "/cam0/rgb:EncodedImage:blob"
EPOCH_NS = 1_700_000_000_000_000_000


def report(name: str, figure: str, limit: str, ratio: float, target: str = "") -> None:
    print(f"  {name:<46} {figure:>16}   limit {limit:>16}   ratio {ratio:6.2f}   {target}")


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


# ----------------------------------------------------------------------------- the workload
def camera_frames(seed: int, count: int) -> list[bytes]:
    """Smooth scenes with moving shapes and sensor noise, JPEG quality 90 (about 15-20 KB)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:IMAGE, 0:IMAGE].astype(np.float32)
    base = np.stack([xx, yy, (xx + yy) / 2], axis=-1) * (255.0 / IMAGE)
    blobs = []
    for i in range(count):
        frame = base.copy()
        cx, cy = (40 + 3 * i + 17 * seed) % IMAGE, (90 + 2 * i) % IMAGE
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 < 30 ** 2
        frame[mask] = (200, 60 + (i % 50), 40)
        frame += rng.normal(0, 6, frame.shape)
        buf = io.BytesIO()
        Image.fromarray(np.clip(frame, 0, 255).astype(np.uint8)).save(buf, format="JPEG",
                                                                       quality=90)
        blobs.append(buf.getvalue())
    return blobs


def write_workload(root: Path) -> tuple[DatasetEntry, list[bytes]]:
    catalog = Catalog.create(root / "catalog")
    dataset = catalog.create_dataset("standard")
    paths, all_blobs = [], []
    for ep in range(NUM_EPISODES):
        t0 = EPOCH_NS + ep * 100 * 10**9
        n_state = EPISODE_S * STATE_HZ
        n_cam = EPISODE_S * CAMERA_HZ
        rng = np.random.default_rng(ep)
        state_t = t0 + np.arange(n_state, dtype=np.int64) * (10**9 // STATE_HZ)
        cam_t = t0 + np.arange(n_cam, dtype=np.int64) * (10**9 // CAMERA_HZ)
        blobs = camera_frames(ep, n_cam)
        all_blobs += blobs
        path = root / "src" / f"episode_{ep}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"episode_{ep:03d}") as rec:
            rec.log_scalars("/joints/position",
                            timelines={"real_time": state_t.astype("datetime64[ns]")},
                            values=rng.normal(size=(n_state, 7)).astype(np.float32))
            rec.log_scalars("/action/delta",
                            timelines={"real_time": state_t.astype("datetime64[ns]")},
                            values=rng.normal(size=(n_state, 7)).astype(np.float32) * 0.01)
            rec.log_encoded_images("/cam0/rgb",
                                   timelines={"real_time": cam_t.astype("datetime64[ns]")},
                                   blobs=blobs, media_type="image/jpeg")
        paths.append(path)
    dataset.register(paths, progress=False).wait()
    return dataset, all_blobs


def numeric_fields() -> dict[str, Field]:
    window = tuple(k / ACTION_HZ for k in range(ACTION_STEPS))
    return {"state": Field(JOINTS, NumericDecoder()),
            "action": Field(ACTION, NumericDecoder(), window=window)}


def all_fields() -> dict[str, Field]:
    return {**numeric_fields(), "camera": Field(CAMERA, ImageDecoder())}


SAMPLING = FixedRateSampling(rate_hz=GRID_HZ)


# ----------------------------------------------------------------------------- measuring
def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_loader(make: Callable[[], DataLoader[Any]], epochs: int = 1
               ) -> tuple[float, float, float]:
    """(samples/s wall, seconds to the first batch, samples per CPU-second).

    The wall rate counts everything from creating the iterator (worker start-up included).
    The machine is shared, so the CPU-time rate is printed too: it is what the loader costs.
    """
    loader = make()
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    first_at = 0.0
    samples = 0
    for _ in range(epochs):
        for batch in loader:
            samples += len(batch["state"])
            if not first_at:
                first_at = time.perf_counter()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - c0
    return samples / wall, first_at - t0, samples / max(cpu, 1e-9)


def bare_decode_rate(blobs: list[bytes], threads: int) -> float:
    """JPEG decodes per second of ``blobs`` to ``[H, W, 3]`` arrays (simplejpeg when installed),
    on ``threads`` threads: the physical limit of a JPEG field."""
    def decode_all(part: list[bytes]) -> int:
        for blob in part:
            decode_image(blob)
        return len(part)

    t0 = time.perf_counter()
    if threads == 1:
        decode_all(blobs)
    else:
        parts = [blobs[i::threads] for i in range(threads)]
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(decode_all, parts))
    return len(blobs) / (time.perf_counter() - t0)


def bare_numeric_rate(dataset: DatasetEntry, num_samples: int) -> float:
    """Gather state rows and 16-row action windows with numpy (same sizes as the loader)."""
    seg = dataset.open_segment(dataset.segment_ids()[0])
    state = seg.column(JOINTS, "real_time")
    action = seg.column(ACTION, "real_time")
    state_v = state.values.flatten().to_numpy().reshape(-1, 7)
    action_v = action.values.flatten().to_numpy().reshape(-1, 7)
    rng = np.random.default_rng(0)
    limit = len(state_v) - ACTION_STEPS
    t0 = time.perf_counter()
    done = 0
    while done < num_samples:
        rows = rng.integers(0, limit, size=BATCH)
        s = torch.from_numpy(state_v[rows])
        a = torch.from_numpy(action_v[rows[:, None] + np.arange(ACTION_STEPS)])
        _ = (s, a)
        done += BATCH
    return done / (time.perf_counter() - t0)


# ----------------------------------------------------------------------------- parts
def bench_numeric(dataset: DatasetEntry) -> float:
    print("1. numeric fields only (state + 16-step action window), num_workers=0")
    source = DataSource(dataset)
    mds = RerunMapDataset(source, "real_time", numeric_fields(), timeline_sampling=SAMPLING)
    ids = RerunIterableDataset(source, "real_time", numeric_fields(), timeline_sampling=SAMPLING)
    n = len(mds)
    limit = bare_numeric_rate(dataset, n * NUMERIC_EPOCHS)
    rates = {}
    for name, make in (
            ("map, shuffle=True", lambda: DataLoader(mds, batch_size=BATCH, shuffle=True)),
            ("iterable, SampleShuffle", lambda: DataLoader(ids, batch_size=BATCH))):
        runs = [run_loader(make, NUMERIC_EPOCHS) for _ in range(REPEATS)]
        rate, cpu_rate = median(r[0] for r in runs), median(r[2] for r in runs)
        rates[name] = rate
        verdict = "met" if rate >= 50_000 else "MISSED"
        report(name, f"{rate:,.0f} samples/s", f"{limit:,.0f}/s", rate / limit,
               f"target >= 50,000: {verdict}")
        print(f"  {'':<46} per CPU-second: {cpu_rate:,.0f} samples")
    return rates["map, shuffle=True"]


def bench_camera(dataset: DatasetEntry, blobs: list[bytes]) -> dict[str, float]:
    """Each loader run is paired with bare decodes measured right before it (the machine is
    shared, so its speed drifts during the run); ratios are medians over the pairs."""
    cpus = len(os.sched_getaffinity(0))
    print(f"2. state + action + 224x224 JPEG camera ({len(blobs):,} JPEGs, "
          f"{np.mean([len(b) for b in blobs]) / 1e3:.1f} KB each; {cpus} CPUs)")
    sample = blobs[:: max(1, len(blobs) // 1200)]
    source = DataSource(dataset)
    results: dict[str, float] = {}
    for kind in ("map", "iterable"):
        for workers in (0, 2):
            if kind == "map":
                ds: Any = RerunMapDataset(source, "real_time", all_fields(),
                                          timeline_sampling=SAMPLING)

                def make(ds: Any = ds, workers: int = workers) -> DataLoader[Any]:
                    return DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers)
            else:
                ds = RerunIterableDataset(source, "real_time", all_fields(),
                                          timeline_sampling=SAMPLING)

                def make(ds: Any = ds, workers: int = workers) -> DataLoader[Any]:
                    return DataLoader(ds, batch_size=BATCH, num_workers=workers)
            pairs = []
            for _ in range(REPEATS):
                one, many = bare_decode_rate(sample, 1), bare_decode_rate(sample, cpus)
                pairs.append((run_loader(make), one, many))
            rate = median(r[0] for r, _, _ in pairs)
            first = median(r[1] for r, _, _ in pairs)
            cpu_rate = median(r[2] for r, _, _ in pairs)
            one = median(o for _, o, _ in pairs)
            many = median(m for _, _, m in pairs)
            to_one = median(r[0] / o for r, o, _ in pairs)
            to_many = median(r[0] / m for r, _, m in pairs)
            results[f"{kind}{workers}"] = rate
            target = ""
            if workers == 0:
                verdict = "met" if to_one >= 0.8 else "MISSED"
                target = f"target >= 80 % of bare (one core): {verdict}"
            report(f"{kind}, num_workers={workers} (first batch {first * 1e3:.0f} ms)",
                   f"{rate:,.0f} samples/s", f"{one:,.0f}/s", to_one, target)
            print(f"  {'':<46} vs bare on {cpus} threads {many:,.0f}/s: ratio {to_many:.2f}; "
                  f"{cpu_rate:,.0f} samples per CPU-second")
    return results


def write_tiny(path: Path, i: int) -> Path:
    t = (EPOCH_NS + i * 10**9 + np.arange(40, dtype=np.int64) * 10**7).astype("datetime64[ns]")
    with rayform.RecordingWriter(path, recording_id=f"seg{i:05d}") as rec:
        rec.log_scalars("/joints/position", timelines={"real_time": t},
                        values=np.zeros((40, 7), np.float32))
        rec.log_scalars("/action/delta", timelines={"real_time": t},
                        values=np.zeros((40, 7), np.float32))
    return path


def bench_index(root: Path) -> float:
    print(f"3. SampleIndex.build over {INDEX_SEGMENTS:,} segments")
    catalog = Catalog.create(root / "many")
    dataset = catalog.create_dataset("many")
    t0 = time.perf_counter()
    paths = [write_tiny(root / "tiny" / f"{i}.rfr", i) for i in range(INDEX_SEGMENTS)]
    for lo in range(0, INDEX_SEGMENTS, 1000):
        dataset.register(paths[lo:lo + 1000], progress=False).wait()
    print(f"  (setup: wrote and registered in {time.perf_counter() - t0:.1f} s)")
    dataset = Catalog.open(catalog.url).get_dataset("many")
    fields = numeric_fields()
    sampling = FixedRateSampling(rate_hz=GRID_HZ)

    def build() -> SampleIndex:
        return SampleIndex.build(DataSource(dataset), "real_time", fields,
                                 timeline_sampling=sampling)

    def timed(fn: Callable[[], object]) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    index = build()
    assert len(index.segments) == INDEX_SEGMENTS
    t_build = median(timed(build) for _ in range(3))
    t_limit = median(timed(dataset.index_ranges_arrow) for _ in range(3))
    verdict = "met" if t_build <= 1.0 else "MISSED"
    report("SampleIndex.build", f"{t_build * 1e3:.0f} ms", f"{t_limit * 1e3:.0f} ms",
           t_build / max(t_limit, 1e-9), f"target <= 1000 ms: {verdict}")
    return t_build


def main() -> None:
    torch.set_num_threads(1)
    print(f"rayform dataloader benchmark{' (quick)' if QUICK else ''}: {NUM_EPISODES} episodes x "
          f"{EPISODE_S} s, grid {GRID_HZ} Hz, batch {BATCH}; python {sys.version.split()[0]}, "
          f"torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-dl-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        dataset, blobs = write_workload(root)
        print(f"  (setup: wrote and registered the workload in {time.perf_counter() - t0:.1f} s)")
        if 1 in PARTS:
            bench_numeric(dataset)
        if 2 in PARTS:
            bench_camera(dataset, blobs)
        if 3 in PARTS:
            bench_index(root)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"4. peak RSS: {own:,.0f} MiB (this process), {kids:,.0f} MiB (largest worker)")


if __name__ == "__main__":
    main()
