"""Recordings this process wrote: what registration may take from the writer instead of re-reading.

:class:`~rayform.recording.RecordingWriter` validates every batch in full and computes the
recording's checksum from the batches it holds in memory, then hashes the file it wrote in one
pass over its bytes: the sha256 of the whole file (the name the catalog's content-addressed store
gives it) and of each :data:`BLOCK_BYTES` block (the catalog's block-hash object, which remote
readers verify blocks against). Registering an importer's output read the whole file back to
learn the same: its checksum, its Arrow validity, its object digest, its block hashes, and its
schema (with its header) and timeline columns (for the segment's index). :func:`written_file`
returns all of that while the file is the one written: same device, inode, size, modification
and change time
(the change time no caller can set: any write or ``utime`` moves it). Registration relies on it
only for files an importer wrote into the registration's own staging folder (see
:func:`rayform.catalog._registration.inspect_layer`); any other recording is verified from its
bytes.

The layout (schema, timeline columns, block digests) of at most :data:`_LAYOUT_BYTES`
of recordings is kept, the oldest dropped first; a file whose layout was dropped is read back
and verified in full as any other.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa

from rayform.recording._file import HEADER_KEY

_MAX_REMEMBERED: Final = 65_536
_LAYOUT_BYTES: Final = 256 << 20

BLOCK_BYTES: Final = 128 << 10
"""The block size of :attr:`WrittenFile.block_digests`: the catalog's default block size (a
registration uses the writer's digests only when its block-hash objects use the same)."""

BLOCK_DIGESTS_FROM_BYTES = 32 << 20
"""The writer hashes the blocks of a file of this size or more only: the catalog's
``PartPlan.blocks_from_bytes`` default, below which registration stores no block-hash object
(a test checks that the two agree; a registration that wants one for a smaller file hashes its
blocks from the file)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WrittenFile:
    """A recording file as its writer left it.

    Attributes:
        identity: ``st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns`` of the file.
        sha256: of the whole file: its object name in a catalog.
        block_digests: the sha256 of each :data:`BLOCK_BYTES` block of the file, concatenated
            (32 bytes each, the last block shorter); None for a file below
            :data:`BLOCK_DIGESTS_FROM_BYTES`.
        schema: the file's Arrow schema (the header in its metadata, as the file holds it: kept
            as bytes, it costs a few kilobytes where the parsed header costs tens).
        timelines: the file's timeline columns, all its rows.
        layout_bytes: about what holding the layout costs (its digests and timeline columns).
    """

    identity: tuple[int, int, int, int, int]
    sha256: str
    block_digests: bytes | None
    schema: pa.Schema
    timelines: pa.Table
    layout_bytes: int


_WRITTEN: dict[str, WrittenFile] = {}
_held_bytes = 0
_LOCK = threading.Lock()  # writers may run on several threads


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def remember_written(path: Path, *, sha256: str, block_digests: bytes | None, schema: pa.Schema,
                     timelines: pa.Table) -> None:
    """Record that this process wrote ``path`` (already validated and checksummed) as it is now,
    with what it wrote into it."""
    global _held_bytes
    key = os.fspath(path.absolute())
    written = WrittenFile(identity=_identity(path.stat()), sha256=sha256,
                          block_digests=block_digests, schema=schema, timelines=timelines,
                          layout_bytes=len(block_digests or b"") + timelines.get_total_buffer_size()
                          + len((schema.metadata or {}).get(HEADER_KEY, b""))
                          + 128 * len(schema) + 1024)
    with _LOCK:
        _forget(key)
        while _WRITTEN and (len(_WRITTEN) >= _MAX_REMEMBERED
                            or _held_bytes + written.layout_bytes > _LAYOUT_BYTES):
            _forget(next(iter(_WRITTEN)))  # the oldest: registered already, or verified in full
        _WRITTEN[key] = written
        _held_bytes += written.layout_bytes


def _forget(key: str) -> None:
    global _held_bytes
    old = _WRITTEN.pop(key, None)
    if old is not None:
        _held_bytes -= old.layout_bytes


def written_file(path: Path) -> WrittenFile | None:
    """What the writer recorded for ``path``, or ``None`` when this process did not write it or
    the file changed since (another inode, size, modification or change time)."""
    known = _WRITTEN.get(os.fspath(path.absolute()))
    if known is None:
        return None
    try:
        current = _identity(path.stat())
    except OSError:
        return None
    return known if current == known.identity else None
