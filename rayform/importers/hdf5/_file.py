"""HDF5 files opened and read with every h5py / HDF5 failure reported as a rayform FormatError."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform._optional import require
from rayform.errors import CorruptRecordingError, RayformError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# The superblock sits at 0 or after a user block of 512 · 2^k bytes; look at the usual ones.
_SIGNATURE_OFFSETS = (0, 512, 1024, 2048, 4096)
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
# What h5py raises on damaged files: OSError (HDF5's own errors), KeyError (a link to nothing),
# ValueError / TypeError (a datatype or shape it cannot map), RuntimeError, IndexError, and
# UnicodeDecodeError for a damaged attribute string.
_READ_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError, IndexError,
                UnicodeDecodeError, OverflowError, MemoryError)


def is_hdf5_file(path: Path) -> bool:
    """True if ``path`` starts with the HDF5 signature (at 0 or after a user block)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_SIGNATURE_OFFSETS[-1] + len(HDF5_SIGNATURE))
    except OSError:
        return False
    return any(head[at:at + len(HDF5_SIGNATURE)] == HDF5_SIGNATURE for at in _SIGNATURE_OFFSETS)


def h5py_module() -> Any:
    """The ``h5py`` module, or an ``ImportError`` naming ``rayform[hdf5]``."""
    return require("h5py", extra="hdf5", feature="Reading HDF5 files")


@contextmanager
def reading(path: Path, what: str) -> Iterator[None]:
    """Translate what h5py raises while doing ``what`` into :class:`CorruptRecordingError`."""
    try:
        yield
    except RayformError:
        raise
    except _READ_ERRORS as err:
        raise CorruptRecordingError(
            f"{path}: {what}: the HDF5 file cannot be read (truncated or damaged?): "
            f"{type(err).__name__}: {err}") from err


@contextmanager
def open_hdf5(path: Path) -> Iterator[Any]:
    """``h5py.File(path, "r")``, its damage reported as :class:`CorruptRecordingError`."""
    h5py = h5py_module()
    with reading(path, "opening the file"):
        file = h5py.File(path, "r")
    try:
        yield file
    finally:
        with reading(path, "closing the file"):
            file.close()


def read_dataset(path: Path, dataset: Any) -> npt.NDArray[Any]:
    """All of one dataset's values (as h5py returns them)."""
    with reading(path, f"dataset {dataset.name!r}"):
        return np.asarray(dataset[()])


def read_rows(path: Path, dataset: Any, start: int, stop: int) -> npt.NDArray[Any]:
    """Rows ``start:stop`` of a dataset (along its first axis)."""
    with reading(path, f"dataset {dataset.name!r} rows {start}:{stop}"):
        return np.asarray(dataset[start:stop])


def attribute_text(path: Path, node: Any, name: str) -> str | None:
    """A string attribute of a group or dataset (``bytes`` decoded as UTF-8), or None if absent."""
    with reading(path, f"attribute {name!r} of {node.name!r}"):
        if name not in node.attrs:
            return None
        value = node.attrs[name]
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, bytes | np.bytes_):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorruptRecordingError(
                f"{path}: attribute {name!r} of {node.name!r} is not UTF-8 text") from err
    if isinstance(value, str):
        return value
    return None


def attributes(path: Path, node: Any) -> dict[str, Any]:
    """Every attribute of a group or dataset, as h5py returns them."""
    with reading(path, f"attributes of {node.name!r}"):
        return {str(k): node.attrs[k] for k in node.attrs}
