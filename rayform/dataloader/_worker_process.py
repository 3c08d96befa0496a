"""Once per DataLoader worker process: the objects inherited from the parent leave the collector's view."""

from __future__ import annotations

import gc
import os

from torch.utils.data import get_worker_info

_settled_pid = -1


def settle_worker_process() -> bool:
    """In a DataLoader worker, freeze every object alive now (``gc.freeze``), once per process.

    A forked worker inherits the parent's whole heap: torch, the catalog, the dataset. Each full
    collection in the worker would walk all of it (tens of ms with torch loaded) and, by writing
    the collector's bookkeeping into the inherited pages, copy them (copy-on-write). Frozen, the
    inherited objects stay shared and collections walk only the worker's own objects. Workers
    start anew every epoch unless ``persistent_workers=True``, so this pays every epoch. A no-op in
    the main process. True when it froze.
    """
    global _settled_pid
    pid = os.getpid()
    if _settled_pid == pid or get_worker_info() is None:
        return False
    _settled_pid = pid
    gc.freeze()
    return True
