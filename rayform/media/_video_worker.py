"""A video decode worker process: feeds packet runs to PyAV decoders and writes RGB into shared memory.

Run as ``python -m rayform.media._video_worker CONN_FD ARENA_FD ARENA_BYTES`` by
:mod:`rayform.decoders._video_processes`, never by hand. The process has one thread, so PyAV's
many GIL releases per packet cost nothing here (in a process with several decoding threads each
release hands the GIL to another thread and back). It imports no torch.

Messages are pickled tuples on the connection (the parent's pipe; nothing else writes to it):

- parent to worker: ``(TASKS, free_slots, tasks)`` or ``(STOP,)``; each task is
  ``(slot, codec, fresh, thread_count, packets, wanted, size)``: the decoder ``slot`` (``fresh``:
  a new or flushed decoder, else the slot's decoder continues where it stopped), ``packets`` a
  list of ``(pts, bytes)`` fed in order until every wanted frame came out, ``wanted`` maps a pts
  to the arena offset its RGB frame (``size`` = ``(height, width)``) is written at;
- worker to parent: ``(READY,)`` once, then per ``TASKS`` message a list of results
  ``(captured_pts, fed, last_pts, keyframe_pts, alive, error)``: ``fed`` packets were fed,
  ``alive`` says the slot can continue (a drained or failed decoder is closed), ``error`` is
  ``None`` or ``(kind, message)`` with kind ``"decode"`` or ``"size"`` (a frame of another size
  than the slots: the parent decodes that call itself).
"""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Final

import numpy as np

from rayform.media._rgb_scaler import RgbScaler
from rayform.media._video_codec import open_decoder, require_av
from rayform.media._video_frames import frame_to_rgb

TASKS: Final = "tasks"
STOP: Final = "stop"
READY: Final = "ready"
# Flushed decoders kept per codec for the next fresh slot (opening one costs its set-up).
_SPARES_PER_CODEC: Final = 4

Task = tuple[int, str, bool, int, Sequence[tuple[int, bytes]], dict[int, int], tuple[int, int]]
Result = tuple[list[int], int, int | None, list[int], bool, tuple[str, str] | None]


class _Slot:
    """One open decoder and the last frame it emitted."""

    __slots__ = ("codec", "context", "last_frame", "last_pts", "thread_count")

    def __init__(self, codec: str, context: Any, thread_count: int) -> None:
        self.codec = codec
        self.context = context
        self.thread_count = thread_count
        self.last_pts: int | None = None
        self.last_frame: Any = None


class _FrameSizeError(Exception):
    pass


class Worker:
    """The worker's state: its decoders by slot, the arena, the RGB converters."""

    def __init__(self, arena: mmap.mmap) -> None:
        self._av = require_av()
        self._arena = np.frombuffer(arena, dtype=np.uint8)
        self._base = int(self._arena.ctypes.data)
        self._slots: dict[int, _Slot] = {}
        self._spares: dict[tuple[str, int], list[Any]] = {}
        self._scaler = RgbScaler()
        self._reformatter = self._av.video.reformatter.VideoReformatter()

    def free(self, slots: Sequence[int]) -> None:
        for slot in slots:
            state = self._slots.pop(slot, None)
            if state is not None:
                self._spare(state)

    def _spare(self, state: _Slot) -> None:
        spares = self._spares.setdefault((state.codec, state.thread_count), [])
        if len(spares) < _SPARES_PER_CODEC:
            spares.append(state.context)

    def _open(self, codec: str, thread_count: int) -> Any:
        spares = self._spares.get((codec, thread_count))
        if spares:
            context = spares.pop()
            context.flush_buffers()
            return context
        return open_decoder(codec, thread_count=thread_count)

    def run(self, task: Task) -> Result:
        slot, codec, fresh, thread_count, packets, wanted, size = task
        state = self._slots.get(slot)
        if fresh or state is None:
            if state is not None:
                self._spare(state)
            state = self._slots[slot] = _Slot(codec, self._open(codec, thread_count),
                                              thread_count)
        pending = dict(wanted)
        captured: list[int] = []
        keyframes: list[int] = []
        fed = 0
        av = self._av
        try:
            if state.last_pts is not None and state.last_pts in pending:
                self._capture(state.last_frame, pending.pop(state.last_pts), size)
                captured.append(state.last_pts)
            context = state.context
            for pts, data in packets:
                if not pending:
                    break
                packet = av.Packet(data)
                packet.pts = packet.dts = pts
                fed += 1
                for frame in context.decode(packet):
                    self._take(state, frame, pending, captured, keyframes, size)
            if pending:  # a decoder with delay: drain it (it cannot continue after that)
                for frame in context.decode(None):
                    self._take(state, frame, pending, captured, keyframes, size)
                del self._slots[slot]
                return captured, fed, state.last_pts, keyframes, False, None
        except _FrameSizeError as err:
            del self._slots[slot]
            return captured, fed, state.last_pts, keyframes, False, ("size", str(err))
        except (av.FFmpegError, ValueError, EOFError) as err:
            del self._slots[slot]
            return captured, fed, state.last_pts, keyframes, False, (
                "decode", f"{type(err).__name__}: {err}")
        return captured, fed, state.last_pts, keyframes, True, None

    def _take(self, state: _Slot, frame: Any, pending: dict[int, int], captured: list[int],
              keyframes: list[int], size: tuple[int, int]) -> None:
        pts = frame.pts
        if pts is None:
            return
        state.last_pts = pts
        state.last_frame = frame
        if frame.key_frame:
            keyframes.append(pts)
        offset = pending.pop(pts, None)
        if offset is not None:
            self._capture(frame, offset, size)
            captured.append(pts)

    def _capture(self, frame: Any, offset: int, size: tuple[int, int]) -> None:
        height, width = size
        if (frame.height, frame.width) != size:
            raise _FrameSizeError(f"{frame.width}x{frame.height}")
        nbytes = height * width * 3
        if offset < 0 or offset + nbytes > len(self._arena):
            raise ValueError(f"frame offset {offset} outside the shared frame memory")
        if not self._scaler.convert_at(frame, self._base + offset):
            out = self._arena[offset:offset + nbytes].reshape(height, width, 3)
            np.copyto(out, frame_to_rgb(frame, self._reformatter))


def serve(conn: Connection, arena: mmap.mmap) -> None:
    """Answer the parent's messages until it says stop or goes away."""
    worker = Worker(arena)
    conn.send((READY,))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == STOP:
            return
        _, free_slots, tasks = message
        worker.free(free_slots)
        conn.send([worker.run(task) for task in tasks])


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m rayform.media._video_worker CONN_FD ARENA_FD ARENA_BYTES "
              "(started by rayform's VideoFrameDecoder)", file=sys.stderr)
        return 2
    conn_fd, arena_fd, arena_bytes = (int(a) for a in argv)
    arena = mmap.mmap(arena_fd, arena_bytes)
    os.close(arena_fd)
    serve(Connection(conn_fd), arena)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
