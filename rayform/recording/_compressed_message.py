"""A record batch's zstd-compressed IPC message, laid out byte for byte as pyarrow's writer lays it.

pyarrow's stream writer compresses every buffer of a batch apart, each with a zstd context of
its own (some 30 µs a buffer whatever its size), and a batch of a recording's wide schema holds
three buffers per column, most of them the all-zero validity and offsets of columns of nulls.
Here the batch is serialised uncompressed by pyarrow (which slices, truncates and rebases the
buffers of sliced arrays), then:

1. its metadata is read: the row count, the ``FieldNode`` structs and where each buffer lies;
2. each non-empty buffer becomes its uncompressed length (int64, little-endian) followed by its
   zstd frame at Arrow's default level, from the same codec, even where the frame is the larger
   (pyarrow sets no minimum saving, so Arrow's ``-1`` prefix of a buffer kept raw never occurs);
   a buffer equal to an earlier one of the batch (the list offsets of an entity's columns) and
   an all-zero buffer of a length already met are not compressed again (the frames of zeros are
   kept across batches, :data:`_MAX_KEPT_ZERO_FRAMES` of them);
3. the body is those buffers in order, each padded with zeros to 8 bytes (an empty buffer takes
   no bytes), and the metadata a ``RecordBatch`` flatbuffer with the same nodes, the new buffer
   extents and ``BodyCompression{codec: ZSTD, method: BUFFER}``, built the way flatbuffers' C++
   builder (the one Arrow uses) builds it: back to front, scalars equal to their default left
   out.

The message is the one pyarrow writes, metadata and body (the tests compare them byte for byte
on many schemas). A batch this does not lay out (view types, whose messages count their variadic
buffers; custom metadata) gets ``None``, and its caller asks pyarrow's writer.
"""

from __future__ import annotations

import struct
from typing import Final

import pyarrow as pa

_CODEC: Final = pa.Codec("zstd")  # Arrow's default zstd level, as its IPC writer uses
_CONTINUATION: Final = b"\xff\xff\xff\xff"
_ALIGNMENT: Final = 8
_PADDING: Final = bytes(_ALIGNMENT)
_ZEROS: Final = bytes(1 << 20)
_MAX_KEPT_ZERO_FRAMES: Final = 4096
_GLANCE_BYTES: Final = 32
_ZEROS_BYTES: Final = len(_ZEROS)
_ZERO_FRAMES: dict[int, tuple[bytes, int]] = {}
"""Length of an all-zero buffer -> its stored form (length prefix and zstd frame) padded to
:data:`_ALIGNMENT`, and that form's unpadded length."""

# Message.fbs / Schema.fbs: field ids and enum values
_MESSAGE_VERSION, _MESSAGE_HEADER_TYPE, _MESSAGE_HEADER, _MESSAGE_BODY_LENGTH = 0, 1, 2, 3
_MESSAGE_CUSTOM_METADATA: Final = 4
_BATCH_LENGTH, _BATCH_NODES, _BATCH_BUFFERS, _BATCH_COMPRESSION = 0, 1, 2, 3
_BATCH_VARIADIC_COUNTS: Final = 4
_COMPRESSION_CODEC: Final = 0
_METADATA_V5: Final = 4
_HEADER_RECORD_BATCH: Final = 3
_CODEC_ZSTD: Final = 1
_STRUCT_BYTES: Final = 16  # FieldNode {length, null_count} and Buffer {offset, length}: two int64


def compressed_message(plain: pa.Message) -> pa.Message | None:
    """The record batch message pyarrow's stream writer gives a batch with zstd, from its
    uncompressed message ``plain`` (``pa.ipc.read_message(batch.serialize())``); None when the
    batch is of a kind laid out only by pyarrow.

    A dictionary column's message holds its indices (its dictionary travels in a message of its
    own), as pyarrow's does.
    """
    parts = _record_batch_parts(plain.metadata.to_pybytes())
    if parts is None:
        return None
    length, nodes, count, extents = parts
    body = memoryview(plain.body)
    pieces: list[bytes] = []
    buffers: list[int] = []
    met: dict[tuple[int, bytes, bytes], tuple[int, bytes]] = {}  # a glance -> (offset, stored)
    at = 0
    zero_frames = _ZERO_FRAMES  # a wide batch's buffers are mostly zeros: their path is short
    for offset, size in zip(extents[0::2], extents[1::2], strict=True):
        if size == 0:
            buffers += (at, 0)
            continue
        data = body[offset: offset + size]
        if size <= _ZEROS_BYTES and _ZEROS.startswith(data):
            padded, frame_bytes = zero_frames.get(size) or _zero_frame(size)
            pieces.append(padded)
            buffers += (at, frame_bytes)
            at += len(padded)
            continue
        # Columns of one entity share their list offsets: a buffer equal to one before it
        # (compared in full when its length and ends match) has the same frame.
        glance = (size, data[:_GLANCE_BYTES].tobytes(), data[-_GLANCE_BYTES:].tobytes())
        earlier = met.get(glance)
        if earlier is not None and plain.body.slice(earlier[0], size).equals(
                plain.body.slice(offset, size)):
            stored = earlier[1]
        else:
            stored = _prefixed(data)
            met.setdefault(glance, (offset, stored))
        pieces.append(stored)
        padding = -len(stored) % _ALIGNMENT
        if padding:
            pieces.append(_PADDING[:padding])
        buffers += (at, len(stored))
        at += len(stored) + padding
    metadata = _record_batch_metadata(length=length, nodes=nodes, count=count,
                                      buffers=struct.pack(f"<{2 * count}q", *buffers),
                                      body_bytes=at)
    head_padding = -(len(metadata) + 8) % _ALIGNMENT
    head = _CONTINUATION + struct.pack("<i", len(metadata) + head_padding) + metadata + \
        _PADDING[:head_padding]
    return pa.ipc.read_message(pa.py_buffer(b"".join([head, *pieces])))


def _zero_frame(size: int) -> tuple[bytes, int]:
    """The stored form of ``size`` zero bytes padded to the alignment, and its unpadded
    length, kept for the next batch."""
    if len(_ZERO_FRAMES) >= _MAX_KEPT_ZERO_FRAMES:
        _ZERO_FRAMES.clear()
    stored = _prefixed(memoryview(_ZEROS)[:size])
    kept = _ZERO_FRAMES[size] = (stored + _PADDING[:-len(stored) % _ALIGNMENT], len(stored))
    return kept


def _prefixed(data: memoryview) -> bytes:
    """A buffer as a compressed IPC body holds it: its length, then its zstd frame."""
    frame: bytes = _CODEC.compress(data, asbytes=True)
    return struct.pack("<q", len(data)) + frame


def _u32(data: bytes, at: int) -> int:
    value: int = struct.unpack_from("<I", data, at)[0]
    return value


def _field(data: bytes, table: int, field_id: int) -> int:
    """Where field ``field_id`` of the flatbuffer table at ``table`` lies (0: absent)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    slot = 4 + 2 * field_id
    if slot >= struct.unpack_from("<H", data, vtable)[0]:
        return 0
    offset: int = struct.unpack_from("<H", data, vtable + slot)[0]
    return table + offset if offset else 0


def _record_batch_parts(metadata: bytes) -> tuple[int, bytes, int, tuple[int, ...]] | None:
    """An uncompressed record batch message's row count, ``FieldNode`` vector bytes, buffer
    count and buffer extents (offset, length, ...), or None when it holds more than those."""
    message = _u32(metadata, 0)
    header = _field(metadata, message, _MESSAGE_HEADER)
    kind = _field(metadata, message, _MESSAGE_HEADER_TYPE)
    if not header or not kind or metadata[kind] != _HEADER_RECORD_BATCH \
            or _field(metadata, message, _MESSAGE_CUSTOM_METADATA):
        return None
    batch = header + _u32(metadata, header)
    if any(_field(metadata, batch, i) for i in (_BATCH_COMPRESSION, _BATCH_VARIADIC_COUNTS)):
        return None
    at = _field(metadata, batch, _BATCH_LENGTH)
    length: int = struct.unpack_from("<q", metadata, at)[0] if at else 0
    vectors = []
    for field_id in (_BATCH_NODES, _BATCH_BUFFERS):
        at = _field(metadata, batch, field_id)
        if not at:
            return None
        vector = at + _u32(metadata, at)
        vectors.append((vector + 4, _u32(metadata, vector)))
    (nodes_at, num_nodes), (buffers_at, count) = vectors
    nodes = metadata[nodes_at: nodes_at + num_nodes * _STRUCT_BYTES]
    extents = struct.unpack_from(f"<{2 * count}q", metadata, buffers_at)
    return length, nodes, count, extents


def _record_batch_metadata(*, length: int, nodes: bytes, count: int, buffers: bytes,
                           body_bytes: int) -> bytes:
    """The ``Message`` flatbuffer of a zstd-compressed record batch, in the order Arrow's
    ``MakeRecordBatch`` and ``CreateMessage`` build it."""
    fbb = _Builder()
    fb_nodes = fbb.struct_vector(nodes, len(nodes) // _STRUCT_BYTES)
    fb_buffers = fbb.struct_vector(buffers, count)
    compression = fbb.table([(_COMPRESSION_CODEC, "b", _CODEC_ZSTD)])  # method BUFFER: default
    # flatc's Create functions add the largest fields first, the last declared first among equals
    batch = fbb.table([(_BATCH_LENGTH, "q", length), (_BATCH_COMPRESSION, "offset", compression),
                       (_BATCH_BUFFERS, "offset", fb_buffers), (_BATCH_NODES, "offset", fb_nodes)])
    message = fbb.table([(_MESSAGE_BODY_LENGTH, "q", body_bytes),
                         (_MESSAGE_HEADER, "offset", batch),
                         (_MESSAGE_VERSION, "h", _METADATA_V5),
                         (_MESSAGE_HEADER_TYPE, "B", _HEADER_RECORD_BATCH)])
    return fbb.finish(message)


class _Builder:
    """The parts of flatbuffers' C++ ``FlatBufferBuilder`` the message needs, with its layout:
    written back to front (``_chunks`` in reverse order), each object's position its distance
    from the end."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._min_align = 1

    def _push(self, data: bytes) -> int:
        self._chunks.append(data)
        self._size += len(data)
        return self._size

    def _pre_align(self, length: int, alignment: int) -> None:
        """Pad so that ``length`` more bytes end aligned to ``alignment`` (``PreAlign``)."""
        if length == 0:
            return
        self._min_align = max(self._min_align, alignment)
        padding = -(self._size + length) % alignment
        if padding:
            self._push(bytes(padding))

    def _align(self, alignment: int) -> None:
        self._min_align = max(self._min_align, alignment)
        padding = -self._size % alignment
        if padding:
            self._push(bytes(padding))

    def _refer_to(self, position: int) -> bytes:
        self._align(4)
        return struct.pack("<I", self._size - position + 4)

    def struct_vector(self, data: bytes, count: int) -> int:
        """A vector of ``count`` 16-byte, 8-aligned structs (``CreateVectorOfStructs``)."""
        self._pre_align(len(data), 4)
        self._pre_align(len(data), 8)
        self._push(data)
        self._align(4)
        return self._push(struct.pack("<I", count))

    def table(self, fields: list[tuple[int, str, int]]) -> int:
        """A table of ``(field id, struct format or "offset", value)`` added in that order;
        a scalar of 0 (every default here) and a null offset are left out."""
        start = self._size
        where: list[tuple[int, int]] = []
        for field_id, kind, value in fields:
            if value == 0:
                continue
            if kind == "offset":
                data = self._refer_to(value)
            else:
                data = struct.pack("<" + kind, value)
                self._align(len(data))
            where.append((field_id, self._push(data)))
        self._align(4)
        at = self._size + 4
        slots = max((4 + 2 * field_id for field_id, _ in where), default=0) + 2
        vtable = [0] * (max(slots, 4) // 2)
        vtable[0], vtable[1] = len(vtable) * 2, at - start
        for field_id, position in where:
            vtable[2 + field_id] = at - position
        # The builder would share an equal vtable written before: the three tables here never
        # have equal ones (their fields differ in size), so each is written before its table.
        self._push(struct.pack("<i", 2 * len(vtable)))
        self._push(struct.pack(f"<{len(vtable)}H", *vtable))
        return at

    def finish(self, root: int) -> bytes:
        self._pre_align(4, self._min_align)
        self._push(self._refer_to(root))
        return b"".join(reversed(self._chunks))
