"""Arrow representations that differ between Rerun and rayform, converted in both directions.

Rerun stores blobs (``EncodedImage:blob``, ``VideoStream:sample``, ``Image:buffer``,
``AssetVideo:blob``) as ``List<UInt8>`` and the video codec as a ``UInt32`` FourCC-like code;
rayform's writer stores blobs as ``Binary`` and the codec as its name (``"h264"``). Everything
else keeps Rerun's Arrow types unchanged.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# rerun.components.VideoCodec values.
VIDEO_CODEC_CODES: Final[dict[str, int]] = {
    "av1": 0x61763031,
    "h264": 0x61766331,
    "h265": 0x68657631,
    "vp8": 0x76703038,
    "vp9": 0x76703039,
}
VIDEO_CODEC_NAMES: Final[dict[int, str]] = {code: name for name, code in VIDEO_CODEC_CODES.items()}
_ALIASES: Final = {"hevc": "h265", "avc": "h264", "avc1": "h264", "av01": "av1"}


def is_blob_rows(arr_type: pa.DataType) -> bool:
    """``List<List<UInt8>>``: one Rerun blob list per row."""
    if not pa.types.is_list(arr_type):
        return False
    inner = arr_type.value_type
    return bool((pa.types.is_list(inner) or pa.types.is_large_list(inner))
                and pa.types.is_uint8(inner.value_type))


def _bitmap(valid: pa.Array) -> pa.Buffer | None:
    if valid.false_count == 0:
        return None
    return pa.array(valid.to_numpy(zero_copy_only=False), pa.bool_()).buffers()[1]


def blobs_to_binary(rows: pa.Array) -> pa.Array:
    """``List<List<UInt8>>`` -> ``List<Binary>`` (same rows, same bytes)."""
    inner = rows.values
    offsets = inner.offsets.to_numpy().astype(np.int64)
    start, stop = int(offsets[0]), int(offsets[-1])
    data = inner.values.slice(start, stop - start).to_numpy(zero_copy_only=False)
    new_offsets = (offsets - start).astype(np.int32)
    binary = pa.BinaryArray.from_buffers(
        pa.binary(), len(inner),
        [_bitmap(inner.is_valid()), pa.py_buffer(new_offsets), pa.py_buffer(data)])
    return pa.ListArray.from_arrays(rows.offsets, binary, mask=rows.is_null()
                                    if rows.null_count else None)


def binary_to_blobs(rows: pa.Array) -> pa.Array:
    """``List<Binary>`` -> ``List<List<UInt8>>`` (Rerun's blob representation)."""
    inner = rows.values.cast(pa.binary())
    offsets = pa.array(np.frombuffer(inner.buffers()[1], dtype=np.int32,
                                     count=len(inner) + 1, offset=inner.offset * 4))
    data_buf = inner.buffers()[2]
    values = pa.UInt8Array.from_buffers(pa.uint8(), 0 if data_buf is None else data_buf.size,
                                        [None, data_buf if data_buf is not None
                                         else pa.py_buffer(b"")])
    lists = pa.ListArray.from_arrays(offsets, values,
                                     type=pa.list_(pa.field("item", pa.uint8(), nullable=False)),
                                     mask=inner.is_null() if inner.null_count else None)
    return pa.ListArray.from_arrays(rows.offsets, lists,
                                    mask=rows.is_null() if rows.null_count else None)


def codec_codes_to_names(rows: pa.Array) -> pa.Array:
    """``List<UInt32>`` Rerun codec codes -> ``List<String>`` codec names."""
    names = [VIDEO_CODEC_NAMES.get(int(c), f"0x{int(c):08x}") if c is not None else None
             for c in rows.values.to_pylist()]
    return pa.ListArray.from_arrays(rows.offsets, pa.array(names, pa.string()),
                                    mask=rows.is_null() if rows.null_count else None)


def codec_names_to_codes(rows: pa.Array) -> pa.Array:
    """``List<String>`` codec names -> ``List<UInt32>`` Rerun codec codes.

    Raises:
        ValueError: a codec Rerun cannot play.
    """
    codes = []
    for name in rows.values.to_pylist():
        code = VIDEO_CODEC_CODES.get(_ALIASES.get(str(name).lower(), str(name).lower()))
        if code is None:
            raise ValueError(f"video codec {name!r} has no Rerun VideoCodec; Rerun plays "
                             f"{sorted(VIDEO_CODEC_CODES)}")
        codes.append(code)
    return pa.ListArray.from_arrays(rows.offsets, pa.array(codes, pa.uint32()))


def is_codec_codes(arr_type: pa.DataType) -> bool:
    return bool(pa.types.is_list(arr_type) and pa.types.is_uint32(arr_type.value_type))


def null_free(rows: pa.Array) -> bool:
    return bool(pc.all(rows.is_valid()).as_py()) if len(rows) else True
