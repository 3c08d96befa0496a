"""The recording's Arrow IPC file: each record batch stored zstd-compressed or as-is, its own choice.

Arrow IPC records the buffer compression in every record batch message, so one file may hold
compressed and uncompressed batches and any Arrow reader reads both. pyarrow's file writer applies
one compression to all batches, so the file is laid out here from pyarrow's own parts, in order:

1. the file magic, the schema message and the footer, taken from a file pyarrow writes with the
   same schema and no batch (the footer is a flatbuffer whose ``recordBatches`` vector of
   fixed-size ``Block`` structs is the only part that changes: it is grown here to one ``Block``
   per batch, see :func:`_grown_footer`; writing one empty batch per real batch through pyarrow
   cost more than a small recording's other writing);
2. each batch message as pyarrow's stream writer encodes it, with zstd or without compression
   (a compressed one laid out by :mod:`rayform.recording._compressed_message`, byte for byte the
   same, when it can: most buffers of a wide batch are the zeros of columns of nulls, which
   pyarrow compresses afresh each time);
3. the footer with each ``Block`` (offset, metadata length, body length) set to where the batch
   was written.

A recording's batch is one entity's rows. Batches holding encoded media (JPEG blobs, video
packets) are stored as-is: compressing them gains nothing and costs CPU on every read, and an
uncompressed batch is read in place from the memory-mapped file. Every other batch is compressed
with zstd (smaller than lz4 on robot data by about a third, see docs/catalog.md) unless that
saves less than a tenth of its bytes, or the batch holds less than :data:`MIN_COMPRESSED_BYTES`
(its null columns included): Arrow compresses each buffer apart, at a fixed cost of ~15 µs a
buffer (a zstd context each; the all-zero buffers of null columns are compressed once per
length), and a batch carries three buffers per column of the wide schema, so compressing a few
kilobytes cost milliseconds to save bytes that the file's own framing outweighs. A large batch
is first tried on a sample of its largest buffer (noise-like pixels do not compress, and
compressing them in full cost more than writing them). Compression of one batch runs on one
thread (``use_threads=False``): Arrow's pool took longer to hand the buffers out than to
compress them; a recording's batches are encoded on two threads when they hold enough to
compress (:func:`encode_batches`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa

from rayform.recording._columns import ENCODED_IMAGE_BLOB, VIDEO_SAMPLE
from rayform.recording._compressed_message import compressed_message

COMPRESSION: Final = "zstd"
# Components whose values are already encoded (compressed) media: their batches stay as-is.
ENCODED_MEDIA_COMPONENTS: Final = frozenset({ENCODED_IMAGE_BLOB, VIDEO_SAMPLE})
_MIN_SAVINGS: Final = 0.1
MIN_COMPRESSED_BYTES: Final = 4 * 1024
"""Batches of fewer bytes (null columns included) are stored uncompressed."""
_COMPRESSED: Final = pa.ipc.IpcWriteOptions(compression=COMPRESSION, use_threads=False)
_CODEC: Final = pa.Codec(COMPRESSION)
_SAMPLED_BYTES: Final = 256 * 1024
_WRITE_BUFFER_BYTES: Final = 1 << 20
_MAGIC: Final = b"ARROW1\x00\x00"
_TRAILER_MAGIC: Final = b"ARROW1"
_END_OF_STREAM: Final = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_BLOCK: Final = struct.Struct("<qi4xq")  # Block: offset, metaDataLength, (padding), bodyLength
_FOOTER_VERSION: Final = 0  # field index of Footer.version (a short, not an offset) in File.fbs
_FOOTER_RECORD_BATCHES: Final = 3  # field index of Footer.recordBatches in File.fbs


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One record batch as the IPC message stored in the file."""

    message: pa.Message
    is_compressed: bool



def has_encoded_media(components: Mapping[str, pa.Array]) -> bool:
    """True when a batch's component columns (by column name) hold values of an encoded-media
    component (non-null rows)."""
    for name, values in components.items():
        if name.split(":", 1)[-1] in ENCODED_MEDIA_COMPONENTS and values.null_count < len(values):
            return True
    return False


def encode_batch(batch: pa.RecordBatch, *, compress: bool, nbytes: int | None = None
                 ) -> EncodedBatch:
    """The IPC message of ``batch``: zstd-compressed when asked and worth it, else as-is.

    ``nbytes``: ``batch.nbytes`` when the caller knows it (the sum of its columns' ``nbytes``,
    which :class:`RecordingWriter` keeps for the columns of nulls it reuses): walking every
    buffer of a wide batch to find it took longer than the rest of an uncompressed batch's
    encoding.
    """
    plain = pa.ipc.read_message(batch.serialize())
    if compress:
        if nbytes is None:
            nbytes = batch.nbytes  # not free on a wide batch: it walks every buffer
        if nbytes >= MIN_COMPRESSED_BYTES and _sample_compresses(batch, nbytes=nbytes):
            message = compressed_message(plain)
            if message is None:
                message = _message(batch, _COMPRESSED)
            if message.body.size <= (1 - _MIN_SAVINGS) * nbytes:
                return EncodedBatch(message, is_compressed=True)
    return EncodedBatch(plain, is_compressed=False)


ENCODE_THREADS: Final = 2
_PARALLEL_BYTES: Final = 1 << 20
_PARALLEL_BATCH_BYTES: Final = 512 * 1024
"""Threads encode a recording's batches only where they hold this much to compress each, on
average: laying a batch's message out holds the GIL for each of its buffers (a wide batch has
hundreds, most of them the zeros of columns of nulls), and where a batch's zstd work is not
large next to that the two threads took more CPU and more time than one (ULog's 19 batches of
~0.2 MB, 166 columns: 40 ms CPU and wall on two threads, 25 ms on one)."""


def encode_batches(batches: Sequence[pa.RecordBatch], compress: Sequence[bool],
                   nbytes: Sequence[int | None] | None = None, *,
                   logged_bytes: Sequence[int] | None = None) -> list[EncodedBatch]:
    """:func:`encode_batch` of each batch (``compress[i]``: whether batch ``i`` may be
    compressed; ``nbytes[i]``: its ``nbytes`` when known), in order. Several batches with a
    megabyte or more to compress, :data:`_PARALLEL_BATCH_BYTES` each on average, are encoded on
    :data:`ENCODE_THREADS` threads: zstd runs without the GIL, and each batch's message is the
    same whichever thread encodes it. ``logged_bytes[i]``: what batch ``i`` holds besides its
    columns of nulls (whose zero buffers :mod:`rayform.recording._compressed_message`
    compresses once per length), when the caller knows it; else its whole buffer size."""
    sizes: list[int | None] = [None] * len(batches) if nbytes is None else list(nbytes)
    work = []  # what each batch that may be compressed holds to compress
    for i, (batch, may) in enumerate(zip(batches, compress, strict=True)):
        if may and (total := batch.get_total_buffer_size()) >= MIN_COMPRESSED_BYTES:
            work.append(total if logged_bytes is None else logged_bytes[i])
    if len(work) < 2 or sum(work) < max(_PARALLEL_BYTES, _PARALLEL_BATCH_BYTES * len(work)):
        return [encode_batch(b, compress=c, nbytes=n)
                for b, c, n in zip(batches, compress, sizes, strict=True)]
    with ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="rayform-encode") as pool:
        return list(pool.map(lambda b, c, n: encode_batch(b, compress=c, nbytes=n),
                             batches, compress, sizes))


def _sample_compresses(batch: pa.RecordBatch, *, nbytes: int) -> bool:
    """Whether a sample of the batch's largest buffer saves a tenth with zstd (always true for a
    batch below :data:`_SAMPLED_BYTES`): raw camera noise or already-compressed bytes held as
    numbers would otherwise be compressed in full only to be stored as they were."""
    if nbytes < 4 * _SAMPLED_BYTES:
        return True
    largest = max((b for column in batch.columns for b in column.buffers() if b is not None),
                  key=lambda b: b.size)
    if largest.size < 2 * _SAMPLED_BYTES:
        return True
    sample = largest.slice((largest.size - _SAMPLED_BYTES) // 2, _SAMPLED_BYTES)
    packed: pa.Buffer = _CODEC.compress(sample)
    return bool(packed.size <= (1 - _MIN_SAVINGS) * _SAMPLED_BYTES)


def _message(batch: pa.RecordBatch, options: pa.ipc.IpcWriteOptions) -> pa.Message:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    reader = pa.ipc.MessageReader.open_stream(sink.getvalue())
    reader.read_next_message()  # the schema
    return reader.read_next_message()


@dataclass(frozen=True, slots=True)
class FileLayout:
    """Where the parts of a written IPC file lie: its head (magic and schema message) is
    ``[0, head_bytes)``, its batches' ``Block`` entries ``blocks``, its footer from
    ``footer_at`` (then its length and the trailing magic)."""

    head_bytes: int
    blocks: tuple[tuple[int, int, int], ...]
    footer_at: int


def _parts(schema: pa.Schema, count: int) -> tuple[bytes, bytearray, int]:
    """The head and the footer (its ``Block`` entries at ``vector_at`` still to fill) of an IPC
    file of ``schema`` holding ``count`` batches."""
    template = _template(schema)
    trailer = len(_TRAILER_MAGIC) + 4
    (footer_size,) = struct.unpack_from("<i", template, len(template) - trailer)
    footer_start = len(template) - trailer - footer_size
    empty = template[footer_start: len(template) - trailer]
    head = template[: footer_start - len(_END_OF_STREAM)]
    footer, vector_at = _grown_footer(empty, count=count)
    return head, footer, vector_at


def _grown_footer(footer: bytes, *, count: int) -> tuple[bytearray, int]:
    """The footer flatbuffer of a file of no batch grown to ``count`` (zeroed) ``Block`` entries,
    and where they start: the bytes pyarrow's flatbuffers builder lays out for ``count`` batches.

    The builder writes back to front: the schema, the (empty) dictionaries vector, the record
    batches vector, the ``Footer`` table and its vtable, then pads the front so that the whole
    is a multiple of its largest alignment and puts the root offset first. Everything built
    before the record batches vector keeps its distance from the end; the vector's ``count``
    blocks of 24 bytes, aligned to 8 (an empty vector is not aligned), come before it; the table
    and vtable keep their bytes (no alignment above 4 in them) but for the table's offsets to
    what lies past the blocks, and the front padding is made again for an alignment of 8.
    """
    vector_at = _record_batch_vector(footer, count=0)  # just past the vector's length
    if count == 0:
        return bytearray(footer), vector_at
    table, fields = _footer_fields(footer)
    (vtable_back,) = struct.unpack_from("<i", footer, table)
    vtable = table - vtable_back
    if not 4 <= vtable < table < vector_at or any(footer[4:vtable]):
        raise RuntimeError("pyarrow's Arrow footer is not laid out as expected")
    tail = len(footer) - vector_at  # the dictionaries vector and the schema
    inserted = count * _BLOCK.size + (-tail) % 8
    body = len(footer) - vtable + inserted  # without the root offset and the front padding
    front = (-(body + 4)) % 8
    moved = front - (vtable - 4)  # how far the table and what is before the blocks move
    grown = bytearray(struct.pack("<I", table + moved))
    grown += bytes(front)
    grown += footer[vtable:vector_at - 4]
    grown += struct.pack("<I", count)
    grown += bytes(inserted)
    grown += footer[vector_at:]
    for index, at in fields:
        if index == _FOOTER_VERSION:
            continue
        (offset,) = struct.unpack_from("<I", footer, at)
        if at + offset >= vector_at:  # the schema and dictionaries, past the blocks
            struct.pack_into("<I", grown, at + moved, offset + inserted)
    return grown, vector_at + moved


def _footer_fields(footer: bytes | bytearray) -> tuple[int, list[tuple[int, int]]]:
    """Where the ``Footer`` table starts, and each field it holds: (field index, position)."""
    (table,) = struct.unpack_from("<I", footer, 0)
    (vtable_back,) = struct.unpack_from("<i", footer, table)
    vtable = table - vtable_back
    (vtable_size,) = struct.unpack_from("<H", footer, vtable)
    fields = []
    for index in range((vtable_size - 4) // 2):
        (field,) = struct.unpack_from("<H", footer, vtable + 4 + 2 * index)
        if field:
            fields.append((index, table + field))
    return table, fields


def _footer_tail(footer: bytearray, vector_at: int,
                 blocks: Sequence[tuple[int, int, int]]) -> bytes:
    for i, block in enumerate(blocks):
        _BLOCK.pack_into(footer, vector_at + i * _BLOCK.size, *block)
    return bytes(footer) + struct.pack("<i", len(footer)) + _TRAILER_MAGIC


def write_ipc_file(sink: pa.NativeFile, schema: pa.Schema,
                   batches: Sequence[EncodedBatch]) -> FileLayout:
    """Write an Arrow IPC file of ``schema`` holding ``batches`` in order."""
    head, footer, vector_at = _parts(schema, len(batches))
    sink.write(head)
    blocks = []
    for batch in batches:
        start = sink.tell()
        batch.message.serialize_to(sink)  # no copy of the body
        body = batch.message.body.size
        blocks.append((start, sink.tell() - start - body, body))
    sink.write(_END_OF_STREAM)
    footer_at = sink.tell()
    sink.write(_footer_tail(footer, vector_at, blocks))
    return FileLayout(head_bytes=len(head), blocks=tuple(blocks), footer_at=footer_at)


def rewrite_schema(path: Path, schema: pa.Schema, layout: FileLayout) -> None:
    """Put ``schema`` in place of the schema of the file at ``path`` written with ``layout``
    (in its head and its footer), its serialised length being the same; the batches stay.

    Raises:
        RuntimeError: ``schema`` serialises to another length (a caller bug).
    """
    head, footer, vector_at = _parts(schema, len(layout.blocks))
    tail = _footer_tail(footer, vector_at, layout.blocks)
    with path.open("r+b") as fh:
        size = os.fstat(fh.fileno()).st_size
        if len(head) != layout.head_bytes or layout.footer_at + len(tail) != size:
            raise RuntimeError(f"{path}: the new schema does not take the place of the old one "
                               f"(head {len(head)} vs {layout.head_bytes} bytes)")
        for data, at in ((head, 0), (tail, layout.footer_at)):
            view = memoryview(data)
            while view:
                written = os.pwrite(fh.fileno(), view, at)
                view, at = view[written:], at + written


def _template(schema: pa.Schema) -> bytes:
    """A file pyarrow writes for ``schema`` with no batch (its head and footer)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema):
        pass
    data: bytes = sink.getvalue().to_pybytes()
    if not data.startswith(_MAGIC):
        raise RuntimeError("pyarrow wrote an Arrow file without the file magic")
    return data


def _record_batch_vector(footer: bytes | bytearray, *, count: int) -> int:
    """Where the ``Block`` structs of ``Footer.recordBatches`` start in the footer flatbuffer."""
    _, fields = _footer_fields(footer)
    at = dict(fields).get(_FOOTER_RECORD_BATCHES)
    if at is None:
        raise RuntimeError("pyarrow's Arrow footer has no record batch vector")
    vector = at + struct.unpack_from("<I", footer, at)[0]
    (length,) = struct.unpack_from("<I", footer, vector)
    if length != count:
        raise RuntimeError(f"pyarrow's Arrow footer lists {length} batches, expected {count}")
    return int(vector) + 4


def write_recording_file(path: Path, schema: pa.Schema, batches: Sequence[EncodedBatch]
                         ) -> FileLayout:
    """Write the IPC file at ``path`` (the caller makes it atomic).

    Through a buffer of :data:`_WRITE_BUFFER_BYTES`: each batch is three writes (its length,
    metadata and body), and a small recording's dozens of write calls cost more than its bytes;
    a body larger than the buffer is written through as it is.
    """
    with pa.OSFile(str(path), "wb") as raw, \
            pa.BufferedOutputStream(raw, buffer_size=_WRITE_BUFFER_BYTES) as sink:
        return write_ipc_file(sink, schema, batches)


def has_dictionary(types: Iterable[pa.DataType]) -> bool:
    """Whether any of ``types`` (a schema's columns' types: each distinct one is enough) holds a
    dictionary-encoded type, at any depth.

    A dictionary column's values travel in dictionary batches that the hand-laid file above does
    not write; such recordings are written whole by pyarrow's file writer, uncompressed
    (:func:`write_plain_file`).
    """
    def nested(t: pa.DataType) -> bool:
        return pa.types.is_dictionary(t) or any(nested(t.field(i).type)
                                                for i in range(t.num_fields))
    return any(nested(t) for t in types)


def write_plain_file(sink: pa.NativeFile, schema: pa.Schema,
                     batches: Sequence[pa.RecordBatch]) -> None:
    """An Arrow IPC file of ``batches`` as pyarrow writes it (dictionaries unified)."""
    options = pa.ipc.IpcWriteOptions(unify_dictionaries=True)
    with pa.ipc.new_file(sink, schema, options=options) as writer:
        for batch in batches:
            writer.write_batch(batch.replace_schema_metadata(schema.metadata))
