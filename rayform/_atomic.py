"""Atomic and durable file writes: fill a temporary file, then rename it over the destination.

Readers see no file, the old file or the whole new one — never a partial write — and a writer
killed midway leaves only a temporary file (in a staging folder when one is given). With
``durable`` the file's bytes and the rename are fsynced, so a power loss after the call returns
keeps the new file (the building blocks :func:`fsync_file`, :func:`fsync_dir` and
:func:`make_dirs_durable` serve writers that link or rename by themselves).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or link inside ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush a closed file's bytes to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durable(folder: Path, *, root: Path) -> None:
    """Create ``folder`` and its missing parents below ``root``, each made durable in its parent
    (so a power loss cannot drop a folder that a later durable file lives in)."""
    missing: list[Path] = []
    current = folder
    while current != root and not current.is_dir():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue  # another writer made it: they make it durable too
        fsync_dir(path.parent)


def _short(name: str) -> str:
    """``name`` for a temporary's name: a long legal name (up to 255 bytes) leaves no room for
    the temporary's suffixes, so past 96 bytes it is cut and a digest of the whole appended."""
    if len(name.encode("utf-8", "surrogatepass")) <= 96:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:40]}~{digest}"


@contextmanager
def atomic_path(dest: Path, *, tmp_dir: Path | None = None, mode: int | None = None,
                durable: bool = False) -> Iterator[Path]:
    """A temporary path that replaces ``dest`` when the ``with`` block ends without an error.

    Args:
        dest: the file (or folder) to create or replace.
        tmp_dir: where the temporary lives (default: beside ``dest``); same filesystem as ``dest``.
        mode: permissions given to the result before it becomes visible (e.g. ``0o444``).
        durable: fsync the destination's folder after the rename (the caller fsyncs the content).

    The temporary is removed on error, whether the block made a file or a folder of it.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    base = tmp_dir if tmp_dir is not None else dest.parent
    tmp = base / f".{_short(dest.name)}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    replaced = False
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dest)
        replaced = True  # nothing left to remove: no stat and unlink of a name now gone
        if durable:
            fsync_dir(dest.parent)
    finally:
        if not replaced:
            _remove(tmp)


def _remove(tmp: Path) -> None:
    """Remove a temporary left by a failed :func:`atomic_path` block, file or folder."""
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        with suppress(FileNotFoundError):
            tmp.unlink()


def write_atomic(dest: Path, data: bytes, *, tmp_dir: Path | None = None, mode: int | None = None,
                 durable: bool = False) -> None:
    """Write ``data`` to ``dest`` atomically (see :func:`atomic_path`); ``durable`` fsyncs it."""
    with atomic_path(dest, tmp_dir=tmp_dir, mode=mode, durable=durable) as tmp, tmp.open("wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
