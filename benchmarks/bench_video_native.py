"""What a compiled per-run decode loop would give the video path (issue 26.2): a measured prototype.

Run ``python benchmarks/bench_video_native.py`` (``BENCH_QUICK=1`` for a short run; ``ROUNDS=n``
sets the interleaved rounds, default 5). Untargeted: it prints figures for a decision, skips
(exit 0) without a C compiler or PyAV's libraries, and exits 1 only when the prototype's frames
differ from PyAV's.

The loader decodes each run of packets with PyAV: a Python loop that releases the GIL several
times per packet and allocates a frame object, a reformatted frame and an array per frame. The
prototype (``benchmarks/native/run_loop.c``, compiled here with ``cc`` into a temporary folder)
decodes a whole run in one ``ctypes`` call, which releases the GIL once: packets fed from one
byte buffer with offsets, each kept frame converted by libswscale straight into the run's output
memory. It calls the FFmpeg libraries PyAV loaded (found in ``/proc/self/maps``), so both decode
with the same code; it is not part of the package.

Workload: the standard workload's camera frames (``workload.camera_frames``, 224×224) encoded
H.264 with a keyframe every 32 frames, decoded in blocks of 128 frames from a keyframe, every
frame converted to RGB24 into a block buffer (what ``BlockShuffle`` asks for). Each round runs
every configuration once, interleaved:

- **PyAV, a process per core**: the kind of limit ``bench_video`` measures (bare PyAV loops, one
  process per core, off each other's GIL);
- **PyAV, a thread per core**: one process, one PyAV loop per thread (the loader's default);
- **compiled, a thread per core**: one process, the prototype per thread;
- **compiled, one thread** and **PyAV, one thread**: the CPU cost of a frame alone.

Printed per configuration: the medians of frames/s and of CPU ms per frame (all processes), and
the median over rounds of its rate divided by the process-per-core PyAV rate of the same round.
Before timing, one block is decoded both ways and compared pixel for pixel, and the offsets of
AVFrame's ``pts`` and key-frame flag in this FFmpeg are found by calibration and printed (what a
loader integration must read; see :func:`frame_field_offsets`).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import workload as w
from av.video.reformatter import VideoReformatter

from rayform.media._video_encode import encode_video_packets

EPISODES = 2 if w.QUICK else 8
FRAMES = 256 if w.QUICK else 512
ROUNDS = 1 if w.QUICK else int(os.environ.get("ROUNDS", "5"))
BLOCK = 128
GOP = 32
SIZE = w.IMAGE
SOURCE = Path(__file__).with_name("native") / "run_loop.c"
_YUV420P, _RGB24, _BILINEAR = 0, 2, 2

Block = tuple[int, int]  # (episode, first row): BLOCK frames from a keyframe
STREAMS: list[list[bytes]] = []  # set before the pool forks
JOINED: list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]] = []


class Api(ctypes.Structure):
    """The FFmpeg functions ``decode_run`` calls, as pointers (see run_loop.c)."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "send_packet", "receive_frame", "new_packet", "packet_unref", "frame_unref", "sws_scale")]


def _library(name: str) -> ctypes.CDLL | None:
    """The copy of ``name`` PyAV mapped into this process."""
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if f"/{name}" in line]
    return ctypes.CDLL(paths[0]) if paths else None


def _compile(folder: str) -> ctypes.CDLL | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    target = os.path.join(folder, "run_loop.so")
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", target, str(SOURCE)], check=True)
    loop = ctypes.CDLL(target)
    loop.decode_run.restype = ctypes.c_int
    loop.decode_run.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 2 \
        + [ctypes.c_int] * 2
    return loop


class Native:
    """The FFmpeg entry points and the compiled loop, bound once per process."""

    def __init__(self, loop: ctypes.CDLL, codec: ctypes.CDLL, util: ctypes.CDLL,
                 scale: ctypes.CDLL) -> None:
        self.loop, self.codec, self.util, self.scale = loop, codec, util, scale
        for fn in ("avcodec_find_decoder_by_name", "avcodec_alloc_context3", "av_packet_alloc"):
            getattr(codec, fn).restype = ctypes.c_void_p
        codec.avcodec_find_decoder_by_name.argtypes = [ctypes.c_char_p]
        codec.avcodec_alloc_context3.argtypes = [ctypes.c_void_p]
        codec.avcodec_open2.argtypes = [ctypes.c_void_p] * 3
        codec.avcodec_flush_buffers.argtypes = [ctypes.c_void_p]
        util.av_frame_alloc.restype = ctypes.c_void_p
        util.av_opt_set_int.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                                        ctypes.c_int]
        scale.sws_getContext.restype = ctypes.c_void_p
        scale.sws_getContext.argtypes = [ctypes.c_int] * 7 + [ctypes.c_void_p] * 3

        def address(lib: ctypes.CDLL, name: str) -> int | None:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

        self.api = Api(address(codec, "avcodec_send_packet"),
                       address(codec, "avcodec_receive_frame"), address(codec, "av_new_packet"),
                       address(codec, "av_packet_unref"), address(util, "av_frame_unref"),
                       address(scale, "sws_scale"))


class NativeDecoder:
    """One thread's H.264 decoder (FFmpeg thread_count=1), frame, packet and RGB scaler."""

    def __init__(self, native: Native) -> None:
        self.native = native
        codec = native.codec.avcodec_find_decoder_by_name(b"h264")
        self.context = native.codec.avcodec_alloc_context3(codec)
        native.util.av_opt_set_int(self.context, b"threads", 1, 0)
        if native.codec.avcodec_open2(self.context, codec, None) != 0:
            raise RuntimeError("avcodec_open2 failed")
        self.frame = native.util.av_frame_alloc()
        self.packet = native.codec.av_packet_alloc()
        self.scaler = native.scale.sws_getContext(SIZE, SIZE, _YUV420P, SIZE, SIZE, _RGB24,
                                                  _BILINEAR, None, None, None)
        self.keep = np.zeros(FRAMES, np.uint8)

    def block(self, episode: int, first: int, out: npt.NDArray[np.uint8]) -> None:
        native = self.native
        native.codec.avcodec_flush_buffers(self.context)
        data, offsets = JOINED[episode]
        last = min(first + BLOCK, FRAMES) - 1
        self.keep[:] = 0
        self.keep[first:last + 1] = 1
        decoded = native.loop.decode_run(
            ctypes.byref(native.api), self.context, self.frame, self.packet, self.scaler,
            data.ctypes.data, offsets.ctypes.data, first, last, self.keep.ctypes.data,
            out.ctypes.data, SIZE, SIZE)
        if decoded != last - first + 1:
            raise RuntimeError(f"decode_run returned {decoded} for rows {first}..{last}")


def pyav_block(episode: int, first: int, out: npt.NDArray[np.uint8],
               reformatter: Any) -> None:
    context = av.CodecContext.create("h264", "r")
    context.thread_count = 1
    i = 0
    for data in [*STREAMS[episode][first:first + BLOCK], None]:
        for frame in context.decode(None if data is None else av.Packet(data)):
            out[i] = reformatter.reformat(frame, format="rgb24", threads=1).to_ndarray()
            i += 1


def _pyav_part(part: Sequence[Block]) -> float:
    """CPU seconds to decode ``part`` with PyAV in this (pool) process."""
    out = np.zeros((BLOCK, SIZE, SIZE, 3), np.uint8)
    reformatter = VideoReformatter()
    cpu = time.process_time()
    for episode, first in part:
        pyav_block(episode, first, out, reformatter)
    return time.process_time() - cpu


def in_threads(blocks: Sequence[Block], threads: int,
               make: Callable[[], Callable[[int, int, npt.NDArray[np.uint8]], None]]
               ) -> tuple[float, float]:
    """(frames/s, CPU ms per frame) with ``threads`` threads of this process."""
    def work(part: Sequence[Block]) -> None:
        out = np.zeros((BLOCK, SIZE, SIZE, 3), np.uint8)
        decode = make()
        for episode, first in part:
            decode(episode, first, out)

    workers = [threading.Thread(target=work, args=(blocks[i::threads],)) for i in range(threads)]
    t0, cpu = time.perf_counter(), time.process_time()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    frames = len(blocks) * BLOCK
    return frames / (time.perf_counter() - t0), (time.process_time() - cpu) / frames * 1e3


def in_processes(pool: Any, blocks: Sequence[Block], processes: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    cpu = sum(pool.map(_pyav_part, [blocks[i::processes] for i in range(processes)]))
    frames = len(blocks) * BLOCK
    return frames / (time.perf_counter() - t0), cpu / frames * 1e3


def frame_field_offsets(native: Native, packets: Sequence[bytes]) -> tuple[list[int], list[int]]:
    """Where this FFmpeg keeps two AVFrame fields past the stable prefix, found by calibration.

    The loader needs a frame's ``pts`` and its key-frame flag, which ``run_loop.c`` does not read
    yet; their offsets moved between FFmpeg versions. The first packets are decoded through
    ``ctypes`` with known pts values; returned are the 8-byte offsets holding the pts of every
    frame, and the 4-byte offsets whose ``AV_FRAME_FLAG_KEY`` bit (2) is set on the keyframe and
    on no other frame.
    """
    codec = native.codec
    codec.avcodec_send_packet.argtypes = [ctypes.c_void_p] * 2
    codec.avcodec_receive_frame.argtypes = [ctypes.c_void_p] * 2
    codec.av_new_packet.argtypes = [ctypes.c_void_p, ctypes.c_int]
    codec.av_packet_unref.argtypes = [ctypes.c_void_p]
    decoder = NativeDecoder(native)
    base = 0x1234567890AB
    frames: list[bytes] = []

    def receive() -> None:
        while codec.avcodec_receive_frame(decoder.context, decoder.frame) >= 0:
            frames.append(ctypes.string_at(decoder.frame, 512))  # AVFrame is larger than this

    for i, data in enumerate(packets):
        codec.av_new_packet(decoder.packet, len(data))
        ctypes.memmove(ctypes.c_void_p.from_address(decoder.packet + 24).value, data, len(data))
        ctypes.c_int64.from_address(decoder.packet + 8).value = base + i  # pts
        ctypes.c_int64.from_address(decoder.packet + 16).value = base + i  # dts
        codec.avcodec_send_packet(decoder.context, decoder.packet)
        codec.av_packet_unref(decoder.packet)
        receive()
    codec.avcodec_send_packet(decoder.context, None)
    receive()
    pts = [o for o in range(0, 512, 8)
           if all(int.from_bytes(f[o:o + 8], "little", signed=True) == base + i
                  for i, f in enumerate(frames))]
    flags = [o for o in range(0, 512, 4)
             if [int.from_bytes(f[o:o + 4], "little") & 2 for f in frames]
             == [2] + [0] * (len(frames) - 1)]
    return pts, flags


def main() -> int:
    libraries = [_library(name) for name in ("libavcodec", "libavutil", "libswscale")]
    if any(lib is None for lib in libraries):
        print("SKIP: PyAV's FFmpeg libraries are not found in /proc/self/maps")
        return 0
    codec, util, scale = (lib for lib in libraries if lib is not None)
    with tempfile.TemporaryDirectory() as folder:
        loop = _compile(folder)
        if loop is None:
            print("SKIP: no C compiler (cc or gcc) to build benchmarks/native/run_loop.c")
            return 0
        native = Native(loop, codec, util, scale)
        for episode in range(EPISODES):
            packets = encode_video_packets(w.camera_frames(episode, FRAMES), codec="h264",
                                           gop=GOP, fps=w.CAMERA_HZ)[0]
            STREAMS.append(packets)
            offsets = np.zeros(len(packets) + 1, np.int64)
            offsets[1:] = np.cumsum([len(p) for p in packets])
            JOINED.append((np.frombuffer(b"".join(packets), np.uint8), offsets))
        blocks = [(e, first) for e in range(EPISODES) for first in range(0, FRAMES, BLOCK)]
        ours = np.zeros((BLOCK, SIZE, SIZE, 3), np.uint8)
        theirs = np.zeros_like(ours)
        NativeDecoder(native).block(EPISODES - 1, BLOCK, ours)
        pyav_block(EPISODES - 1, BLOCK, theirs, VideoReformatter())
        if not np.array_equal(ours, theirs):
            print("FAIL: the compiled loop's frames differ from PyAV's")
            return 1
        print(f"frames equal to PyAV's ({BLOCK} frames compared)")
        pts, flags = frame_field_offsets(native, STREAMS[0][:8])
        print(f"AVFrame (libavutil {'.'.join(map(str, av.library_versions['libavutil']))}): "
              f"each frame's pts (also pkt_dts, best_effort_timestamp) at bytes {pts}; "
              f"key-frame flag candidates at bytes {flags}")

        def pyav() -> Callable[[int, int, npt.NDArray[np.uint8]], None]:
            reformatter = VideoReformatter()
            return lambda e, first, out: pyav_block(e, first, out, reformatter)

        def compiled() -> Callable[[int, int, npt.NDArray[np.uint8]], None]:
            return NativeDecoder(native).block

        cores = w.cores()
        figures: dict[str, list[tuple[float, float]]] = {}
        with mp.get_context("fork").Pool(cores) as pool:
            for _ in range(ROUNDS + (0 if w.QUICK else 1)):  # a warm-up round first
                runs = {
                    f"PyAV, a process per core ({cores})": in_processes(pool, blocks, cores),
                    f"PyAV, a thread per core ({cores})": in_threads(blocks, cores, pyav),
                    f"compiled, a thread per core ({cores})": in_threads(blocks, cores, compiled),
                    "compiled, one thread": in_threads(blocks, 1, compiled),
                    "PyAV, one thread": in_threads(blocks, 1, pyav),
                }
                for name, figure in runs.items():
                    figures.setdefault(name, []).append(figure)
        if not w.QUICK:
            figures = {name: runs[1:] for name, runs in figures.items()}
    limit = next(iter(figures.values()))
    print(f"{len(blocks) * BLOCK} frames per run, {ROUNDS} rounds, {cores} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    for name, runs in figures.items():
        ratio = statistics.median(run[0] / base[0] for run, base in zip(runs, limit, strict=True))
        print(f"{name:34s} {statistics.median(r[0] for r in runs):8.0f} frames/s  "
              f"CPU {statistics.median(r[1] for r in runs):.3f} ms/frame  "
              f"x{ratio:.2f} of a process per core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
