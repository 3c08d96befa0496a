"""Local write failures named for what they are: a full disk or quota names the folder it hit.

A bare ``OSError: [Errno 28] No space left on device`` says neither which folder filled up nor
what to do; :func:`naming_full_disk` turns it (and ``EDQUOT``, a quota) into
:class:`~rayform.errors.DiskFullError` naming the folder and the fix. Other errors pass unchanged.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from rayform.errors import DiskFullError, LocalStorageError

DISK_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXTS: Final = tuple(os.strerror(code) for code in sorted(DISK_FULL_ERRNOS))


def is_disk_full(err: BaseException) -> bool:
    """True for an ``OSError`` saying the filesystem or a quota is full (also from pyarrow,
    whose I/O errors may carry only the message)."""
    if not isinstance(err, OSError):
        return False
    return err.errno in DISK_FULL_ERRNOS or any(text in str(err) for text in _DISK_FULL_TEXTS)


def disk_full_error(err: OSError, folder: Path, *, what: str) -> DiskFullError:
    reason = "its quota is used up" if err.errno == errno.EDQUOT else "no space is left"
    return DiskFullError(
        err.errno if err.errno is not None else errno.ENOSPC,
        f"{what}: {reason} on the filesystem of {folder} ({err}); free space there or raise the "
        "quota, or move that folder to a larger disk (RAYFORM_CACHE_DIR for the cache)",
    )


@contextmanager
def naming_full_disk(folder: Path, *, what: str) -> Iterator[None]:
    """Inside the block, a full disk or quota raises :class:`DiskFullError` naming ``folder``.

    Raises:
        DiskFullError: the block hit ``ENOSPC`` / ``EDQUOT``.
    """
    try:
        yield
    except LocalStorageError:
        raise
    except OSError as err:
        if is_disk_full(err):
            raise disk_full_error(err, folder, what=what) from err
        raise
