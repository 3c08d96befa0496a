"""``tf.train.Example`` and ``tf.train.SequenceExample`` parsed from protobuf wire format.

A hand-written reader of the five tiny messages involved (``Example``/``SequenceExample`` ->
``Features``/``FeatureLists`` -> ``Feature`` -> ``BytesList``/``FloatList``/``Int64List``,
field numbers from TensorFlow's ``example.proto`` and ``feature.proto``), so that RLDS needs
neither TensorFlow nor generated protobuf code. Packed floats become a zero-copy ``float32`` view
of the record (bit-exact); packed varints are decoded with numpy; blobs are copied once.
Anything the wire format does not allow raises :class:`WireError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

FeatureValue: TypeAlias = "list[bytes] | npt.NDArray[np.float32] | npt.NDArray[np.int64]"
"""One ``Feature``: a ``BytesList`` as ``list[bytes]``, a ``FloatList`` as ``float32``, an
``Int64List`` as ``int64``."""

_VARINT: Final = 0
_FIXED64: Final = 1
_LEN: Final = 2
_FIXED32: Final = 5
_EMPTY_FLOATS: Final = np.zeros(0, np.float32)


class WireError(ValueError):
    """The bytes are not a valid ``Example`` / ``SequenceExample`` message."""


@dataclass(frozen=True, slots=True)
class ParsedExample:
    """One record: ``features`` (an ``Example``'s, or a ``SequenceExample``'s context) and, for a
    ``SequenceExample``, ``feature_lists`` (one ``Feature`` per step)."""

    features: dict[str, FeatureValue]
    feature_lists: dict[str, list[FeatureValue]] | None = None


def parse_example(data: bytes) -> ParsedExample:
    """Parse a serialized ``Example`` or ``SequenceExample``.

    The two share field 1 (``features`` / ``context``, both ``Features``); a field 2
    (``feature_lists``) makes it a ``SequenceExample``.

    Raises:
        WireError: malformed bytes.
    """
    view = memoryview(data)
    features: dict[str, FeatureValue] = {}
    lists: dict[str, list[FeatureValue]] | None = None
    for number, start, end in _length_fields(view, 0, len(view)):
        if number == 1:
            features.update(_features(view, start, end))
        elif number == 2:
            lists = {} if lists is None else lists
            lists.update(_feature_lists(view, start, end))
    return ParsedExample(features, lists)


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError("a varint runs past the end of its message (truncated bytes)")
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("a varint is longer than 10 bytes")


def _fields(view: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(field number, wire type, start, end)`` of each field; for a varint, ``start`` holds the
    value itself."""
    while pos < end:
        key, pos = _varint(view, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0 is not allowed")
        if wire == _VARINT:
            value, pos = _varint(view, pos, end)
            yield number, wire, value, pos
        elif wire == _LEN:
            length, pos = _varint(view, pos, end)
            if pos + length > end:
                raise WireError(f"a field of {length} bytes runs past the end of its message")
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (_FIXED32, _FIXED64):
            size = 4 if wire == _FIXED32 else 8
            if pos + size > end:
                raise WireError("a fixed-size field runs past the end of its message")
            yield number, wire, pos, pos + size
            pos += size
        else:
            raise WireError(f"wire type {wire} (groups or an invalid type) in field {number}")


def _length_fields(view: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    for number, wire, start, stop in _fields(view, pos, end):
        if wire == _LEN:
            yield number, start, stop
        elif number in (1, 2):
            raise WireError(f"field {number} must be length-delimited, got wire type {wire}")


def _map_entry(view: memoryview, start: int, end: int) -> tuple[str, int, int]:
    key = ""
    value = (start, start)
    for number, s, e in _length_fields(view, start, end):
        if number == 1:
            try:
                key = bytes(view[s:e]).decode("utf-8")
            except UnicodeDecodeError as err:
                raise WireError(f"a feature name is not UTF-8 ({err})") from err
        elif number == 2:
            value = (s, e)
    return key, value[0], value[1]


def _features(view: memoryview, start: int, end: int) -> dict[str, FeatureValue]:
    out: dict[str, FeatureValue] = {}
    for number, s, e in _length_fields(view, start, end):
        if number == 1:
            key, vs, ve = _map_entry(view, s, e)
            out[key] = _feature(view, vs, ve)
    return out


def _feature_lists(view: memoryview, start: int, end: int) -> dict[str, list[FeatureValue]]:
    out: dict[str, list[FeatureValue]] = {}
    for number, s, e in _length_fields(view, start, end):
        if number == 1:
            key, vs, ve = _map_entry(view, s, e)
            out[key] = [_feature(view, fs, fe)
                        for n, fs, fe in _length_fields(view, vs, ve) if n == 1]
    return out


def _feature(view: memoryview, start: int, end: int) -> FeatureValue:
    value: FeatureValue = []
    for number, s, e in _length_fields(view, start, end):
        if number == 1:
            value = [bytes(view[bs:be]) for n, bs, be in _length_fields(view, s, e) if n == 1]
        elif number == 2:
            value = _floats(view, s, e)
        elif number == 3:
            value = _int64s(view, s, e)
    return value


def _floats(view: memoryview, start: int, end: int) -> npt.NDArray[np.float32]:
    parts: list[npt.NDArray[np.float32]] = []
    for number, wire, s, e in _fields(view, start, end):
        if number != 1:
            continue
        if wire == _LEN:
            if (e - s) % 4:
                raise WireError(f"a packed FloatList of {e - s} bytes is not whole floats")
            parts.append(np.frombuffer(view[s:e], dtype="<f4"))
        elif wire == _FIXED32:
            parts.append(np.frombuffer(view[s:e], dtype="<f4"))
        else:
            raise WireError(f"FloatList values with wire type {wire}")
    if not parts:
        return _EMPTY_FLOATS
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _int64s(view: memoryview, start: int, end: int) -> npt.NDArray[np.int64]:
    parts: list[npt.NDArray[np.int64]] = []
    for number, wire, s, e in _fields(view, start, end):
        if number != 1:
            continue
        if wire == _LEN:
            parts.append(decode_varints(np.frombuffer(view[s:e], dtype=np.uint8)))
        elif wire == _VARINT:
            parts.append(np.array([s], dtype=np.uint64).view(np.int64))
        else:
            raise WireError(f"Int64List values with wire type {wire}")
    if not parts:
        return np.zeros(0, np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def decode_varints(raw: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """Packed varints (two's-complement ``int64``, as ``Int64List`` stores them), vectorised."""
    if len(raw) == 0:
        return np.zeros(0, np.int64)
    last = raw < 0x80
    if not last[-1]:
        raise WireError("a packed Int64List ends inside a varint (truncated bytes)")
    if last.all():  # one byte each: booleans, small ints
        return raw.astype(np.int64)
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if int(lengths.max()) > 10:
        raise WireError("a varint is longer than 10 bytes")
    position = np.arange(len(raw)) - np.repeat(starts, lengths)
    parts = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(parts, starts).view(np.int64)
