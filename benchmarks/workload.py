"""The standard benchmark workload and the measuring helpers every benchmark shares (written once).

The workload: ``episodes`` × ``episode_s`` seconds (8 × 20 s; quick mode 2 × 3 s), written with
rayform's RecordingWriter on the ``real_time`` timestamp timeline —

- joint positions, 7-D float32 at 100 Hz (``/joints/position``);
- action deltas, 7-D float32 at 100 Hz (``/action/delta``), read as a 16-step window;
- a 224×224 camera at 30 Hz: smooth scenes with a moving disc and sensor noise, stored as JPEG
  (quality 90, about 12 KB) and, with ``video=True``, as H.264 (a keyframe every 30 frames, no
  B-frames) from the same frames;
- samples on a 15 Hz grid, batch 32.

``BENCH_CACHE=/some/dir`` keeps built workloads there between runs (development only: a cached
workload is reused as it is).

Every benchmark prints, per figure: the figure, its limit (the best the hardware does on the same
work on the same cores, measured in the same run), the ratio, the core count and the peak RSS;
:class:`Verdicts` collects the targets, and full-mode benchmarks exit non-zero when one is missed
(quick mode runs tiny workloads that prove the benchmark runs, so targets are not enforced).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.dataloader import Field, FixedRateSampling, ImageDecoder, NumericDecoder
from rayform.decoders import encode_video_packets
from rayform.media._image import decode_image

QUICK = os.environ.get("BENCH_QUICK") == "1"
INDEX = "real_time"
STATE = "/joints/position:Scalars:scalars"
ACTION = "/action/delta:Scalars:scalars"
JPEG = "/cam0/rgb:EncodedImage:blob"
VIDEO = "/cam0/h264:VideoStream:sample"
STATE_HZ = ACTION_HZ = 100
CAMERA_HZ, GRID_HZ, GOP = 30, 15, 30
JOINTS, ACTION_STEPS, BATCH, IMAGE = 7, 16, 32, 224
EPOCH_NS = 1_700_000_000_000_000_000
SAMPLING = FixedRateSampling(rate_hz=GRID_HZ)


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """Which standard workload: its size, whether it carries the H.264 camera and whether its
    recordings are compressed (the default; ``compress=False`` stores them as format version 2 did)."""

    episodes: int = 2 if QUICK else 8
    episode_s: int = 3 if QUICK else 20
    video: bool = False
    compress: bool = True

    @property
    def key(self) -> str:
        packed = "" if self.compress else "-uncompressed"
        return f"e{self.episodes}-s{self.episode_s}-{'video' if self.video else 'jpeg'}{packed}-v1"


@dataclass(frozen=True, slots=True)
class Workload:
    """The registered dataset and, per episode, the camera's JPEG blobs and H.264 packets."""

    dataset: DatasetEntry
    jpegs: list[list[bytes]]
    h264: list[list[bytes]]  # empty without video
    keyframes: list[npt.NDArray[np.bool_]]  # per episode, per frame

    @property
    def all_jpegs(self) -> list[bytes]:
        return [b for episode in self.jpegs for b in episode]


# ---------------------------------------------------------------------------------- data
def camera_frames(seed: int, count: int) -> npt.NDArray[np.uint8]:
    """``[count, 224, 224, 3]``: a colour ramp, a moving disc and sensor noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:IMAGE, 0:IMAGE].astype(np.float32)
    base = np.stack([xx, yy, (xx + yy) / 2], axis=-1) * (255.0 / IMAGE)
    out = np.empty((count, IMAGE, IMAGE, 3), dtype=np.uint8)
    for i in range(count):
        frame = base.copy()
        cx, cy = (40 + 3 * i + 17 * seed) % IMAGE, (90 + 2 * i) % IMAGE
        frame[(xx - cx) ** 2 + (yy - cy) ** 2 < 30 ** 2] = (200, 60 + (i % 50), 40)
        frame += rng.normal(0, 6, frame.shape)
        out[i] = np.clip(frame, 0, 255).astype(np.uint8)
    return out


def encode_jpeg(frame: npt.NDArray[np.uint8]) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def build(root: Path, spec: Spec) -> Workload:
    """Write and register the workload under ``root`` (a new catalog)."""
    catalog = Catalog.create(root / "catalog")
    dataset = catalog.create_dataset("standard")
    paths: list[Path] = []
    jpegs: list[list[bytes]] = []
    h264: list[list[bytes]] = []
    keyframes: list[npt.NDArray[np.bool_]] = []
    for ep in range(spec.episodes):
        t0 = EPOCH_NS + ep * 100 * 10**9
        n_state, n_cam = spec.episode_s * STATE_HZ, spec.episode_s * CAMERA_HZ
        rng = np.random.default_rng(ep)
        state_t = (t0 + np.arange(n_state, dtype=np.int64) * (10**9 // STATE_HZ)
                   ).astype("datetime64[ns]")
        cam_t = (t0 + np.round(np.arange(n_cam) * 1e9 / CAMERA_HZ).astype(np.int64)
                 ).astype("datetime64[ns]")
        frames = camera_frames(ep, n_cam)
        jpegs.append([encode_jpeg(f) for f in frames])
        path = root / "src" / f"episode_{ep}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"episode_{ep:03d}",
                                     compress=spec.compress) as rec:
            rec.log_scalars("/joints/position", timelines={INDEX: state_t},
                            values=rng.normal(size=(n_state, JOINTS)).astype(np.float32))
            rec.log_scalars("/action/delta", timelines={INDEX: state_t},
                            values=rng.normal(size=(n_state, JOINTS)).astype(np.float32) * 0.01)
            rec.log_encoded_images("/cam0/rgb", timelines={INDEX: cam_t}, blobs=jpegs[-1],
                                   media_type="image/jpeg")
            if spec.video:
                packets, is_key = encode_video_packets(frames, codec="h264", gop=GOP,
                                                       fps=CAMERA_HZ)
                h264.append(packets)
                keyframes.append(np.asarray(is_key, dtype=np.bool_))
                rec.log_video_stream("/cam0/h264", timelines={INDEX: cam_t}, samples=packets,
                                     is_keyframe=is_key, codec="h264")
        paths.append(path)
    dataset.register(paths, progress=False).wait()
    return Workload(dataset, jpegs, h264, keyframes)


def load(tmp: Path, spec: Spec) -> Workload:
    """The workload: built under ``tmp``, or reused from ``$BENCH_CACHE`` (built there once)."""
    cache = os.environ.get("BENCH_CACHE")
    if not cache:
        return build(tmp, spec)
    root = Path(cache) / spec.key
    blobs = root / "blobs.pickle"
    if not blobs.exists():
        workload = build(root, spec)
        with open(blobs, "wb") as f:
            pickle.dump((workload.jpegs, workload.h264, workload.keyframes), f)
    with open(blobs, "rb") as f:
        jpegs, h264, keyframes = pickle.load(f)
    dataset = Catalog.open(str(root / "catalog")).get_dataset("standard")
    return Workload(dataset, jpegs, h264, keyframes)


# -------------------------------------------------------------------------------- fields
def numeric_fields() -> dict[str, Field]:
    window = tuple(k / ACTION_HZ for k in range(ACTION_STEPS))
    return {"state": Field(STATE, NumericDecoder()),
            "action": Field(ACTION, NumericDecoder(), window=window)}


def jpeg_fields() -> dict[str, Field]:
    """State, the action window and the JPEG camera: the standard sample."""
    return {**numeric_fields(), "camera": Field(JPEG, ImageDecoder())}


# ------------------------------------------------------------------------------ measuring
def cores() -> int:
    """CPUs this process may run on (what "all cores" means in every limit)."""
    return len(os.sched_getaffinity(0))


def peak_rss_mib() -> float:
    """Peak RSS of this process (MiB); worker processes are reported by :func:`peak_child_rss_mib`."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_child_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_time(fn: Callable[[], object], *, repeats: int, warmup: int = 0) -> float:
    """The median wall time of ``repeats`` runs of ``fn``, after ``warmup`` untimed runs (the
    process's one-time imports and caches, which a first run alone pays)."""
    for _ in range(warmup):
        fn()
    return median(timed(fn) for _ in range(repeats))


def on_threads(jobs: Sequence[Any], work: Callable[[Sequence[Any]], object], threads: int) -> float:
    """Seconds to run ``work`` over ``jobs`` dealt round-robin to ``threads`` threads."""
    t0 = time.perf_counter()
    if threads <= 1:
        work(jobs)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, [jobs[i::threads] for i in range(threads)]))
    return time.perf_counter() - t0


def bare_jpeg(blobs: Sequence[bytes], threads: int) -> tuple[float, float]:
    """Bare decode of ``blobs`` to ``[H, W, 3]`` arrays on ``threads`` threads (simplejpeg when
    installed, else Pillow; both release the GIL), the JPEG limit: ``(decodes per second, CPU
    seconds per decode)``. The CPU figure is taken on the same threads, because cores that share
    a physical core or a busy machine make every decode dearer; a loader running on as many
    threads pays the same."""

    def decode_all(part: Sequence[bytes]) -> None:
        for blob in part:
            decode_image(blob)

    c0 = cpu_seconds()
    wall = on_threads(blobs, decode_all, threads)
    return len(blobs) / wall, (cpu_seconds() - c0) / max(len(blobs), 1)


def bare_jpeg_rate(blobs: Sequence[bytes], threads: int) -> float:
    """Decodes per second of :func:`bare_jpeg`."""
    return bare_jpeg(blobs, threads)[0]


class Verdicts:
    """Prints figure lines and collects targets; :meth:`exit_code` is 1 on a miss in full mode."""

    def __init__(self, title: str) -> None:
        self.missed: list[str] = []
        print(f"{title}{' (quick mode: targets not enforced)' if QUICK else ''}; "
              f"{cores()} cores, python {sys.version.split()[0]}")

    def line(self, name: str, figure: float, unit: str, limit: float | None, *,
             target: float | None = None, higher_is_better: bool = True, how: str = "",
             digits: int = 0, rss_mib: float | None = None) -> None:
        """One figure: ``figure unit``, its limit and ratio, cores, peak RSS (this process's, or
        ``rss_mib`` measured elsewhere), target verdict."""
        ratio = None if not limit else figure / limit
        text = f"  {name:<44} {figure:>10,.{digits}f} {unit:<10}"
        if limit:
            text += f" limit {limit:>10,.0f}   ratio {ratio:5.2f}"
        rss = peak_rss_mib() if rss_mib is None else rss_mib
        text += f"   cores {cores()}   rss {rss:,.0f} MiB"
        if target is not None:
            value = ratio if ratio is not None else figure
            ok = value >= target if higher_is_better else value <= target
            sign = ">=" if higher_is_better else "<="
            text += f"   target {sign} {target:g}: {'met' if ok else 'MISSED'}"
            if not ok:
                self.missed.append(name)
        print(text)
        if how:
            print(f"  {'':<44} ({how})")

    def exit_code(self) -> int:
        if self.missed:
            print(f"missed: {', '.join(self.missed)}"
                  + (" (quick mode: not enforced)" if QUICK else ""))
        return 1 if self.missed and not QUICK else 0


@dataclass(frozen=True, slots=True)
class StoreCeiling:
    """What storing a registration's output durably costs at least on this machine (see
    :func:`store_ceiling`): ``seconds`` to write ``files`` files of ``total_bytes`` in all."""

    seconds: float
    files: int
    total_bytes: int


def store_ceiling(catalog: Path, work: Path, *, repeats: int) -> StoreCeiling:
    """The least a durable content-addressed import of what ``catalog`` holds must do here: each
    of its files (objects and metadata, what a registration into the fresh catalog wrote)
    written to a file of its own, its bytes hashed (sha256: its name) and fsynced, then the
    folder fsynced, as registration stores objects; the median of ``repeats`` runs. The bytes
    are read into memory first: the source's read is the library limit's part."""
    blobs = [f.read_bytes() for f in sorted(catalog.rglob("*")) if f.is_file()]
    times = []
    for run in range(repeats):
        into = work / f"store-ceiling-{run}"
        into.mkdir()
        t0 = time.perf_counter()
        for i, blob in enumerate(blobs):
            hashlib.sha256(blob).hexdigest()
            fd = os.open(into / f"{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        folder = os.open(into, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        times.append(time.perf_counter() - t0)
        for f in into.iterdir():
            f.unlink()
        into.rmdir()
    return StoreCeiling(seconds=median(times), files=len(blobs),
                        total_bytes=sum(len(b) for b in blobs))


def report_ceiling(name: str, *, units: float, unit: str, registration_s: float,
                   library_s: float, ceiling: StoreCeiling) -> None:
    """The line under a registration's figure: its rate against :func:`store_ceiling` (the
    physical ceiling of a durable import, informational; the library read stays the target),
    and against the library read plus that store, done one after the other."""
    both = library_s + ceiling.seconds
    report(f"  {name}: store ceiling ({unit})", f"{units / registration_s:,.1f}",
           f"{units / ceiling.seconds:,.1f}", ceiling.seconds / registration_s,
           f"(context: write + sha256 + fsync of its {ceiling.files} files, "
           f"{ceiling.total_bytes / 1e6:,.1f} MB; library read + that: {units / both:,.1f}, "
           f"ratio {both / registration_s:.2f})")


MISSED: list[str] = []
"""Targets missed by :func:`report` lines (benchmarks that print their own columns)."""


def report(name: str, figure: str, limit: str, ratio: float, target: str) -> None:
    """A figure line for benchmarks that format their own figures: cores and peak RSS appended.

    ``target`` is ``"target >= 0.5"``-style text judged on ``ratio`` (or already carrying its
    verdict, ``met`` / ``MISSED``); misses are collected in :data:`MISSED`.
    """
    verdict = ""
    words = target.split()
    if target and "met" not in words and "MISSED" not in target and len(words) >= 3 \
            and words[0] == "target" and words[1] in (">=", "<="):
        bound = float(words[2].rstrip("x:"))
        ok = ratio >= bound if words[1] == ">=" else ratio <= bound
        verdict = f": {'met' if ok else 'MISSED'}"
    text = f"{target}{verdict}"
    if "MISSED" in text:
        MISSED.append(name)
    print(f"  {name:<44} {figure:>16}   limit {limit:>16}   ratio {ratio:6.2f}   "
          f"cores {cores()}   rss {peak_rss_mib():,.0f} MiB   {text}")


def report_exit_code() -> int:
    """1 when a :func:`report` target was missed in full mode."""
    if MISSED:
        print(f"missed: {', '.join(MISSED)}" + (" (quick mode: not enforced)" if QUICK else ""))
    return 1 if MISSED and not QUICK else 0
