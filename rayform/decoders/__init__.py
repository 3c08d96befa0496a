"""Column decoders: the batch decoder contract and the numeric, image and video decoders.

A :class:`ColumnDecoder` turns the Arrow rows of one field into tensors, one per
:class:`DecodeRequest`, for a whole block at a time (:class:`FieldBatch`). The video
names (``VideoFrameDecoder``, ``Yuv420Frame``, ``probe_video_asset``, ``encode_video_packets`` …)
are imported on first use, so this package imports without PyAV.
"""

from __future__ import annotations

from typing import Any

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
from rayform.decoders._requests import RequestArrays, output_row_matrix

_LAZY = {
    "VideoAssetInfo": "rayform.media._video_asset",
    "VideoFrameDecoder": "rayform.decoders._video",
    "Yuv420Collator": "rayform.decoders._yuv",
    "Yuv420Frame": "rayform.decoders._yuv",
    "available_video_codecs": "rayform.media._video_encode",
    "encode_video_packets": "rayform.media._video_encode",
    "probe_video_asset": "rayform.media._video_asset",
    "write_video_mp4": "rayform.media._video_encode",
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
    "RequestArrays",
    "Selector",
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
