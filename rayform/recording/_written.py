"""Recordings this process wrote: what registration may take from the writer instead of re-reading.

:class:`~rayform.recording.RecordingWriter` validates every batch in full and computes the
recording's checksum from the batches it holds in memory, then hashes the file it wrote (the
name the catalog's content-addressed store gives it). Registering an importer's output read the
whole file back three times to learn the same: its checksum, its Arrow validity and its object
digest. :func:`written_file` returns that digest while the file is the one written: same device,
inode, size, modification and change time (the change time no caller can set: any write or
``utime`` moves it). Registration relies on it only for files an importer wrote
into the registration's own staging folder (see :func:`rayform.catalog._registration.inspect_layer`);
any other recording is verified from its bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_MAX_REMEMBERED: Final = 65_536


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A recording file as its writer left it."""

    identity: tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns
    sha256: str  # of the whole file: its object name in a catalog


_WRITTEN: dict[str, WrittenFile] = {}


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def remember_written(path: Path, *, sha256: str) -> None:
    """Record that this process wrote ``path`` (already validated and checksummed) as it is now."""
    if len(_WRITTEN) >= _MAX_REMEMBERED:
        _WRITTEN.clear()
    _WRITTEN[os.fspath(path.absolute())] = WrittenFile(identity=_identity(path.stat()),
                                                       sha256=sha256)


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

