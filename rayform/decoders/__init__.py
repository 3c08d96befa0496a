"""Column decoders: the batch decoder contract and the numeric, text, image and video decoders.

A :class:`ColumnDecoder` turns the Arrow rows of one field into tensors, one per
:class:`DecodeRequest`, for a whole block at a time (:class:`FieldBatch`). The video
decoder names (``VideoFrameDecoder``, ``Yuv420Frame``, ``Yuv420Collator``) are imported on first
use; the media helpers re-exported here (``probe_video_asset``, ``encode_video_packets`` …) live in
:mod:`rayform.media` and import PyAV only when called.
"""

from __future__ import annotations

from typing import Any

try:  # the one message for a missing PyTorch, before any module of this package needs it
    import torch  # noqa: F401
except ImportError as _err:
    from rayform._optional import missing_message

    raise ImportError(missing_message("torch", extra="torch", feature="rayform.decoders")) from _err

from rayform.decoders._base import (
    ColumnDecoder,
    DecodeConcurrency,
    DecodeRequest,
    FieldBatch,
    IndexValue,
    Selector,
)
from rayform.decoders._image import ImageDecoder
from rayform.decoders._numeric import NumericDecoder
from rayform.decoders._raw_image import RawImageDecoder
from rayform.decoders._requests import RequestArrays, output_row_matrix
from rayform.decoders._tensor_rows import TensorRows
from rayform.decoders._text import TextDecoder
from rayform.media import (
    VideoAssetInfo,
    available_video_codecs,
    encode_video_packets,
    probe_video_asset,
    write_video_mp4,
)

_LAZY = {
    "VideoFrameDecoder": "rayform.decoders._video",
    "Yuv420Collator": "rayform.decoders._yuv",
    "Yuv420Frame": "rayform.decoders._yuv",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rayform.decoders' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ColumnDecoder",
    "DecodeConcurrency",
    "DecodeRequest",
    "FieldBatch",
    "ImageDecoder",
    "IndexValue",
    "NumericDecoder",
    "RawImageDecoder",
    "RequestArrays",
    "Selector",
    "TensorRows",
    "TextDecoder",
    "VideoAssetInfo",
    "VideoFrameDecoder",
    "Yuv420Collator",
    "Yuv420Frame",
    "available_video_codecs",
    "encode_video_packets",
    "output_row_matrix",
    "probe_video_asset",
    "write_video_mp4",
]
