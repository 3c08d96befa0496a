"""Captured video frames to per-sample values: tensors, windows, and who may share memory.

Frames are captured into a :class:`FrameSlab`: one buffer per decode call, taken from the
process's :data:`~rayform.decoders._buffer_pool.FRAME_POOL`, with a slot per wanted frame. Freshly
allocated frame-sized arrays are memory the process maps and faults in anew for every block (and
frees again on the consumer's thread); pooled slots are reused once the samples are dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._buffer_pool import FRAME_POOL
from rayform.decoders._shared_frames import SharedFramePool
from rayform.decoders._video_plan import FrameKey
from rayform.decoders._yuv import Yuv420Frame
from rayform.media._rgb_scaler import RgbScaler
from rayform.media._video_frames import YuvPlanes, frame_to_rgb, frame_to_yuv, yuv_shapes

Captured = npt.NDArray[np.uint8] | YuvPlanes


class FrameSlab:
    """One decode call's wanted frames, converted into slots of one pooled buffer.

    The buffer is taken when the first frame arrives (its size fixes the slot size); a frame of
    another size (a stream that changes resolution) gets memory of its own. Thread-safe: decode
    threads capture different frames concurrently.

    Args:
        keys: the frame of each slot, in slot order; a frame given several times is converted
            once into its first slot and copied into the others.
        output_format: ``"rgb"`` (slots ``[H, W, 3]``) or ``"yuv420p"`` (``y [1, H, W]`` and
            ``uv [2, ceil(H/2), ceil(W/2)]``).
    """

    def __init__(self, keys: Iterable[FrameKey], *, output_format: str) -> None:
        self._slot: dict[FrameKey, int] = {}
        self._copies: dict[FrameKey, list[int]] = {}  # a repeated frame's further slots
        self._count = 0
        for i, key in enumerate(keys):
            if key in self._slot:
                self._copies.setdefault(key, []).append(i)
            else:
                self._slot[key] = i
            self._count = i + 1
        self._rgb = output_format == "rgb"
        self._lock = threading.Lock()
        self._size: tuple[int, int] | None = None  # (height, width) of the slots
        self._banks: tuple[npt.NDArray[np.uint8], ...] = ()
        self._address = 0  # of the first bank's first slot
        self._slot_bytes = 0  # bytes per slot of the first bank
        self._outside = False  # a frame was captured into memory of its own
        self._shared_offset = -1  # the banks' offset in a SharedFramePool arena, if there
        self.captured: dict[FrameKey, Captured] = {}

    def __len__(self) -> int:
        return self._count

    def capture(self, key: FrameKey, frame: Any, reformatter: Any, *,
                scaler: RgbScaler | None = None) -> None:
        """Convert a decoded ``av.VideoFrame`` into ``key``'s slot (``captured[key]``): RGB
        straight into the slot with ``scaler`` where it covers the frame, else with
        ``reformatter`` (PyAV) and a copy."""
        slot = self._slot.get(key)
        banks = () if slot is None else self._banks_for(frame.height, frame.width)
        if not banks:
            self._outside = True
        if self._rgb:
            if banks and slot is not None:
                out = banks[0][slot]
                if scaler is None or not scaler.convert(
                        frame, out, address=self._address + slot * out.nbytes):
                    np.copyto(out, frame_to_rgb(frame, reformatter))
                self.captured[key] = out
            else:
                self.captured[key] = frame_to_rgb(frame, reformatter)
        else:
            planes = (banks[0][slot], banks[1][slot]) if banks else None
            self.captured[key] = frame_to_yuv(frame, reformatter, out=planes)
        if banks:
            for other in self._copies.get(key, ()):
                for bank in banks:
                    bank[other] = bank[slot]

    def capturer(self, reformatter: Any, scaler: RgbScaler | None = None
                 ) -> Callable[[FrameKey, Any], None]:
        """``capture(key, frame)`` with ``reformatter`` and ``scaler``: for RGB frames the scaler
        covers, once the slots exist, a frame goes straight into its slot with no per-frame
        checks of the slot (its layout is fixed when the slab takes its buffer); anything else
        takes :meth:`capture`."""
        general = partial(self.capture, reformatter=reformatter, scaler=scaler)
        if not self._rgb or scaler is None or not scaler.available:
            return general
        slot_of, copies, captured, convert = self._slot, self._copies, self.captured, \
            scaler.convert_at

        def capture(key: FrameKey, frame: Any) -> None:
            slot = slot_of.get(key)
            # _size is set after the banks: a matching size means the banks are there.
            if slot is None or key in copies or self._size != (frame.height, frame.width) \
                    or not convert(frame, self._address + slot * self._slot_bytes):
                general(key, frame)
                return
            captured[key] = self._banks[0][slot]

        return capture

    @property
    def size(self) -> tuple[int, int] | None:
        """``(height, width)`` of the slots, once the banks exist."""
        return self._size

    def share(self, pool: SharedFramePool, *, height: int, width: int) -> bool:
        """Take the RGB slot banks (frames of ``height × width``) from ``pool`` now, so that
        another process can write the frames (:meth:`offset_of`, then :meth:`mark`); ``False``
        (nothing taken) when the pool has no room or the slab has other banks already."""
        if not self._rgb or self._size is not None or not self._count:
            return False
        slot_bytes = height * width * 3
        flat = pool.take(self._count * slot_bytes)
        if flat is None:
            return False
        self._banks = (flat.reshape(self._count, height, width, 3),)
        self._address = int(flat.ctypes.data)
        self._slot_bytes = slot_bytes
        self._shared_offset = pool.offset_of(flat)
        self._size = (height, width)
        return True

    def offset_of(self, key: FrameKey) -> int:
        """Where ``key``'s slot lies in the shared arena (after :meth:`share`)."""
        if self._shared_offset < 0:
            raise ValueError("FrameSlab.offset_of needs banks taken with share()")
        return self._shared_offset + self._slot[key] * self._slot_bytes

    def mark(self, key: FrameKey) -> None:
        """``key``'s frame was written into its slot by another process: it is captured (and
        copied into the frame's further slots)."""
        bank = self._banks[0]
        slot = self._slot[key]
        self.captured[key] = bank[slot]
        for other in self._copies.get(key, ()):
            bank[other] = bank[slot]

    def slots(self) -> tuple[tuple[npt.NDArray[np.uint8], ...], dict[FrameKey, int]] | None:
        """The slot banks (``[K, H, W, 3]``, or ``y [K, 1, H, W]`` and ``uv [K, 2, H/2, W/2]``)
        and each key's (first) slot, when every captured frame lies in its slots; ``None``
        otherwise (a frame of another size, or nothing captured). Slots of frames not captured
        hold garbage."""
        if self._outside or not self._banks:
            return None
        return self._banks, self._slot

    def _banks_for(self, height: int, width: int) -> tuple[npt.NDArray[np.uint8], ...]:
        """The slot banks for frames of this size; empty if the slots have another size."""
        if self._size is None:
            with self._lock:
                if self._size is None:
                    self._banks = self._take_banks(height, width)
                    self._address = int(self._banks[0].__array_interface__["data"][0])
                    self._slot_bytes = int(self._banks[0][0].nbytes) if self._count else 0
                    self._size = (height, width)  # after the banks: read without the lock
        return self._banks if self._size == (height, width) else ()

    def _take_banks(self, height: int, width: int) -> tuple[npt.NDArray[np.uint8], ...]:
        n = self._count
        shapes = [(height, width, 3)] if self._rgb else list(yuv_shapes(height, width))
        sizes = [int(np.prod(shape)) for shape in shapes]
        flat = FRAME_POOL.take(n * sum(sizes))
        banks, offset = [], 0
        for shape, size in zip(shapes, sizes, strict=True):
            banks.append(flat[offset:offset + n * size].reshape(n, *shape))
            offset += n * size
        return tuple(banks)


def single(value: Captured) -> Any:
    """One frame: uint8 ``[3, H, W]`` (a channels-first view of the HWC array) or YUV planes."""
    if isinstance(value, YuvPlanes):
        return Yuv420Frame(y=torch.from_numpy(value.y), uv=torch.from_numpy(value.uv),
                           color_space=value.color_space,  # type: ignore[arg-type]
                           color_range=value.color_range)  # type: ignore[arg-type]
    return torch.from_numpy(value).permute(2, 0, 1)


def copy(value: Captured) -> Captured:
    """The same frame in new memory."""
    if isinstance(value, YuvPlanes):
        return YuvPlanes(y=value.y.copy(), uv=value.uv.copy(), color_space=value.color_space,
                         color_range=value.color_range)
    return value.copy()


def stack(values: Sequence[Captured]) -> Any:
    """Frames of one size stacked in new memory: ``[T, 3, H, W]`` or a stacked Yuv420Frame."""
    first = values[0]
    if isinstance(first, YuvPlanes):
        planes = [v for v in values if isinstance(v, YuvPlanes)]
        return Yuv420Frame(y=torch.from_numpy(np.stack([p.y for p in planes])),
                           uv=torch.from_numpy(np.stack([p.uv for p in planes])),
                           color_space=first.color_space,  # type: ignore[arg-type]
                           color_range=first.color_range)  # type: ignore[arg-type]
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)


class CopyOutputs:
    """``window_storage="copy"``: every sample owns its memory.

    The first sample to show a frame takes its slot of the call's :class:`FrameSlab` (no copy);
    later ones get a copy; windows are stacked into new memory.
    """

    def __init__(self, captured: dict[FrameKey, Captured]) -> None:
        self._captured = captured
        self._claimed: set[FrameKey] = set()

    def take(self, keys: list[FrameKey], *, is_windowed: bool) -> Any:
        if is_windowed:
            return stack([self._captured[k] for k in keys])
        key = keys[-1]
        value = self._captured[key]
        if key in self._claimed:
            value = copy(value)
        self._claimed.add(key)
        return single(value)


class ViewOutputs:
    """``window_storage="view"``: the call's frames in one bank per size, samples are views.

    The bank is the call's :class:`FrameSlab` itself when every frame lies in its slot (no copy);
    otherwise the frames are stacked once per size. A window of consecutive frames is a view of
    the bank (overlapping windows share memory, as Rerun's); other windows (every other frame,
    a repeated frame, uneven spacing) are gathered into new memory of their own, so that writing
    into one sample never changes another's frames.

    Args:
        captured: the call's frames.
        slots: :meth:`FrameSlab.slots` of the slab holding them, if it has them all.
    """

    def __init__(self, captured: dict[FrameKey, Captured], *,
                 slots: tuple[tuple[npt.NDArray[np.uint8], ...], dict[FrameKey, int]] | None = None
                 ) -> None:
        self._slot: dict[FrameKey, tuple[tuple[int, ...], int]] = {}
        self._banks: dict[tuple[int, ...], Any] = {}
        if slots is not None and captured:
            banks, slot_of = slots
            self._banks[()] = slab_bank(banks, next(iter(captured.values())))
            self._slot = {key: ((), slot_of[key]) for key in captured}
            return
        by_shape: dict[tuple[int, ...], list[FrameKey]] = {}
        for key in sorted(captured, key=frame_sort_key):
            by_shape.setdefault(captured[key].shape, []).append(key)
        for shape, keys in by_shape.items():
            for i, key in enumerate(keys):
                self._slot[key] = (shape, i)
            self._banks[shape] = stack([captured[k] for k in keys])

    def take(self, keys: list[FrameKey], *, is_windowed: bool) -> Any:
        bank = self._banks[self._slot[keys[0]][0]]
        slots = [self._slot[k][1] for k in keys]
        if not is_windowed:
            return _index(bank, slots[-1])
        if all(b - a == 1 for a, b in pairwise(slots)):  # contiguous: a view, as Rerun's
            return _index(bank, slice(slots[0], slots[-1] + 1))
        return _index(bank, torch.as_tensor(slots))  # advanced indexing copies


def slab_bank(banks: tuple[npt.NDArray[np.uint8], ...], like: Captured) -> Any:
    """A slab's slot banks as one value: uint8 ``[K, 3, H, W]`` (a channels-first view of the
    ``[K, H, W, 3]`` bank) or a stacked :class:`Yuv420Frame` with ``like``'s colour metadata."""
    if isinstance(like, YuvPlanes):
        return Yuv420Frame(y=torch.from_numpy(banks[0]), uv=torch.from_numpy(banks[1]),
                           color_space=like.color_space,  # type: ignore[arg-type]
                           color_range=like.color_range)  # type: ignore[arg-type]
    return torch.from_numpy(banks[0]).permute(0, 3, 1, 2)


def _index(bank: Any, where: Any) -> Any:
    if isinstance(bank, Yuv420Frame):
        return Yuv420Frame(y=bank.y[where], uv=bank.uv[where], color_space=bank.color_space,
                           color_range=bank.color_range)
    return bank[where]


def frame_sort_key(key: FrameKey) -> tuple[str, int]:
    """Packet rows in order, then asset frames by (asset, presentation index)."""
    return (key[0], key[1]) if isinstance(key, tuple) else ("", key)
