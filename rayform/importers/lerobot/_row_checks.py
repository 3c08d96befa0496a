"""Checks of one LeRobot episode's rows that would otherwise register wrong data silently.

Each names the data file and the column: a ``frame_index`` given twice, ``timestamp`` values
that are not finite or go backwards as frames advance, a ``task_index`` that ``meta/tasks``
does not list.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from rayform.errors import FormatError
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


__all__ = ["check_episode_rows"]
