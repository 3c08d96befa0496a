"""YUV 4:2:0 frames as tensors (Rerun's ``Yuv420Frame``), converted to RGB on any torch device.

Decoding to yuv420p skips the CPU colour conversion (the largest cost of decoding small frames);
``Yuv420Frame.to_rgb(device="cuda")`` does it on the GPU after the batch is moved there.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import torch

from rayform.errors import ConfigError

ColorSpace = Literal["bt601", "bt709", "bt2020", "unspecified"]
ColorRange = Literal["limited", "full", "unspecified"]
MatrixName = Literal["bt601", "bt709", "bt2020"]
RangeName = Literal["limited", "full"]

COLOR_SPACES: Final[tuple[str, ...]] = ("bt601", "bt709", "bt2020", "unspecified")
COLOR_RANGES: Final[tuple[str, ...]] = ("limited", "full", "unspecified")

# (Kr, Kb) luma coefficients of each matrix.
_LUMA_COEFFICIENTS: Final[dict[str, tuple[float, float]]] = {
    "bt601": (0.299, 0.114),
    "bt709": (0.2126, 0.0722),
    "bt2020": (0.2627, 0.0593),
}


@dataclass(frozen=True, slots=True)
class Yuv420Frame:
    """One decoded frame (or a stack of them) as 8-bit YUV 4:2:0 planes.

    Attributes:
        y: luma, ``uint8 [..., 1, H, W]``.
        uv: interleaved chroma planes (U then V), ``uint8 [..., 2, ceil(H/2), ceil(W/2)]``.
        color_space: the YUV matrix: ``"bt601"``, ``"bt709"``, ``"bt2020"`` or
            ``"unspecified"``.
        color_range: ``"limited"`` (16–235), ``"full"`` (0–255) or ``"unspecified"``.
    """

    y: torch.Tensor
    uv: torch.Tensor
    color_space: ColorSpace = "unspecified"
    color_range: ColorRange = "unspecified"

    def __post_init__(self) -> None:
        if self.color_space not in COLOR_SPACES:
            raise ConfigError(
                f"Yuv420Frame.color_space must be one of {COLOR_SPACES}, got {self.color_space!r} "
                "(unsupported YUV color space)"
            )
        if self.color_range not in COLOR_RANGES:
            raise ConfigError(
                f"Yuv420Frame.color_range must be one of {COLOR_RANGES}, got {self.color_range!r} "
                "(unsupported YUV color range)"
            )
        if self.y.dtype != torch.uint8 or self.uv.dtype != torch.uint8:
            raise ConfigError(
                f"Yuv420Frame planes must be uint8, got y {self.y.dtype} and uv {self.uv.dtype}"
            )
        if self.y.dim() < 3 or self.y.shape[-3] != 1:
            raise ConfigError(f"Yuv420Frame.y must be [..., 1, H, W], got {tuple(self.y.shape)}")
        height, width = self.y.shape[-2], self.y.shape[-1]
        expected = (*self.y.shape[:-3], 2, (height + 1) // 2, (width + 1) // 2)
        if tuple(self.uv.shape) != expected:
            raise ConfigError(
                f"Yuv420Frame.uv must be {expected} for y {tuple(self.y.shape)}, got "
                f"{tuple(self.uv.shape)}"
            )

    @property
    def height(self) -> int:
        return int(self.y.shape[-2])

    @property
    def width(self) -> int:
        return int(self.y.shape[-1])

    @property
    def device(self) -> torch.device:
        return self.y.device

    @classmethod
    def stack(cls, frames: Sequence[Yuv420Frame]) -> Yuv420Frame:
        """Stack frames of one size and colour metadata along a new leading dimension."""
        if not frames:
            raise ConfigError("Yuv420Frame.stack needs at least one frame: cannot stack an empty "
                              "sequence of YUV420 frames")
        first = frames[0]
        for other in frames[1:]:
            if (other.color_space, other.color_range) != (first.color_space, first.color_range):
                raise ConfigError(
                    "Yuv420Frame.stack: frames have different colour metadata "
                    f"({first.color_space}/{first.color_range} and "
                    f"{other.color_space}/{other.color_range}); convert them with to_rgb first"
                )
        return cls(y=torch.stack([f.y for f in frames]), uv=torch.stack([f.uv for f in frames]),
                   color_space=first.color_space, color_range=first.color_range)

    def clone(self) -> Yuv420Frame:
        """A copy that shares no memory with this frame."""
        return Yuv420Frame(y=self.y.clone(), uv=self.uv.clone(), color_space=self.color_space,
                           color_range=self.color_range)

    def pin_memory(self) -> Yuv420Frame:
        """The planes in pinned host memory (called by ``DataLoader(pin_memory=True)``)."""
        return Yuv420Frame(y=self.y.pin_memory(), uv=self.uv.pin_memory(),
                           color_space=self.color_space, color_range=self.color_range)

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Yuv420Frame:
        """The planes on ``device``."""
        return Yuv420Frame(y=self.y.to(device, non_blocking=non_blocking),
                           uv=self.uv.to(device, non_blocking=non_blocking),
                           color_space=self.color_space, color_range=self.color_range)

    def to_rgb(self, device: torch.device | str | None = None, *,
               dtype: torch.dtype = torch.float32, normalize: bool = True,
               non_blocking: bool = False, color_space: MatrixName | None = None,
               color_range: RangeName | None = None) -> torch.Tensor:
        """Convert to RGB ``[..., 3, H, W]`` on ``device`` (the planes' device if ``None``).

        Chroma is upsampled by repeating each sample over its 2×2 block. Unspecified metadata is
        read as BT.601 limited range (with a warning), FFmpeg's default for SD video.

        Args:
            device: where to convert (e.g. ``"cuda"``); not allowed to be CUDA inside a
                DataLoader worker process.
            dtype: a floating dtype, or ``torch.uint8`` for 0–255 integers.
            normalize: floating output in ``[0, 1]``; ``False`` gives ``[0, 255]``.
            non_blocking: copy the planes to ``device`` asynchronously (from pinned memory).
            color_space: use this matrix instead of the frame's (``"bt601"``, ``"bt709"``,
                ``"bt2020"``).
            color_range: use this range instead of the frame's (``"limited"``, ``"full"``).

        Returns:
            The RGB tensor, ``dtype`` ``[..., 3, H, W]``.
        """
        target = torch.device(device) if device is not None else self.y.device
        if target.type == "cuda" and torch.utils.data.get_worker_info() is not None:
            raise RuntimeError(
                "Yuv420Frame.to_rgb on CUDA inside a DataLoader worker: return the YUV planes "
                "from the dataset and convert in the training loop (after .to('cuda'))"
            )
        if color_space is not None and color_space not in _LUMA_COEFFICIENTS:
            raise ConfigError(f"to_rgb color_space must be one of {sorted(_LUMA_COEFFICIENTS)} or "
                              f"None, got {color_space!r}")
        if color_range is not None and color_range not in ("limited", "full"):
            raise ConfigError(f"to_rgb color_range must be 'limited', 'full' or None, got "
                              f"{color_range!r}")
        space: str = color_space or self.color_space
        value_range: str = color_range or self.color_range
        if space == "unspecified" or value_range == "unspecified":
            warnings.warn(
                f"Yuv420Frame has unspecified colour metadata ({space}/{value_range}); it "
                "defaults to BT.601 limited range (pass color_space= / color_range= if the source "
                "uses others)",
                UserWarning,
                stacklevel=2,
            )
            space = "bt601" if space == "unspecified" else space
            value_range = "limited" if value_range == "unspecified" else value_range
        work = torch.float32 if dtype == torch.uint8 or not dtype.is_floating_point else dtype
        y = self.y.to(target, non_blocking=non_blocking).to(work)
        uv = self.uv.to(target, non_blocking=non_blocking).to(work)
        height, width = self.height, self.width
        uv = uv.repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1)[..., :height, :width]
        if value_range == "limited":
            luma = (y - 16.0) / 219.0
            chroma = (uv - 128.0) / 224.0
        else:
            luma = y / 255.0
            chroma = (uv - 128.0) / 255.0
        kr, kb = _LUMA_COEFFICIENTS[space]
        kg = 1.0 - kr - kb
        cb, cr = chroma[..., 0:1, :, :], chroma[..., 1:2, :, :]
        red = luma + (2.0 * (1.0 - kr)) * cr
        green = luma - (2.0 * kb * (1.0 - kb) / kg) * cb - (2.0 * kr * (1.0 - kr) / kg) * cr
        blue = luma + (2.0 * (1.0 - kb)) * cb
        rgb = torch.cat([red, green, blue], dim=-3).clamp_(0.0, 1.0)
        if dtype == torch.uint8:
            return rgb.mul_(255.0).round_().to(torch.uint8)
        if not normalize:
            rgb = rgb.mul_(255.0)
        return rgb.to(dtype)


def _is_yuv_list(values: Sequence[Any]) -> bool:
    return bool(values) and all(isinstance(v, Yuv420Frame) for v in values)


class Yuv420Collator:
    """A ``DataLoader`` ``collate_fn`` that stacks :class:`Yuv420Frame` fields.

    Other fields go through ``torch.utils.data.default_collate`` (or ``collate_fn``). A ``None``
    field (missing data) is an error naming the key: filter such samples first (the iterable
    dataset skips them).
    """

    def __init__(self, *, collate_fn: Callable[[list[Any]], Any] | None = None) -> None:
        self._collate_fn = collate_fn

    def __call__(self, batch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not batch:
            raise ConfigError("Yuv420Collator got an empty batch")
        collate = self._collate_fn or torch.utils.data.default_collate
        out: dict[str, Any] = {}
        for key in batch[0]:
            values = [sample[key] for sample in batch]
            missing = [i for i, v in enumerate(values) if v is None]
            if missing:
                raise ConfigError(
                    f"Yuv420Collator: field {key!r} is None (missing data) in samples {missing}; "
                    "filter or replace None samples before collation (the iterable dataset "
                    "skips them)"
                )
            if _is_yuv_list(values):
                out[key] = Yuv420Frame.stack(values)
            else:
                out[key] = collate(values)
        return out

    def __repr__(self) -> str:
        return "Yuv420Collator()"
