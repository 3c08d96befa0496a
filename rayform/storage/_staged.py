"""Objects written first as a local file: into a fresh staging folder, then stored by digest.

The one path by which the catalog turns bytes it builds itself (a segment index, a table's rows)
into an object: the writer (pyarrow, whose I/O errors carry only a message) runs inside
:func:`~rayform._local_writes.naming_full_disk`, so a full disk there is a
:class:`~rayform.errors.DiskFullError` naming the staging folder and the fix, and the staging
folder is removed whatever happens (nothing is committed before the object is stored).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from rayform._local_writes import naming_full_disk
from rayform.storage._store import Store


def store_staged(store: Store, name: str, write: Callable[[Path], None], *, what: str) -> str:
    """``write(path)`` a file named ``name`` in a staging folder, store it; returns its digest.

    Raises:
        DiskFullError: the staging folder's (or the catalog's) disk or quota is full.
    """
    staging = store.staging_dir()
    try:
        path = staging / name
        with naming_full_disk(staging, what=what):
            write(path)
        digest, _ = store.put_object(path)
        return digest
    finally:
        shutil.rmtree(staging, ignore_errors=True)
