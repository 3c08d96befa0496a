"""Opt-in glibc tuning for ``default_collate`` users: batch-sized buffers from the heap, not mmap.

The loader reuses its own frame and batch buffers (``rayform.decoders._buffer_pool``, and
``PooledBatchCollator`` for batches), so it needs no process-wide change. torch's
``default_collate`` allocates a fresh multi-MB batch every step; above glibc's default mmap
threshold each one maps new pages and faults them in. ``RAYFORM_TUNE_MALLOC=1`` raises glibc's mmap
and trim thresholds when a dataset is built, so freed batches are reused instead (it changes the
allocator for the whole process, which is why it is off by default).
"""

from __future__ import annotations

import ctypes
import os
import sys

TUNE_ENV = "RAYFORM_TUNE_MALLOC"
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's maximum on 64-bit
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_tuned_pid = -1


def tune_allocator_if_asked() -> bool:
    """With ``RAYFORM_TUNE_MALLOC=1``, raise glibc's thresholds once per process; True when set."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return True
    if os.environ.get(TUNE_ENV, "0") != "1" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl, …): nothing to tune
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        return False
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    _tuned_pid = os.getpid()
    return True
