"""Zarr replay-buffer stores (v2 and v3; a folder or a ``.zip``): finding, opening, reading rows.

The layout is Diffusion Policy's ``ReplayBuffer`` (also UMI's): ``data/<name>`` arrays whose
first axis is the step, concatenated over episodes, and ``meta/episode_ends`` the cumulative
exclusive end of each episode.
"""

from __future__ import annotations

import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rayform._optional import require
from rayform.errors import CorruptRecordingError, FormatError

EPISODE_ENDS: Final = "meta/episode_ends"
DATA: Final = "data"
_ZIP_MAGIC: Final = b"PK\x03\x04"
_GROUP_FILES: Final = (".zgroup", "zarr.json")
_ENDS_FILES: Final = (f"{EPISODE_ENDS}/.zarray", f"{EPISODE_ENDS}/zarr.json")
READ_ERRORS: Final = (ValueError, RuntimeError, OSError, KeyError, TypeError, EOFError,
                      zipfile.BadZipFile)
"""What zarr and its codecs raise on a damaged store (a truncated chunk, bad metadata)."""


def is_replay_buffer(path: Path) -> bool:
    """A folder or ``.zip`` holding a Zarr group with ``meta/episode_ends`` (no zarr needed)."""
    if path.is_dir():
        return any((path / f).is_file() for f in _GROUP_FILES) and any(
            (path / f).is_file() for f in _ENDS_FILES)
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            if fh.read(4) != _ZIP_MAGIC:
                return False
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except zipfile.BadZipFile:  # a damaged zip named as a Zarr one: say what is wrong with it
        return path.name.endswith(".zarr.zip")
    except OSError:
        return False
    return any(f in names for f in _ENDS_FILES)


@contextmanager
def open_replay_buffer(path: Path) -> Iterator[Any]:
    """The root group of the store at ``path`` (read-only), closed on exit.

    Raises:
        ImportError: zarr is not installed (``rayform[zarr]``).
        CorruptRecordingError: the store's metadata cannot be read.
    """
    if sys.version_info < (3, 11):
        raise ImportError("Reading Zarr stores needs zarr-python 3, which needs Python 3.11 or newer "
                          f"(this is Python {sys.version_info[0]}.{sys.version_info[1]})")
    zarr = require("zarr", extra="zarr", feature="Reading Zarr stores")
    store: Any = None
    if path.is_file():
        try:
            zipfile.ZipFile(path).close()
        except (zipfile.BadZipFile, OSError) as err:
            raise CorruptRecordingError(f"{path}: not a readable Zarr store: the zip is truncated "
                                        f"or damaged ({err})") from err
    try:
        if path.is_file():
            store = zarr.storage.ZipStore(path, mode="r")
            group = zarr.open_group(store=store, mode="r")
        else:
            group = zarr.open_group(store=str(path), mode="r")
    except READ_ERRORS as err:
        if store is not None:
            store.close()
        raise CorruptRecordingError(f"{path}: not a readable Zarr store ({err!r}); the store is "
                                    "damaged or incomplete") from err
    try:
        yield group
    finally:
        if store is not None:
            store.close()


def episode_ends(group: Any, path: Path, num_rows: int) -> npt.NDArray[np.int64]:
    """``meta/episode_ends`` validated: positive, non-decreasing, the last equal to ``num_rows``.

    Raises:
        FormatError: the array is missing or inconsistent with the data arrays.
    """
    try:
        ends = np.asarray(group[EPISODE_ENDS][:])
    except READ_ERRORS as err:
        raise CorruptRecordingError(f"{path}: {EPISODE_ENDS} cannot be read ({err!r})") from err
    if ends.ndim != 1 or ends.dtype.kind not in "iu" or len(ends) == 0:
        raise FormatError(f"{path}: {EPISODE_ENDS} must be a non-empty 1-D integer array, got "
                          f"shape {ends.shape} dtype {ends.dtype}")
    ends = ends.astype(np.int64)
    if ends[0] < 0 or np.any(np.diff(ends) < 0):
        raise FormatError(f"{path}: {EPISODE_ENDS} must be non-decreasing and non-negative "
                          f"(cumulative episode ends), got {ends[:8].tolist()}…")
    if ends[-1] != num_rows:
        raise FormatError(f"{path}: the last of {EPISODE_ENDS} is {int(ends[-1])} but the data "
                          f"arrays have {num_rows} rows; the store is incomplete")
    return ends


def data_arrays(group: Any, path: Path) -> dict[str, Any]:
    """The arrays of ``data/``, by name, all with the same number of rows.

    Raises:
        FormatError: no ``data`` group, or arrays of different lengths.
        CorruptRecordingError: chunks are missing (zarr would read them as the fill value).
    """
    if DATA not in group:
        raise FormatError(f"{path}: no '{DATA}' group; a replay buffer keeps its arrays in data/")
    arrays = dict(sorted(group[DATA].arrays()))
    if not arrays:
        raise FormatError(f"{path}: the '{DATA}' group holds no arrays")
    lengths = {name: int(a.shape[0]) if a.ndim else -1 for name, a in arrays.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise FormatError(f"{path}: the arrays of data/ must share their first axis (steps), got "
                          f"{lengths}")
    for name, array in arrays.items():
        if array.nchunks_initialized < array.nchunks:
            raise CorruptRecordingError(
                f"{path}: data/{name} has {array.nchunks_initialized} of its {array.nchunks} "
                "chunks; the missing ones would read as fill values (a partial copy?)")
    return arrays


class RowReader:
    """Rows ``[start, stop)`` of one array, read in whole chunks along the step axis.

    Episodes are read in order, so each chunk is decompressed once: the chunks last read are
    kept for the next episodes. An episode inside them is a view of them; one that runs past
    them is copied once into an array of its own rows (its kept rows, then those of the chunks
    read for it), and the new chunks are kept in their place: joining the kept and the new
    chunks whole copied about twice the episode's bytes, more than zarr took to decompress them.
    """

    def __init__(self, array: Any, *, name: str, path: Path) -> None:
        self._array = array
        self._name = name
        self._path = path
        self._chunk = int(array.chunks[0]) or 1
        self._rows = int(array.shape[0])
        self._buffer: npt.NDArray[Any] | None = None
        self._start = 0

    def take(self, start: int, stop: int) -> npt.NDArray[Any]:
        buffer = self._buffer
        end = self._start + (0 if buffer is None else len(buffer))
        if buffer is None or start < self._start or stop > end:
            if buffer is not None and self._start <= start < end:
                keep, lo = buffer[start - self._start:], end
            else:
                keep, lo = None, start // self._chunk * self._chunk
            hi = min(-(-stop // self._chunk) * self._chunk, self._rows)
            fresh = self._read(lo, hi)
            self._buffer, self._start = fresh, lo
            if keep is not None:
                rows = np.empty((stop - start, *fresh.shape[1:]), dtype=fresh.dtype)
                rows[:len(keep)] = keep
                rows[len(keep):] = fresh[:stop - lo]
                return rows
            buffer = fresh
        return buffer[start - self._start:stop - self._start]

    def _read(self, lo: int, hi: int) -> npt.NDArray[Any]:
        try:
            return np.asarray(self._array[lo:hi])
        except READ_ERRORS as err:
            raise CorruptRecordingError(
                f"{self._path}: data/{self._name} rows {lo}..{hi} cannot be read ({err!r}); a "
                "chunk is truncated or damaged") from err
