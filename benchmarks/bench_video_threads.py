"""Where the parallelism of ``BlockShuffle`` video decoding should live: Python threads or FFmpeg's.

Run ``python benchmarks/bench_video_threads.py`` (``BENCH_QUICK=1`` for a short run; ``ROUNDS=n``
sets the interleaved rounds, default 5). Untargeted: it prints figures for a decision, and exits 1
only when the frames of the configurations differ.

On the standard workload's H.264 camera (``benchmarks/workload.py``, 30 Hz grid, blocks of 128
consecutive frames), in one process, each round running every configuration once on a fresh
dataset (2,048 samples; one warm-up round first), interleaved so that the machine's other load
falls on all of them alike:

- **default**: ``VideoFrameDecoder()`` (FFmpeg ``thread_count=1``), two blocks prepared at once,
  each decoded by one Python thread;
- **one block, FFmpeg threads**: ``thread_count=2`` (FFmpeg frame and slice threads), one block at
  a time: one Python thread feeding packets, the parallelism inside FFmpeg;
- **two blocks, FFmpeg threads**: ``thread_count=2`` with two blocks at once;
- **bare, one thread**: the same kind of runs (128 frames from a keyframe) decoded and converted
  into one buffer by a plain PyAV loop in this process, no loader: the CPU floor of a frame.

Printed per configuration: the medians of samples/s and of CPU seconds per sample (this process,
all threads), and the median over rounds of its rate divided by the default's in the same round.
On a shared machine the rate ratio also measures how much CPU a configuration takes from the other
processes (more runnable threads get a larger share), so read it beside the CPU per sample. Before
timing, the first 256 frames of each configuration are compared with the default's.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch
import workload as w
from torch.utils.data import DataLoader

import rayform.dataloader._iterable_dataset as iterable_module
from rayform.dataloader import BlockShuffle, DataSource, Field, RerunIterableDataset
from rayform.decoders import VideoFrameDecoder
from rayform.media._rgb_scaler import RgbScaler

SAMPLES = 512 if w.QUICK else 2048
ROUNDS = 1 if w.QUICK else int(os.environ.get("ROUNDS", "5"))
BLOCK = 128
SEED = 7
_TWO_BLOCKS = iterable_module.fetch_threads


def dataset(source: DataSource, *, thread_count: int, one_block: bool, batched: bool
            ) -> RerunIterableDataset:
    """The camera field over ``BlockShuffle`` blocks; ``one_block``: one block prepared at once."""
    iterable_module.fetch_threads = (lambda *_, **__: 1) if one_block else _TWO_BLOCKS
    try:
        ds = RerunIterableDataset(
            source, w.INDEX, {"video": Field(w.VIDEO, VideoFrameDecoder(thread_count=thread_count))},
            timeline_sampling=w.FixedRateSampling(rate_hz=w.CAMERA_HZ), fetch_block_size=BLOCK,
            shuffle_strategy=BlockShuffle(), batch_size=w.BATCH if batched else None)
    finally:
        iterable_module.fetch_threads = _TWO_BLOCKS
    ds.set_epoch(SEED)
    return ds


def batches(ds: RerunIterableDataset) -> Iterator[Any]:
    """Batches of frames: whole batches from a batching dataset, else lists of samples."""
    if ds.batch_size is not None:
        return (batch["video"] for batch in DataLoader(ds, batch_size=None))
    return iter(DataLoader(ds, batch_size=w.BATCH, collate_fn=list))


def loader_run(ds: RerunIterableDataset) -> tuple[float, float]:
    """(samples/s, CPU seconds per sample) over the first SAMPLES samples."""
    seen = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for batch in batches(ds):
        seen += len(batch)
        if seen >= SAMPLES:
            break
    return seen / (time.perf_counter() - t0), (time.process_time() - cpu0) / seen


def first_frames(ds: RerunIterableDataset, count: int) -> torch.Tensor:
    frames: list[torch.Tensor] = []
    for batch in batches(ds):
        frames.extend(batch if isinstance(batch, list) else list(batch))
        if len(frames) >= count:
            break
    return torch.stack([f["video"] if isinstance(f, dict) else f for f in frames[:count]])


def bare_run(streams: list[list[bytes]]) -> tuple[float, float]:
    """(frames/s, CPU seconds per frame): runs of BLOCK frames from keyframes, one thread."""
    rng = np.random.default_rng(SEED)
    out = np.empty((BLOCK, w.IMAGE, w.IMAGE, 3), np.uint8)
    scaler, frame_bytes = RgbScaler(), w.IMAGE * w.IMAGE * 3
    decoded = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    while decoded < SAMPLES:
        packets = streams[int(rng.integers(len(streams)))]
        length = min(BLOCK, len(packets))
        start = int(rng.integers(0, len(packets) - length + 1)) // w.GOP * w.GOP
        context = av.CodecContext.create("h264", "r")
        context.thread_count = 1
        slot = 0
        for data in [*packets[start:start + length], None]:
            for frame in context.decode(None if data is None else av.Packet(data)):
                if not scaler.convert_at(frame, out.ctypes.data + slot * frame_bytes):
                    out[slot] = frame.to_ndarray(format="rgb24")
                slot += 1
        decoded += slot
    return decoded / (time.perf_counter() - t0), (time.process_time() - cpu0) / decoded


def main() -> int:
    torch.set_num_threads(1)
    print(f"video threads: H.264 {w.IMAGE}x{w.IMAGE}, BlockShuffle blocks of {BLOCK}, "
          f"{SAMPLES} samples per run, {ROUNDS} interleaved rounds, {w.cores()} cores")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-video-threads-") as tmp:
        workload = w.load(Path(tmp), w.Spec(video=True))
        source = DataSource(workload.dataset)
        configs: dict[str, Callable[[bool], RerunIterableDataset]] = {
            "default": lambda b: dataset(source, thread_count=1, one_block=False, batched=b),
            "one block, FFmpeg threads": lambda b: dataset(source, thread_count=2, one_block=True,
                                                           batched=b),
            "two blocks, FFmpeg threads": lambda b: dataset(source, thread_count=2,
                                                            one_block=False, batched=b),
        }
        reference = first_frames(configs["default"](True), 256)
        same = all(torch.equal(first_frames(make(True), 256), reference)
                   for make in configs.values())
        print(f"  frames equal to the default's: {same}")
        for batched in (False, True):
            print(f"  {'batched (batch_size=32)' if batched else 'per sample'}, "
                  f"load {os.getloadavg()[0]:.1f}")
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
            results["bare, one thread"] = []
            for round_ in range(ROUNDS + 1):
                for name, make in configs.items():
                    measured = loader_run(make(batched))
                    if round_:  # round 0 warms up (threads, buffer pool, page cache)
                        results[name].append(measured)
                measured = bare_run(workload.h264)
                if round_:
                    results["bare, one thread"].append(measured)
            base = results["default"]
            for name, runs in results.items():
                ratio = statistics.median(r[0] / b[0] for r, b in zip(runs, base, strict=True))
                print(f"    {name:28s} {statistics.median(r[0] for r in runs):7,.0f} samples/s"
                      f"  CPU {statistics.median(r[1] for r in runs) * 1e3:.3f} ms per sample"
                      f"  rate / default {ratio:.2f}")
            print(f"    (load {os.getloadavg()[0]:.1f})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
