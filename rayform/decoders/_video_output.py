"""Captured video frames to per-sample values: tensors, windows, and who may share memory."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._video_plan import FrameKey
from rayform.decoders._yuv import Yuv420Frame
from rayform.media._video_frames import YuvPlanes

Captured = npt.NDArray[np.uint8] | YuvPlanes


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

    The first sample to show a frame takes the decoded array itself; later ones get a copy;
    windows are stacked into new memory.
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
    """``window_storage="view"``: the call's frames stacked once per size, samples are views.

    A window whose frames are evenly spaced in the bank is a strided view; other windows (a
    repeated frame, uneven spacing) are gathered into new memory.
    """

    def __init__(self, captured: dict[FrameKey, Captured]) -> None:
        self._slot: dict[FrameKey, tuple[tuple[int, ...], int]] = {}
        by_shape: dict[tuple[int, ...], list[FrameKey]] = {}
        for key in sorted(captured, key=_sort_key):
            by_shape.setdefault(captured[key].shape, []).append(key)
        self._banks: dict[tuple[int, ...], Any] = {}
        for shape, keys in by_shape.items():
            for i, key in enumerate(keys):
                self._slot[key] = (shape, i)
            self._banks[shape] = stack([captured[k] for k in keys])

    def take(self, keys: list[FrameKey], *, is_windowed: bool) -> Any:
        bank = self._banks[self._slot[keys[0]][0]]
        slots = [self._slot[k][1] for k in keys]
        if not is_windowed:
            return _index(bank, slots[-1])
        steps = {b - a for a, b in pairwise(slots)}
        if not steps or (len(steps) == 1 and min(steps) > 0):
            step = steps.pop() if steps else 1
            return _index(bank, slice(slots[0], slots[-1] + 1, step))
        return _index(bank, torch.as_tensor(slots))


def _index(bank: Any, where: Any) -> Any:
    if isinstance(bank, Yuv420Frame):
        return Yuv420Frame(y=bank.y[where], uv=bank.uv[where], color_space=bank.color_space,
                           color_range=bank.color_range)
    return bank[where]


def _sort_key(key: FrameKey) -> tuple[str, int]:
    return (key[0], key[1]) if isinstance(key, tuple) else ("", key)
