"""Video benchmark: the standard workload's H.264 camera through the datasets, against honest limits.

Run ``python benchmarks/bench_video.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run,
``BENCH_FORMAT=yuv420p`` to measure the YUV output instead of RGB). Full mode exits 1 when a
target is missed.

The workload is ``benchmarks/workload.py`` with ``video=True`` (the 224×224 camera also stored
as H.264, a keyframe every 30 frames, no B-frames). Every limit is bare PyAV decoding of the same
packets on all cores (a process per core), with the same output format:

- **sequential**: every frame of every episode decoded and converted (episodes spread over the
  cores): the limit of ``BlockShuffle`` on the 30 Hz grid;
- **the loader's GOP plan**: for exactly the blocks (iterable) or batches (map) the loader reads,
  every sample's frame and the keyframe before it; per block and segment the overlapping
  keyframe-to-frame ranges are merged into runs, each run decoded once from its keyframe and its
  wanted frames converted; runs spread over the cores. Frames decoded per sample is printed
  beside the rate. The limit of ``SampleShuffle`` and of the shuffled map dataset.
- the full workload (state, action window, JPEG and H.264 cameras, 15 Hz grid): the sum of the
  per-sample costs (the GOP plan of its blocks, plus bare JPEG decode of the same blobs), each
  measured on all cores.

Targets (the video field alone, 30 Hz grid, ``num_workers=0``): every loader >= 0.8 of its limit,
each line judged on its own. The loaders use the default decoder (in-process decode threads); the
``worker processes`` lines (``decode_processes=None``: one decode process per core, off this
process's GIL) are printed beside them in full mode, untargeted, for comparison. CPU per sample
counts this process and the decode workers. ``BlockShuffle`` is measured twice
against the same limit: per sample (``DataLoader(ds, batch_size=32)``, the Rerun-compatible
surface) and batched
(``RerunIterableDataset(batch_size=32)`` with ``DataLoader(ds, batch_size=None)``: batches cut
from the decoded frame buffers as views, no per-sample work), the path to take for throughput.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import torch
import workload as w
from av.video.reformatter import VideoReformatter
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
)
from rayform.dataloader._partition import StreamPosition
from rayform.decoders import VideoFrameDecoder

OUTPUT_FORMAT = os.environ.get("BENCH_FORMAT", "rgb")
LOADER_SAMPLES = 256 if w.QUICK else 2048
FETCH_BLOCK = 128
REPEATS = 1 if w.QUICK else 3
SEED = 7

# (episode, first row, last row, wanted rows): one forward decode from a keyframe.
Job = tuple[int, int, int, tuple[int, ...]]
_STREAMS: list[list[bytes]] = []  # set before the worker processes fork


# ---------------------------------------------------------------------------- bare decoding
def _convert(frame: Any, reformatter: Any) -> Any:
    if OUTPUT_FORMAT == "rgb":
        return reformatter.reformat(frame, format="rgb24", threads=1).to_ndarray()
    return [np.frombuffer(p, np.uint8).copy() for p in frame.planes]


def _decode_jobs(jobs: Sequence[Job]) -> tuple[int, float]:
    """Decode ``jobs`` with fresh one-thread decoders; returns the frames decoded and the CPU
    seconds it took."""
    cpu0 = time.process_time()
    reformatter = VideoReformatter()
    decoded = 0
    for episode, first, last, wanted in jobs:
        ctx = av.CodecContext.create("h264", "r")
        ctx.thread_count = 1
        keep = set(wanted)
        row = first
        for data in _STREAMS[episode][first:last + 1]:
            for frame in ctx.decode(av.Packet(data)):
                if row in keep:
                    _convert(frame, reformatter)
                row += 1
                decoded += 1
        for frame in ctx.decode(None):  # flush: the frames still in the decoder
            if row in keep:
                _convert(frame, reformatter)
            row += 1
    return decoded, time.process_time() - cpu0


def bare_seconds(pool: Any, jobs: list[Job]) -> tuple[float, float]:
    """Seconds to decode ``jobs`` spread over the pool's processes (longest first), and the CPU
    seconds the processes spent (robust to the machine's other load)."""
    order = sorted(jobs, key=lambda j: j[1] - j[2])
    parts = [order[i::w.cores()] for i in range(w.cores())]
    t0 = time.perf_counter()
    done = pool.map(_decode_jobs, parts)
    return time.perf_counter() - t0, sum(cpu for _, cpu in done)


def sequential_jobs(workload: w.Workload) -> list[Job]:
    """Each episode decoded from its first frame to its last, every frame converted."""
    return [(e, 0, len(s) - 1, tuple(range(len(s)))) for e, s in enumerate(workload.h264)]


def plan_jobs(index: Any, blocks: list[npt.NDArray[np.int64]], frame_ns: list[npt.NDArray[np.int64]],
              keyframes: list[npt.NDArray[np.bool_]], episode_of: dict[str, int]
              ) -> tuple[list[Job], int]:
    """The GOP plan of ``blocks`` (see the module docstring) and the frames it decodes."""
    jobs: list[Job] = []
    decoded = 0
    for block in blocks:
        seg_pos, values = index.locate(block)
        wanted: dict[int, list[int]] = {}
        for pos, value in zip(seg_pos.tolist(), values.tolist(), strict=True):
            episode = episode_of[index.segment_id(pos)]
            row = int(np.searchsorted(frame_ns[episode], value, side="right")) - 1
            wanted.setdefault(episode, []).append(row)
        for episode, rows in wanted.items():
            key_rows = np.flatnonzero(keyframes[episode])
            spans = sorted((int(key_rows[np.searchsorted(key_rows, r, side="right") - 1]), r)
                           for r in rows)
            runs: list[list[int]] = []
            for start, row in spans:
                if runs and start <= runs[-1][1]:
                    runs[-1][1] = max(runs[-1][1], row)
                    runs[-1].append(row)
                else:
                    runs.append([start, row, row])
            for start, end, *rows_in in runs:
                jobs.append((episode, start, end, tuple(rows_in)))
                decoded += end - start + 1
    return jobs, decoded


# ---------------------------------------------------------------------------------- loaders
def video_fields(*, processes: int | None = 0) -> dict[str, Field]:
    """The camera field; ``processes=0``: the default decoder (in-process threads), ``None``:
    decoded in worker processes, one per core (``decode_processes=None``)."""
    return {"video": Field(w.VIDEO, VideoFrameDecoder(output_format=OUTPUT_FORMAT,
                                                      decode_processes=processes))}


def process_fields() -> dict[str, Field]:
    return video_fields(processes=None)


def full_fields() -> dict[str, Field]:
    return {**w.jpeg_fields(), **video_fields()}


def start_workers() -> list[int]:
    """Start this process's video decode workers (they start on first use, in the background,
    and calls decode in-process until they are up) and return their pids; none for YUV."""
    procs = VideoFrameDecoder(output_format=OUTPUT_FORMAT,
                              decode_processes=None).process_decoder()
    if procs is None or not procs.processes.wait_ready(60.0):
        return []
    return procs.processes.worker_pids


WORKER_PIDS: list[int] = []
# CPU seconds per sample of the last loader run: this process's, the decode workers'.
LAST_CPU_SPLIT: list[float] = [0.0, 0.0]


def worker_cpu_seconds() -> float:
    """CPU time of the video decode worker processes."""
    total = 0.0
    for pid in WORKER_PIDS:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def loader_cpu_seconds() -> float:
    """CPU time of this process, its finished children and the video decode workers."""
    return w.cpu_seconds() + worker_cpu_seconds()


def note_cpu_split(own0: float, workers0: float, samples: int) -> None:
    LAST_CPU_SPLIT[:] = [(w.cpu_seconds() - own0) / samples,
                         (worker_cpu_seconds() - workers0) / samples]


def count(batches: Iterator[Any], limit: int) -> int:
    seen = 0
    for batch in batches:
        seen += len(batch)
        if seen >= limit:
            break
    return seen


def iterable_run(ds: RerunIterableDataset) -> tuple[float, float, list[npt.NDArray[np.int64]]]:
    """(samples/s over the first LOADER_SAMPLES samples, CPU seconds per sample, the blocks
    they came from). A dataset with ``batch_size`` yields whole batches (``DataLoader(ds,
    batch_size=None)``); otherwise samples, which the DataLoader batches."""
    ds.set_epoch(SEED)
    stream = ds._order.stream(ds._pipeline, StreamPosition.current(), epoch=ds.epoch, start=0)
    limit = min(LOADER_SAMPLES, len(ds))
    blocks, total = [], 0
    for start, end in stream.fetches:
        if total >= limit:
            break
        blocks.append(stream.indices[start:end])
        total += end - start
    t0, cpu0 = time.perf_counter(), loader_cpu_seconds()
    own0, workers0 = w.cpu_seconds(), worker_cpu_seconds()
    if ds.batch_size is None:
        seen = count(iter(DataLoader(ds, batch_size=w.BATCH, collate_fn=list)), limit)
    else:
        seen = count((batch["video"] for batch in DataLoader(ds, batch_size=None)), limit)
    rate, cpu_s = seen / (time.perf_counter() - t0), (loader_cpu_seconds() - cpu0) / seen
    note_cpu_split(own0, workers0, seen)
    return rate, cpu_s, blocks


def map_run(ds: RerunMapDataset) -> tuple[float, float, list[npt.NDArray[np.int64]]]:
    limit = min(LOADER_SAMPLES, len(ds))
    sampler = BatchSampler(RandomSampler(ds, generator=torch.Generator().manual_seed(SEED)),
                           w.BATCH, drop_last=False)
    batches = []
    for batch in sampler:
        if sum(len(b) for b in batches) >= limit:
            break
        batches.append(np.asarray(batch, dtype=np.int64))
    loader = DataLoader(ds, batch_size=w.BATCH, shuffle=True, collate_fn=list,
                        generator=torch.Generator().manual_seed(SEED))
    t0, cpu0 = time.perf_counter(), loader_cpu_seconds()
    own0, workers0 = w.cpu_seconds(), worker_cpu_seconds()
    seen = count(iter(loader), limit)
    rate, cpu_s = seen / (time.perf_counter() - t0), (loader_cpu_seconds() - cpu0) / seen
    note_cpu_split(own0, workers0, seen)
    return rate, cpu_s, batches


# ------------------------------------------------------------------------------------- main
def main() -> int:
    torch.set_num_threads(1)
    verdicts = w.Verdicts(f"video benchmark: H.264 {w.IMAGE}x{w.IMAGE} {w.CAMERA_HZ} Hz GOP "
                          f"{w.GOP}, output {OUTPUT_FORMAT!r}, num_workers=0, limits: bare PyAV "
                          "on all cores (processes)")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-video-") as tmp:
        t0 = time.perf_counter()
        workload = w.load(Path(tmp), w.Spec(video=True))
        frames = sum(len(s) for s in workload.h264)
        print(f"  ({w.Spec().episodes} episodes, {frames:,} frames; workload ready in "
              f"{time.perf_counter() - t0:.1f} s)")
        _STREAMS[:] = workload.h264
        source = DataSource(workload.dataset)
        ids = workload.dataset.segment_ids()
        episode_of = {sid: int(sid.rsplit("_", 1)[1]) for sid in ids}
        frame_ns = [np.asarray(workload.dataset.open_segment(sid).column(w.VIDEO, w.INDEX).index,
                               dtype=np.int64) for sid in sorted(ids)]
        with mp.get_context("fork").Pool(w.cores()) as pool:
            pool.map(_decode_jobs, [[] for _ in range(w.cores())])  # start the processes
            if not w.QUICK:  # the worker-process lines run in full mode only
                WORKER_PIDS[:] = start_workers()
                print(f"  (video decode worker processes: {len(WORKER_PIDS)})")
            run_measures(verdicts, pool, workload, source, episode_of, frame_ns)
    return verdicts.exit_code()


def run_measures(verdicts: w.Verdicts, pool: Any, workload: w.Workload, source: DataSource,
                 episode_of: dict[str, int], frame_ns: list[npt.NDArray[np.int64]]) -> None:
    def video_ds(strategy: Any, grid_hz: float, fields: Callable[[], dict[str, Field]], *,
                 batch_size: int | None = None) -> RerunIterableDataset:
        return RerunIterableDataset(source, w.INDEX, fields(),
                                    timeline_sampling=w.FixedRateSampling(rate_hz=grid_hz),
                                    fetch_block_size=FETCH_BLOCK, shuffle_strategy=strategy,
                                    batch_size=batch_size)

    grid30 = RerunMapDataset(source, w.INDEX, video_fields(),
                             timeline_sampling=w.FixedRateSampling(rate_hz=w.CAMERA_HZ))
    grid30_procs = RerunMapDataset(source, w.INDEX, process_fields(),
                                   timeline_sampling=w.FixedRateSampling(rate_hz=w.CAMERA_HZ))
    seq_jobs = sequential_jobs(workload)
    seq_frames = sum(j[2] - j[1] + 1 for j in seq_jobs)
    print("(a) the video field alone, 30 Hz grid (one frame per sample)")
    # name -> (run, target): the default decoder (in-process threads) is judged; the worker
    # process lines (decode_processes=None) are printed beside it for comparison.
    cases: dict[str, tuple[Callable[[], tuple[float, float, list[npt.NDArray[np.int64]]]],
                           float | None]] = {
        "iterable BlockShuffle": (lambda: iterable_run(video_ds(BlockShuffle(), w.CAMERA_HZ,
                                                                video_fields)), 0.8),
        "iterable BlockShuffle, worker processes": (lambda: iterable_run(video_ds(
            BlockShuffle(), w.CAMERA_HZ, process_fields)), None),
        "iterable BlockShuffle, batched": (lambda: iterable_run(video_ds(
            BlockShuffle(), w.CAMERA_HZ, video_fields, batch_size=w.BATCH)), 0.8),
        "iterable BlockShuffle, batched, worker processes": (lambda: iterable_run(video_ds(
            BlockShuffle(), w.CAMERA_HZ, process_fields, batch_size=w.BATCH)), None),
        "iterable SampleShuffle": (lambda: iterable_run(video_ds(SampleShuffle(), w.CAMERA_HZ,
                                                                 video_fields)), 0.8),
        "map, shuffled sampler": (lambda: map_run(grid30), 0.8),
        "map, shuffled sampler, worker processes": (lambda: map_run(grid30_procs), None),
    }
    for name, (run, target) in cases.items():
        if w.QUICK and target is None:
            continue  # the comparison lines: full mode only
        pairs = []
        for _ in range(REPEATS):
            rate, cpu_s, blocks = run()
            samples = sum(len(b) for b in blocks)
            if name.startswith("iterable BlockShuffle"):
                wall_s, bare_cpu_s = bare_seconds(pool, seq_jobs)
                limit, bare_cpu_s = seq_frames / wall_s, bare_cpu_s / seq_frames
                _, decoded = plan_jobs(grid30.sample_index, blocks, frame_ns, workload.keyframes,
                                       episode_of)
                how = ("limit: bare sequential decode of every frame, episodes over all cores; "
                       f"the loader's GOP plan decodes {decoded / samples:.2f} frames per sample")
            else:
                jobs, decoded = plan_jobs(grid30.sample_index, blocks, frame_ns, workload.keyframes,
                                          episode_of)
                wall_s, bare_cpu_s = bare_seconds(pool, jobs)
                limit, bare_cpu_s = samples / wall_s, bare_cpu_s / samples
                how = (f"limit: the same GOP plan bare on all cores; "
                       f"{decoded / samples:.1f} frames decoded per sample")
            how += (f"; CPU per sample: loader {cpu_s * 1e3:.2f} ms, bare "
                    f"{bare_cpu_s * 1e3:.2f} ms")
            if LAST_CPU_SPLIT[1]:  # decoded in the worker processes: where the CPU went
                how += (f" (this process {LAST_CPU_SPLIT[0] * 1e3:.2f}, decode workers "
                        f"{LAST_CPU_SPLIT[1] * 1e3:.2f})")
            pairs.append((rate, limit, how))
        middle = sorted(pairs, key=lambda p: p[0] / p[1])[len(pairs) // 2]
        verdicts.line(name, middle[0], "samples/s", middle[1], target=target, how=middle[2])

    print("(b) full workload (state, action[16], JPEG, H.264), 15 Hz grid; limit: the sum of "
          "the per-sample costs on all cores")
    for name, strategy in (("iterable SampleShuffle", SampleShuffle()),
                           ("iterable BlockShuffle", BlockShuffle())):
        ds = video_ds(strategy, w.GRID_HZ, full_fields)
        rate, _, blocks = iterable_run(ds)
        samples = sum(len(b) for b in blocks)
        jobs, decoded = plan_jobs(ds.sample_index, blocks, frame_ns, workload.keyframes,
                                  episode_of)
        video_s, _ = bare_seconds(pool, jobs)
        jpeg_s = samples / w.bare_jpeg_rate(workload.all_jpegs[:samples], w.cores())
        verdicts.line(name, rate, "samples/s", samples / (video_s + jpeg_s),
                      how=f"{decoded / samples:.1f} frames decoded per sample; video "
                          f"{video_s * 1e3 / samples:.2f} + JPEG {jpeg_s * 1e3 / samples:.2f} "
                          "ms per sample on all cores")


if __name__ == "__main__":
    sys.exit(main())
