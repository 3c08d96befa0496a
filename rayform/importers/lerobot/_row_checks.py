"""Checks of one LeRobot episode's rows that would otherwise register wrong data silently.

Each names the data file and the column: a ``frame_index`` given twice, ``timestamp`` values
that are not finite or go backwards as frames advance, a ``task_index`` that ``meta/tasks``
does not list. A numeric feature whose rows hold another number of values than declared is
kept, with a warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa

from rayform.errors import ConversionWarning, FormatError
from rayform.importers.lerobot._layout import FRAME_INDEX, TASK_INDEX, TIMESTAMP


def check_episode_rows(table: pa.Table, *, data_path: Path, episode: int,
                       tasks: dict[int, str]) -> None:
    """Refuse rows (sorted by ``frame_index``) whose bookkeeping columns contradict themselves.

    Raises:
        FormatError: naming ``data_path``, the episode, the column and the first bad value.
    """
    where = f"{data_path}: episode {episode}"
    frames = table.column(FRAME_INDEX).to_numpy(zero_copy_only=False)
    repeated = frames[1:][np.diff(frames) == 0]
    if len(repeated):
        raise FormatError(f"{where}: {FRAME_INDEX!r} {int(repeated[0])} appears more than once; "
                          "each frame needs its own index")
    seconds = np.asarray(table.column(TIMESTAMP).to_numpy(zero_copy_only=False),
                         dtype=np.float64)
    if not np.isfinite(seconds).all():
        bad = int(np.flatnonzero(~np.isfinite(seconds))[0])
        raise FormatError(f"{where}: {TIMESTAMP!r} is {float(seconds[bad])!r} at frame "
                          f"{int(frames[bad])}; timestamps must be finite seconds")
    backwards = np.flatnonzero(np.diff(seconds) < 0)
    if len(backwards):
        at = int(backwards[0]) + 1
        raise FormatError(f"{where}: {TIMESTAMP!r} goes back from {float(seconds[at - 1])!r} to "
                          f"{float(seconds[at])!r} at frame {int(frames[at])}; timestamps must not "
                          "decrease as frame_index grows")
    if tasks and TASK_INDEX in table.column_names:
        ids = table.column(TASK_INDEX).to_numpy(zero_copy_only=False)
        unknown = sorted({int(i) for i in np.unique(ids)} - set(tasks))
        if unknown:
            raise FormatError(f"{where}: {TASK_INDEX!r} {unknown[0]} is not listed in meta/tasks "
                              f"(known: {sorted(tasks)[:10]}); fix the data file or meta/tasks")




def check_declared_shape(rows: pa.Array, *, key: str, shape: tuple[int, ...],
                         where: Path) -> None:
    """Warn when a numeric feature's rows hold another number of values than ``info.json``
    declares for it (the data is kept as it is: the file is what was recorded)."""
    import pyarrow.compute as pc

    size = int(np.prod(shape)) if shape else 1
    lengths = pc.list_value_length(rows).drop_null()
    if len(lengths) == 0:
        return
    low, high = pc.min(lengths).as_py(), pc.max(lengths).as_py()
    if low != size or high != size:
        found = low if low == high else f"{low} to {high}"
        warnings.warn(f"{where}: feature {key!r}: info.json declares shape {list(shape)} "
                      f"({size} values) but its rows hold {found}; the rows are kept as they are",
                      ConversionWarning, stacklevel=3)


__all__ = ["check_declared_shape", "check_episode_rows"]
