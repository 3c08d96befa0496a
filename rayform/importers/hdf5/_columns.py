"""HDF5 arrays as rayform components: numbers, raw images, encoded images and text.

One dataset (its rows along the first axis, one row per frame) becomes one entity:

=====================================  ==============================================
array                                  components
=====================================  ==============================================
numbers or bools ``(T,)`` / ``(T, D)``  ``Scalars:scalars`` (dtype kept)
numbers ``(T, d1, d2, …)``             ``Scalars:scalars`` (``d1·d2·…`` values a row, C order)
                                       + static ``Tensor:shape`` ``[d1, d2, …]``
``uint8 (T, H, W, C)``, C ∈ {1, 3, 4}  ``Image:buffer`` (the frame's bytes as stored, HWC) and
                                       ``Image:format`` (Rerun's ``ImageFormat``: width,
                                       height, color model L / RGB / RGBA, channel type U8),
                                       the columns the MCAP importer gives ``sensor_msgs/Image``
JPEG / PNG bytes (variable-length,     ``EncodedImage:blob`` (the bytes as stored, zero padding
opaque, or zero-padded ``uint8`` rows)  cut) and ``EncodedImage:media_type``
strings                                ``TextDocument:text``
=====================================  ==============================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.errors import FormatError
from rayform.importers.ros._messages import IMAGE_FORMAT_TYPE
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    ENCODED_IMAGE_MEDIA_TYPE,
    SCALARS,
    TEXT_DOCUMENT,
)
from rayform.recording._writer import RecordingWriter, TimelineLike

Kind = Literal["auto", "scalars", "image", "encoded_image", "text"]
KINDS: Final[tuple[Kind, ...]] = ("auto", "scalars", "image", "encoded_image", "text")
IMAGE_BUFFER: Final = "Image:buffer"
IMAGE_FORMAT: Final = "Image:format"
TENSOR_SHAPE: Final = "Tensor:shape"
# Rerun's ColorModel for 1, 3 and 4 channels, and its ChannelDatatype U8.
_COLOR_MODEL: Final = {1: 1, 3: 2, 4: 3}
_U8: Final = 6
_JPEG: Final = b"\xff\xd8\xff"
_PNG: Final = b"\x89PNG\r\n\x1a\n"
_MAX_BINARY: Final = 2**31 - 1


def media_type_of(blob: bytes) -> str | None:
    """``image/jpeg`` or ``image/png`` from the first bytes, else None."""
    if blob.startswith(_JPEG):
        return "image/jpeg"
    if blob.startswith(_PNG):
        return "image/png"
    return None


def resolve_kind(values: npt.NDArray[Any], kind: Kind) -> Kind:
    """The kind ``auto`` stands for, from the array's dtype and shape."""
    if kind != "auto":
        return kind
    dtype = values.dtype
    if dtype.kind in "SOV":
        first = _first_bytes(values)
        return "encoded_image" if first is not None and media_type_of(first) else "text"
    if dtype.kind == "U":
        return "text"
    if dtype == np.uint8 and values.ndim == 4 and values.shape[-1] in _COLOR_MODEL:
        return "image"
    return "scalars"


def log_array(rec: RecordingWriter, entity: str, values: npt.NDArray[Any], *,
              timelines: Mapping[str, TimelineLike], kind: Kind = "auto", where: str,
              lengths: npt.NDArray[Any] | None = None) -> Kind:
    """Log ``values`` (one row per frame) on ``entity``; returns the kind it was logged as.

    Args:
        where: the file and dataset, for error messages.
        lengths: for encoded images stored as zero-padded ``uint8`` rows, each row's byte count
            (ALOHA's ``compress_len``); without it the padding is cut after the image's end marker.

    Raises:
        FormatError: the array cannot be logged as ``kind``.
    """
    resolved = resolve_kind(values, kind)
    if resolved == "image":
        rec.log_columns(entity, timelines=timelines, components=image_components(values, where))
    elif resolved == "encoded_image":
        blobs = encoded_blobs(values, lengths, where)
        types = [media_type_of(b) or "application/octet-stream" for b in blobs]
        unknown = [i for i, t in enumerate(types) if t == "application/octet-stream"]
        if unknown:
            raise FormatError(f"{where}: row {unknown[0]} is neither a JPEG nor a PNG image")
        rec.log_columns(entity, timelines=timelines, components={
            ENCODED_IMAGE_BLOB: _rows(pa.array(blobs, pa.binary())),
            ENCODED_IMAGE_MEDIA_TYPE: _rows(pa.array(types, pa.string()))})
    elif resolved == "text":
        rec.log_columns(entity, timelines=timelines,
                        components={TEXT_DOCUMENT: _rows(pa.array(text_rows(values, where)))})
    else:
        numbers = numeric_rows(values, where)
        rec.log_columns(entity, timelines=timelines, components={SCALARS: numbers})
        if values.ndim > 2:
            rec.log_static(entity, components={
                TENSOR_SHAPE: np.asarray(values.shape[1:], dtype=np.int64)})
    return resolved


def numeric_rows(values: npt.NDArray[Any], where: str) -> npt.NDArray[Any]:
    """``(T,)`` or ``(T, D)`` numbers in native byte order (values unchanged)."""
    if values.dtype.kind not in "biuf":
        raise FormatError(f"{where}: dtype {values.dtype} is not numeric; declare its kind "
                          "(image, encoded_image or text) in a mapping file")
    if values.ndim == 0:
        raise FormatError(f"{where}: a scalar, not one value per frame")
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    return values.reshape(len(values), -1) if values.ndim > 2 else values


def image_components(values: npt.NDArray[Any], where: str) -> dict[str, pa.Array]:
    """``Image:buffer`` and ``Image:format`` of ``uint8 (T, H, W, C)`` frames, without copying."""
    if values.dtype != np.uint8 or values.ndim != 4 or values.shape[-1] not in _COLOR_MODEL:
        raise FormatError(f"{where}: an image needs uint8 (T, H, W, C) frames with C in 1, 3 or "
                          f"4, got {values.dtype} {values.shape}")
    count, height, width, channels = values.shape
    frame = height * width * channels
    if count * frame > _MAX_BINARY:
        raise FormatError(f"{where}: {count * frame} bytes of frames in one episode; rayform "
                          f"stores at most {_MAX_BINARY} bytes of one camera per segment")
    flat = np.ascontiguousarray(values).reshape(-1)
    offsets = np.arange(0, (count + 1) * frame, frame, dtype=np.int32) if count else \
        np.zeros(1, np.int32)
    buffers = pa.Array.from_buffers(pa.binary(), count,
                                    [None, pa.py_buffer(offsets), pa.py_buffer(flat)])
    fmt = {"width": width, "height": height, "pixel_format": None,
           "color_model": _COLOR_MODEL[channels], "channel_datatype": _U8}
    return {IMAGE_BUFFER: _rows(buffers),
            IMAGE_FORMAT: _rows(pa.array([fmt] * count, IMAGE_FORMAT_TYPE))}


def encoded_blobs(values: npt.NDArray[Any], lengths: npt.NDArray[Any] | None, where: str
                  ) -> list[bytes]:
    """Each row's encoded image bytes: variable-length or opaque values as stored, zero-padded
    ``uint8`` rows cut at ``lengths`` (or after the JPEG / PNG end marker)."""
    if values.dtype.kind in "SOV" and values.ndim == 1:
        return [_as_bytes(v, where) for v in values]
    if values.dtype != np.uint8 or values.ndim != 2:
        raise FormatError(f"{where}: encoded images must be variable-length bytes or zero-padded "
                          f"uint8 (T, L) rows, got {values.dtype} {values.shape}")
    if lengths is not None:
        sizes = np.asarray(lengths).reshape(-1)
        if len(sizes) != len(values) or (sizes < 0).any() or (sizes > values.shape[1]).any():
            raise FormatError(f"{where}: {len(sizes)} image lengths for {len(values)} rows of "
                              f"{values.shape[1]} bytes, or a length outside 0..{values.shape[1]}")
        return [values[i, :int(n)].tobytes() for i, n in enumerate(sizes)]
    return [_cut_padding(row.tobytes()) for row in values]


def text_rows(values: npt.NDArray[Any], where: str) -> list[str]:
    """Strings (``bytes`` decoded as UTF-8) of a 1-D array."""
    if values.ndim != 1:
        raise FormatError(f"{where}: text needs one string per frame, got shape {values.shape}")
    out = []
    for value in values.tolist():
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as err:
                raise FormatError(f"{where}: a string that is not UTF-8 ({value[:20]!r})") from err
        out.append(str(value))
    return out


def _cut_padding(blob: bytes) -> bytes:
    if blob.startswith(_JPEG):
        end = blob.rfind(b"\xff\xd9")
        return blob[:end + 2] if end >= 0 else blob.rstrip(b"\x00")
    if blob.startswith(_PNG):
        end = blob.rfind(b"IEND")
        return blob[:end + 8] if end >= 0 else blob.rstrip(b"\x00")
    return blob.rstrip(b"\x00")


def _as_bytes(value: Any, where: str) -> bytes:
    if isinstance(value, np.void):
        return value.tobytes()
    if isinstance(value, bytes | np.bytes_):
        return bytes(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8:
        return value.tobytes()
    raise FormatError(f"{where}: expected bytes per row, got {type(value).__name__}")


def _first_bytes(values: npt.NDArray[Any]) -> bytes | None:
    if values.ndim != 1 or not len(values):
        return None
    first = values[0]
    if isinstance(first, np.void):
        return first.tobytes()
    if isinstance(first, bytes | np.bytes_):
        return bytes(first)
    if isinstance(first, np.ndarray) and first.dtype == np.uint8:
        return first.tobytes()
    return None


def _rows(values: pa.Array) -> pa.Array:
    offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, values)
