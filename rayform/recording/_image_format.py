"""Rerun's ``ImageFormat`` (the ``Image:format`` column beside raw ``Image:buffer`` pixels): its
colour models and channel datatypes, and a one-line description of a format (torch-free, for
``rayform schema`` and the raw-image decoder alike)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

COLOR_MODELS: Final[dict[int, tuple[str, int, tuple[int, ...] | None]]] = {
    1: ("L", 1, None), 2: ("RGB", 3, None), 3: ("RGBA", 4, None),
    4: ("BGR", 3, (2, 1, 0)), 5: ("BGRA", 4, (2, 1, 0, 3)),
}
"""Rerun's ColorModel -> (name, channel count, channel order that gives RGB(A))."""

CHANNEL_DATATYPES: Final[dict[int, str]] = {
    6: "u1", 7: "i1", 8: "<u2", 9: "<i2", 10: "<u4", 11: "<i4", 12: "<u8", 13: "<i8",
    33: "<f2", 34: "<f4", 35: "<f8",
}
"""Rerun's ChannelDatatype -> numpy dtype (little-endian, as Rerun stores them)."""

_DATATYPE_NAMES: Final[dict[int, str]] = {
    6: "uint8", 7: "int8", 8: "uint16", 9: "int16", 10: "uint32", 11: "int32", 12: "uint64",
    13: "int64", 33: "float16", 34: "float32", 35: "float64",
}


def describe_image_format(value: Mapping[str, Any]) -> str | None:
    """``"96×96×3 float32, RGB"`` (height × width × channels) for an ``ImageFormat`` value,
    ``"480×640 pixel_format 26"`` for a YUV / Bayer one; ``None`` when it is not a valid format
    (no positive width and height, an unknown colour model or datatype)."""
    width, height = value.get("width"), value.get("height")
    if not isinstance(width, int) or not isinstance(height, int) or width <= 0 or height <= 0:
        return None
    pixel_format = value.get("pixel_format")
    if pixel_format is not None:
        return f"{height}×{width} pixel_format {pixel_format}"
    model, datatype = value.get("color_model"), value.get("channel_datatype")
    if model not in COLOR_MODELS or datatype not in _DATATYPE_NAMES:
        return None
    name, channels, _ = COLOR_MODELS[model]
    return f"{height}×{width}×{channels} {_DATATYPE_NAMES[datatype]}, {name}"
