"""TFRecord files read without TensorFlow: the record framing and its masked CRC32C checks.

A TFRecord file is a sequence of records, each::

    uint64 length  |  uint32 masked_crc32c(length bytes)  |  data[length]  |  uint32 masked_crc32c(data)

(little-endian; ``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` mod 2**32, as TensorFlow's
``record_writer`` defines it). Records are read one at a time, so memory is bounded by the largest
record (one RLDS episode); a length is checked against its CRC and against the bytes left in the
file before anything is allocated for it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final

from rayform._optional import require
from rayform.errors import CorruptRecordingError

_HEADER: Final = struct.Struct("<QI")
_FOOTER: Final = struct.Struct("<I")
_MASK_DELTA: Final = 0xA282EAD8


def masked_crc(crc: int) -> int:
    """TFRecord's mask of a CRC32C value."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def crc32c_function() -> Callable[[bytes], int]:
    """The CRC32C of ``google-crc32c`` (a C implementation; the ``rlds`` extra)."""
    module = require("google_crc32c", extra="rlds", feature="Reading RLDS / TFRecord files")
    value: Callable[[bytes], int] = module.value
    return value


def iter_records(path: Path) -> Iterator[bytes]:
    """The records of the TFRecord file ``path``, each checked against its CRCs.

    Raises:
        CorruptRecordingError: the file is truncated (a record's header, data or CRC is cut
            off) or damaged (a CRC does not match), naming the record and its byte offset.
    """
    crc = crc32c_function()
    size = path.stat().st_size
    with path.open("rb") as fh:
        yield from _records(fh, path, size, crc)


def _records(fh: BinaryIO, path: Path, size: int, crc: Callable[[bytes], int]) -> Iterator[bytes]:
    offset = 0
    number = 0
    while True:
        header = fh.read(_HEADER.size)
        if not header:
            return
        where = f"{path}: record {number} at byte {offset}"
        if len(header) < _HEADER.size:
            raise CorruptRecordingError(f"{where}: truncated header ({len(header)} of "
                                        f"{_HEADER.size} bytes); the file is cut short")
        length, length_crc = _HEADER.unpack(header)
        if masked_crc(crc(header[:8])) != length_crc:
            raise CorruptRecordingError(f"{where}: the length field fails its CRC32C check "
                                        "(the file is damaged or not a TFRecord file)")
        left = size - offset - _HEADER.size - _FOOTER.size
        if length > left:
            raise CorruptRecordingError(f"{where}: declares {length} bytes but only "
                                        f"{max(left, 0)} remain; the file is truncated")
        data = fh.read(length)
        footer = fh.read(_FOOTER.size)
        if len(data) < length or len(footer) < _FOOTER.size:
            raise CorruptRecordingError(f"{where}: truncated data; the file is cut short")
        if masked_crc(crc(data)) != _FOOTER.unpack(footer)[0]:
            raise CorruptRecordingError(f"{where}: the {length} data bytes fail their CRC32C "
                                        "check; the file is damaged (re-download it)")
        yield data
        offset += _HEADER.size + length + _FOOTER.size
        number += 1
