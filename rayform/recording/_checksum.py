"""The native recording's integrity checks: its checksum, and full validation of its Arrow data.

A recording file of format version 2 on carries ``content_sha256`` in its header: the sha256 of

1. the header's canonical JSON without that key,
2. the Arrow schema without metadata, serialised, and
3. every record batch (and dictionary batch) message, metadata and body as stored (compressed
   bodies compressed, from version 3 on), in file order,

each prefixed by its length. :class:`~rayform.recording.RecordingWriter` computes it from the
batches it writes; registration recomputes it from the bytes of the file, so a flipped bit in a
value, a list offset, a validity bitmap or the header is refused before anything is stored.
Version 1 files (no checksum) are still registered; like every file, they are validated in full
(``RecordBatch.validate(full=True)``: offsets in bounds, UTF-8 strings, …), so nothing that could
crash a later query is ever content-addressed into a catalog.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from rayform.errors import CorruptRecordingError
from rayform.recording._file import RecordingHeader

_LENGTH = struct.Struct("<Q")
_FILE_MAGIC_BYTES = 8  # "ARROW1" and two bytes of padding, then the IPC stream
_BATCH_TYPES = ("record batch", "dictionary batch")

Message = tuple[pa.Buffer, pa.Buffer]  # (flatbuffer metadata, body)


def content_digest(header: RecordingHeader, schema: pa.Schema, messages: Iterable[Message]) -> str:
    """The checksum of a recording made of ``header``, ``schema`` and batch ``messages``."""
    h = hashlib.sha256()

    def part(data: bytes | pa.Buffer) -> None:
        h.update(_LENGTH.pack(len(data) if isinstance(data, bytes) else data.size))
        h.update(data)

    part(header.canonical_bytes())
    part(schema.remove_metadata().serialize())
    for metadata, body in messages:
        part(metadata)
        part(body)
    return h.hexdigest()


def stored_messages(data: pa.Buffer) -> Iterator[Message]:
    """The batch messages stored in the bytes of an Arrow IPC file (zero-copy)."""
    reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(data.slice(_FILE_MAGIC_BYTES)))
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return
        if message.type in _BATCH_TYPES:
            yield message.metadata, message.body


def verify_recording(path: Path, header: RecordingHeader, table: pa.Table) -> None:
    """Check a recording's checksum (format version 2 on) and validate its Arrow data in full.

    Raises:
        CorruptRecordingError: the checksum does not match (a damaged file), or the data is
            not valid Arrow (offsets out of bounds, bad UTF-8, …), naming the file.
    """
    if header.content_sha256 is not None:
        try:
            with pa.memory_map(str(path), "r") as mm:
                data = mm.read_buffer()
                got = content_digest(header, table.schema, stored_messages(data))
        except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as err:
            raise CorruptRecordingError(
                f"{path}: recording batches cannot be read back for their checksum (damaged "
                f"file): {err}"
            ) from err
        if got != header.content_sha256:
            raise CorruptRecordingError(
                f"{path}: checksum mismatch (header says {header.content_sha256}, the file "
                f"hashes to {got}): the recording was damaged after it was written; write or "
                "export it again"
            )
    try:
        for batch in table.to_batches():
            batch.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        raise CorruptRecordingError(
            f"{path}: recording holds invalid Arrow data (damaged file): {err}"
        ) from err
