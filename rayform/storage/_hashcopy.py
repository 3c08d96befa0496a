"""Copy a file while computing the sha256 of the copy: the step that stores a data object.

The kernel copies (``os.copy_file_range``) in a helper thread while the calling thread hashes the
bytes that have landed in the destination, so the copy and the hash run on two cores at once and
the digest is always that of the bytes written (never of a source that changed meanwhile).
Where the kernel call is unavailable the file is read, hashed and written in one pass.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from pathlib import Path

CHUNK_BYTES = 8 << 20


def copy_hashed(src: Path, dest: Path) -> tuple[str, int]:
    """Copy ``src`` to a new file ``dest``; returns (sha256 hex of ``dest``, size in bytes)."""
    with src.open("rb") as fin, dest.open("wb") as fout:
        if hasattr(os, "copy_file_range"):
            try:
                first = os.copy_file_range(fin.fileno(), fout.fileno(), CHUNK_BYTES)
            except OSError:  # e.g. a filesystem or kernel without it: plain copy below
                first = -1
            if first >= 0:
                return _pipelined(fin.fileno(), fout.fileno(), dest, first)
        return _one_pass(fin.fileno(), fout.fileno())


def _one_pass(fd_in: int, fd_out: int) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    while chunk := os.read(fd_in, CHUNK_BYTES):
        h.update(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd_out, view):]
        size += len(chunk)
    return h.hexdigest(), size


def _pipelined(fd_in: int, fd_out: int, dest: Path, first: int) -> tuple[str, int]:
    copied: queue.SimpleQueue[int | BaseException | None] = queue.SimpleQueue()

    def copy() -> None:
        try:
            n = first
            while n:
                copied.put(n)
                n = os.copy_file_range(fd_in, fd_out, CHUNK_BYTES)
            copied.put(None)
        except BaseException as err:  # handed to the hashing thread, which re-raises it
            copied.put(err)

    thread = threading.Thread(target=copy, name="rayform-copy", daemon=True)
    thread.start()
    h = hashlib.sha256()
    size = 0
    buf = memoryview(bytearray(CHUNK_BYTES))
    try:
        with dest.open("rb", buffering=0) as check:
            while (item := copied.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                remaining = item
                while remaining:
                    got = check.readinto(buf[:remaining])
                    if not got:
                        raise OSError(f"{dest}: copy ended early while hashing it")
                    h.update(buf[:got])
                    remaining -= got
                    size += got
    finally:
        thread.join()
    return h.hexdigest(), size
