"""Video benchmark (issue 4): H.264 224x224 camera through the datasets vs bare PyAV decoding.

Run ``python benchmarks/bench_video.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run,
``BENCH_FORMAT=yuv420p`` to measure the YUV output instead of RGB).

The workload is the standard one (8 episodes x 20 s; joint positions and action deltas 7-D at
100 Hz; a 224x224 JPEG camera at 30 Hz) plus an H.264 224x224 camera at 30 Hz with a keyframe every
30 frames (no B-frames), written by the project's own writer. In one run it measures:

1. the physical limits on the same packets, one thread, same output format: the bare sequential
   decode rate (every frame decoded and converted, in order) and the bare random-access rate
   (decoder started at the prior keyframe, decoded forward to a random frame, that frame
   converted);
2. samples/s of ``RerunIterableDataset`` with ``SampleShuffle`` and ``BlockShuffle`` and of
   ``RerunMapDataset`` with a shuffled sampler (``DataLoader(shuffle=True, batch_size=32)``),
   ``num_workers=0``, for (a) the video field alone on a 30 Hz grid (one frame per sample: the
   targets' comparison) and (b) the full standard workload + video on its 15 Hz grid.

Targets: BlockShuffle >= 70 % of the bare sequential rate; shuffled random access (SampleShuffle
and the shuffled map dataset) >= 80 % of the bare random-access rate. They are judged on (a), where
one sample is one frame. On the 15 Hz grid of (b) every sample needs two frames decoded (30 Hz
video) and a JPEG, so (b) is printed against its own limit: the bare single-thread cost of one
sample's video (every frame decoded, the sampled ones converted; or one random access) plus its
JPEG decode. The cores are shared, so every figure is measured once per round, rounds
interleaved, and the round with the median ratio is printed.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import torch
from av.video.reformatter import VideoReformatter
from PIL import Image
from torch.utils.data import DataLoader

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
)
from rayform.decoders import VideoFrameDecoder, encode_video_packets

QUICK = os.environ.get("BENCH_QUICK") == "1"
OUTPUT_FORMAT = os.environ.get("BENCH_FORMAT", "rgb")
NUM_EPISODES = 2 if QUICK else 8
EPISODE_S = 4 if QUICK else 20
SIZE = 224
CAMERA_HZ = 30
GOP = 30
NUMERIC_HZ = 100
NUM_JOINTS = 7
ACTION_STEPS = 16
GRID_HZ = 15
BATCH = 32
FETCH_BLOCK = 128
RANDOM_FRAMES = 60 if QUICK else 400
LOADER_SAMPLES = 256 if QUICK else 2400
REPEATS = 1 if QUICK else 3
EPOCH_NS = 1_700_000_000_000_000_000

VIDEO = "/cam_h264:VideoStream:sample"
JPEG = "/cam_jpeg:EncodedImage:blob"
STATE = "/joints/position:Scalars:scalars"
ACTION = "/action:Scalars:scalars"


# ---------------------------------------------------------------------------------- workload
def camera_frames(num_frames: int, seed: int) -> npt.NDArray[np.uint8]:
    """Smooth moving colour fields with sensor noise: what a static robot camera sees."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    out = np.empty((num_frames, SIZE, SIZE, 3), dtype=np.uint8)
    for i in range(num_frames):
        rgb = np.stack([128 + 100 * np.sin((xx + 2 * i + seed) / 20.0),
                        128 + 100 * np.cos((yy - i) / 25.0),
                        128 + 80 * np.sin((xx + yy + 3 * i) / 30.0)], axis=-1)
        rgb += rng.normal(0.0, 3.0, rgb.shape)
        out[i] = np.clip(rgb, 0, 255).astype(np.uint8)
    return out


def jpeg(frame: npt.NDArray[np.uint8]) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


Workload = tuple[DatasetEntry, list[list[bytes]], list[npt.NDArray[np.bool_]], list[list[bytes]]]


def build_workload(root: Path) -> Workload:
    """The dataset, and per episode its H.264 packets, keyframe flags and JPEG blobs."""
    catalog = Catalog.create(root / "catalog")
    dataset = catalog.create_dataset("standard")
    paths = []
    streams: list[list[bytes]] = []
    flags: list[npt.NDArray[np.bool_]] = []
    jpegs: list[list[bytes]] = []
    rng = np.random.default_rng(0)
    for episode in range(NUM_EPISODES):
        n_num = EPISODE_S * NUMERIC_HZ
        n_cam = EPISODE_S * CAMERA_HZ
        t_num = EPOCH_NS + np.arange(n_num, dtype=np.int64) * (1_000_000_000 // NUMERIC_HZ)
        t_cam = EPOCH_NS + np.round(np.arange(n_cam) * 1e9 / CAMERA_HZ).astype(np.int64)
        frames = camera_frames(n_cam, episode)
        packets, is_keyframe = encode_video_packets(frames, codec="h264", gop=GOP, fps=CAMERA_HZ)
        streams.append(packets)
        flags.append(is_keyframe)
        jpegs.append([jpeg(f) for f in frames])
        path = root / f"ep{episode}.rfr"
        with RecordingWriter(path, recording_id=f"ep{episode}") as rec:
            num_tl = {"time": t_num.astype("datetime64[ns]")}
            cam_tl = {"time": t_cam.astype("datetime64[ns]")}
            rec.log_scalars("/joints/position", timelines=num_tl,
                            values=rng.normal(size=(n_num, NUM_JOINTS)).astype(np.float32))
            rec.log_scalars("/action", timelines=num_tl,
                            values=rng.normal(size=(n_num, NUM_JOINTS)).astype(np.float32))
            rec.log_encoded_images("/cam_jpeg", timelines=cam_tl,
                                   blobs=jpegs[-1], media_type="image/jpeg")
            rec.log_video_stream("/cam_h264", timelines=cam_tl, samples=packets,
                                 is_keyframe=is_keyframe, codec="h264")
        paths.append(path)
    dataset.register(paths).wait()
    return dataset, streams, flags, jpegs


# ------------------------------------------------------------------------------- bare limits
def convert(frame: Any, reformatter: Any) -> Any:
    if OUTPUT_FORMAT == "rgb":
        return reformatter.reformat(frame, format="rgb24", threads=1).to_ndarray()
    return [np.frombuffer(p, np.uint8).copy() for p in frame.planes]


def bare_sequential(streams: list[list[bytes]], keep: Callable[[int], bool]) -> float:
    """Seconds to decode every frame of every stream in order, converting frames ``keep``s."""
    t0 = time.perf_counter()
    for packets in streams:
        ctx = av.CodecContext.create("h264", "r")
        ctx.thread_count = 1
        reformatter = VideoReformatter()
        i = 0
        for data in packets:
            for frame in ctx.decode(av.Packet(data)):
                if keep(i):
                    convert(frame, reformatter)
                i += 1
    return time.perf_counter() - t0


def bare_random_access(streams: list[list[bytes]], flags: list[npt.NDArray[np.bool_]],
                       count: int) -> float:
    """Frames/s: start at the prior keyframe, decode forward to a random frame, convert it."""
    rng = np.random.default_rng(1)
    picks = [(int(rng.integers(len(streams))), 0) for _ in range(count)]
    picks = [(s, int(rng.integers(len(streams[s])))) for s, _ in picks]
    reformatter = VideoReformatter()
    t0 = time.perf_counter()
    for stream_id, target in picks:
        packets = streams[stream_id]
        start = int(np.flatnonzero(flags[stream_id][:target + 1])[-1])
        ctx = av.CodecContext.create("h264", "r")
        ctx.thread_count = 1
        frame = None
        for data in packets[start:target + 1]:
            for frame in ctx.decode(av.Packet(data)):  # noqa: B007 - the last one is wanted
                pass
        convert(frame, reformatter)
    return count / (time.perf_counter() - t0)


def bare_jpeg(jpegs: list[list[bytes]], step: int) -> float:
    """Seconds per image to decode every ``step``-th JPEG to RGB (simplejpeg, else Pillow)."""
    try:
        import simplejpeg

        def decode(data: bytes) -> object:
            return simplejpeg.decode_jpeg(data, colorspace="RGB")
    except ImportError:
        def decode(data: bytes) -> object:
            return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    blobs = [b for episode in jpegs for b in episode[::step]]
    t0 = time.perf_counter()
    for data in blobs:
        decode(data)
    return (time.perf_counter() - t0) / len(blobs)


# ----------------------------------------------------------------------------------- loaders
def video_fields() -> dict[str, Field]:
    return {"cam_h264": Field(VIDEO, VideoFrameDecoder(output_format=OUTPUT_FORMAT))}


def standard_fields() -> dict[str, Field]:
    return {
        "state": Field(STATE, NumericDecoder()),
        "action": Field(ACTION, NumericDecoder(),
                        window=tuple(i / NUMERIC_HZ for i in range(ACTION_STEPS))),
        "cam_jpeg": Field(JPEG, ImageDecoder()),
        **video_fields(),
    }


def take(samples: Iterator[Any], count: int) -> int:
    seen = 0
    for sample in samples:
        if sample.get("cam_h264") is None:
            raise RuntimeError("a video sample decoded to None")
        seen += 1
        if seen >= count:
            break
    return seen


def iterable_rate(dataset: DatasetEntry, fields: Callable[[], dict[str, Field]], grid_hz: float,
                  strategy: Any, seed: int) -> float:
    ds = RerunIterableDataset(DataSource(dataset), "time", fields(),
                              timeline_sampling=FixedRateSampling(rate_hz=grid_hz),
                              fetch_block_size=FETCH_BLOCK, shuffle_strategy=strategy, seed=seed)
    count = min(LOADER_SAMPLES, len(ds))
    t0 = time.perf_counter()
    seen = take(iter(ds), count)
    return seen / (time.perf_counter() - t0)


def map_rate(dataset: DatasetEntry, fields: Callable[[], dict[str, Field]], grid_hz: float,
             seed: int) -> float:
    ds = RerunMapDataset(DataSource(dataset), "time", fields(),
                         timeline_sampling=FixedRateSampling(rate_hz=grid_hz))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, collate_fn=list,
                        generator=torch.Generator().manual_seed(seed))
    count = min(LOADER_SAMPLES, len(ds))
    t0 = time.perf_counter()
    seen = 0
    for batch in loader:
        seen += take(iter(batch), len(batch))
        if seen >= count:
            break
    return seen / (time.perf_counter() - t0)


# ------------------------------------------------------------------------------------- main
Measure = Callable[[int], float]


def measure_rounds(measures: dict[str, Measure]) -> dict[str, list[float]]:
    """Every measurement once per round, rounds interleaved, so that each round's ratios compare
    figures taken under the same machine load (the cores are shared)."""
    results: dict[str, list[float]] = {name: [] for name in measures}
    for round_ in range(REPEATS):
        for name, measure in measures.items():
            results[name].append(measure(round_))
    return results


def report(name: str, figures: list[float], limits: list[float], target: float | None) -> bool:
    """Print the round with the median ratio (figure and limit measured side by side)."""
    ratios = [f / lim for f, lim in zip(figures, limits, strict=True)]
    middle = int(np.argsort(ratios)[len(ratios) // 2])
    ratio = ratios[middle]
    verdict = "" if target is None else (
        f"target >= {target:.0%}: {'PASS' if ratio >= target else 'FAIL'}")
    print(f"  {name:<46} {figures[middle]:9.0f}/s   limit {limits[middle]:9.0f}/s   "
          f"ratio {ratio:5.2f}   {verdict}")
    return target is None or ratio >= target


def main() -> int:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        dataset, streams, flags, jpegs = build_workload(Path(tmp))
        frames = sum(len(s) for s in streams)
        print(f"video benchmark: {NUM_EPISODES} episodes x {EPISODE_S} s, H.264 {SIZE}x{SIZE} "
              f"{CAMERA_HZ} Hz GOP {GOP}, {frames} frames, output {OUTPUT_FORMAT!r}, "
              f"{os.cpu_count()} CPUs, median of {REPEATS} interleaved rounds "
              f"(built in {time.perf_counter() - t0:.1f} s)")
        r = measure_rounds({
            "sequential": lambda _: frames / bare_sequential(streams, lambda i: True),
            "random": lambda _: bare_random_access(streams, flags, RANDOM_FRAMES),
            "every_other": lambda _: (frames / 2) / bare_sequential(streams, lambda i: i % 2 == 0),
            "jpeg_s": lambda _: bare_jpeg(jpegs, 2),
            "a_block": lambda s: iterable_rate(dataset, video_fields, CAMERA_HZ, BlockShuffle(), s),
            "a_sample": lambda s: iterable_rate(dataset, video_fields, CAMERA_HZ, SampleShuffle(),
                                                s),
            "a_map": lambda s: map_rate(dataset, video_fields, CAMERA_HZ, s),
            "b_block": lambda s: iterable_rate(dataset, standard_fields, GRID_HZ, BlockShuffle(), s),
            "b_sample": lambda s: iterable_rate(dataset, standard_fields, GRID_HZ, SampleShuffle(),
                                                s),
            "b_map": lambda s: map_rate(dataset, standard_fields, GRID_HZ, s),
        })
    print(f"  bare sequential decode:       {np.median(r['sequential']):9.0f} frames/s")
    print(f"  bare random access:           {np.median(r['random']):9.0f} frames/s")
    print(f"  bare 15 Hz sampling of 30 Hz: {np.median(r['every_other']):9.0f} samples/s "
          "(every frame decoded, every other converted)")
    print(f"  bare JPEG decode:             {1.0 / np.median(r['jpeg_s']):9.0f} images/s")
    ok = True
    print("(a) video field alone, 30 Hz grid (one frame per sample):")
    ok &= report("BlockShuffle vs bare sequential", r["a_block"], r["sequential"], 0.70)
    ok &= report("SampleShuffle vs bare random access", r["a_sample"], r["random"], 0.80)
    ok &= report("map dataset, shuffled sampler vs random access", r["a_map"], r["random"], 0.80)
    # (b): a sample costs its video (two frames decoded at 15 Hz, or a random access) plus a JPEG.
    seq_b = [1.0 / (1.0 / v + j) for v, j in zip(r["every_other"], r["jpeg_s"], strict=True)]
    rand_b = [1.0 / (1.0 / v + j) for v, j in zip(r["random"], r["jpeg_s"], strict=True)]
    print("(b) standard workload + video (state, action[16], JPEG, H.264), 15 Hz grid; limits are "
          "the bare video + JPEG cost of one sample, one thread:")
    report("BlockShuffle vs bare 15 Hz sequential + JPEG", r["b_block"], seq_b, 0.70)
    report("SampleShuffle vs bare random access + JPEG", r["b_sample"], rand_b, 0.80)
    report("map dataset, shuffled sampler vs same", r["b_map"], rand_b, 0.80)
    report("BlockShuffle vs bare sequential (frames/s)", r["b_block"], r["sequential"], None)
    print("targets (on (a)) met" if ok else "some targets (on (a)) missed (see FAIL)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
