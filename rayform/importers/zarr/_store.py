"""Zarr replay-buffer stores (v2 and v3; a folder or a ``.zip``): finding, opening, reading rows.

The layout is Diffusion Policy's ``ReplayBuffer`` (also UMI's): ``data/<name>`` arrays whose
first axis is the step, concatenated over episodes, and ``meta/episode_ends`` the cumulative
exclusive end of each episode.
"""

from __future__ import annotations

import math
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


WINDOW_BYTES: Final = 4 << 20
"""An array whose chunk holds fewer bytes is read this many bytes at a time (whole chunks): a
zarr read costs about a millisecond however little it reads, and a replay buffer's
low-dimensional arrays hold a few bytes a step."""


class RowReader:
    """Rows ``[start, stop)`` of one array, read in whole chunks along the step axis.

    Episodes are read in order, so each chunk is decompressed once, by zarr straight into one
    of two buffers of this reader's own, grown when an episode needs more (a fresh array per
    read paid its page faults again, as much as the copy filling it). A read goes to the buffer
    that does not hold the rows last returned, after the rows of those not yet taken (the rest
    of the last chunk, copied once): every episode is one contiguous view, and the rows a
    :meth:`take` returns stay as they are until the second read after it (an episode is read
    while the one before it is written). Each buffer holds at most an episode and two chunks,
    or :data:`WINDOW_BYTES` and a chunk: chunks of fewer bytes are read that many at a time.
    """

    def __init__(self, array: Any, *, name: str, path: Path) -> None:
        self._array = array
        self._name = name
        self._path = path
        self._rows = int(array.shape[0])
        chunk = int(array.chunks[0]) or 1
        self._dtype = np.dtype(array.dtype)
        self._row_shape = tuple(int(n) for n in array.shape[1:])
        row_bytes = max(1, self._dtype.itemsize * math.prod(self._row_shape))
        self._chunk = chunk
        self._window = max(1, WINDOW_BYTES // (chunk * row_bytes)) * chunk
        self._buffers: list[npt.NDArray[Any] | None] = [None, None]
        self._current = 0  # the buffer holding rows [self._start, self._end)
        self._start = 0
        self._end = 0

    def take(self, start: int, stop: int, *, ahead: int | None = None) -> npt.NDArray[Any]:
        """Rows ``[start, stop)``, a view valid until the second read after this call.

        ``ahead``: the rows up to it are the next to be taken, in order (read them with these
        when their chunks are small, none past it); default ``stop``.
        """
        if not self._start <= start <= stop <= self._end or self._buffers[self._current] is None:
            self._refill(start, stop, max(stop, stop if ahead is None else ahead))
        buffer = self._buffers[self._current]
        assert buffer is not None
        return buffer[start - self._start:stop - self._start]

    def _refill(self, start: int, stop: int, ahead: int) -> None:
        """Fill the other buffer with rows ``[start, hi)``: those of ``[start, self._end)`` held
        now, then whole chunks read up to at least ``stop`` (and to ``ahead`` within the
        window)."""
        kept = self._buffers[self._current]
        if kept is not None and self._start <= start < self._end:
            lo, first = start, self._end
        else:
            lo = first = start // self._chunk * self._chunk
        want = max(stop, min(ahead, first + self._window))
        hi = min(self._rows, -(-want // self._chunk) * self._chunk)
        other = 1 - self._current
        buffer = self._buffers[other]
        if buffer is None or len(buffer) < hi - lo:
            self._buffers[other] = None  # freed before its successor is allocated
            buffer = np.empty((hi - lo, *self._row_shape), dtype=self._dtype)
            self._buffers[other] = buffer
        if first > lo:
            assert kept is not None
            buffer[:first - lo] = kept[lo - self._start:first - self._start]
        self._read(first, hi, buffer[first - lo:hi - lo])
        self._current, self._start, self._end = other, lo, hi

    def _read(self, lo: int, hi: int, out: npt.NDArray[Any]) -> None:
        """Rows ``[lo, hi)`` (whole chunks) into ``out``.

        Raises:
            CorruptRecordingError: a chunk cannot be read; the message names its rows.
        """
        try:
            self._fill(lo, hi, out)
        except READ_ERRORS as err:
            bad, error = lo, err
            for bad in range(lo, hi, self._chunk):  # which chunk: read them one by one
                end = min(bad + self._chunk, hi)
                try:
                    self._fill(bad, end, out[bad - lo:end - lo])
                except READ_ERRORS as chunk_err:
                    error = chunk_err
                    break
            end = min(bad + self._chunk, hi)
            raise CorruptRecordingError(
                f"{self._path}: data/{self._name} rows {bad}..{end} cannot be read ({error!r}); "
                "a chunk is truncated or damaged") from err

    def _fill(self, lo: int, hi: int, out: npt.NDArray[Any]) -> None:
        if lo == hi:
            return
        if self._dtype.kind in _FIXED_KINDS:
            self._array.get_basic_selection(slice(lo, hi), out=_nd_buffer(out))
        else:  # variable-length values: zarr fills no buffer of ours
            out[...] = np.asarray(self._array[lo:hi])


_FIXED_KINDS: Final = frozenset("biufcmMV")


def _nd_buffer(values: npt.NDArray[Any]) -> Any:
    """``values`` as the output buffer zarr's reads fill in place (no copy)."""
    from zarr.buffer.cpu import NDBuffer

    return NDBuffer.from_numpy_array(values)
