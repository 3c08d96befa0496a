"""Rayform on Ray: distributed ingest, statistics, export and sample streaming over a shared catalog.

Every Ray task opens the catalog itself (a directory on shared storage, ``s3://`` or ``https://``),
so only configuration travels. Install with ``pip install 'rayform[ray]'``; importing this package
does not import Ray, each function does when called. Connect first with :func:`connect` (or
``ray.init``); without a connection Ray starts a local cluster.
"""

from __future__ import annotations

from rayform.ray._cluster import TaskOptions, connect
from rayform.ray._export import export_lerobot
from rayform.ray._ingest import register_many
from rayform.ray._samples import read_samples
from rayform.ray._segments import read_segments
from rayform.ray._statistics import compute_statistics

__all__ = [
    "TaskOptions",
    "compute_statistics",
    "connect",
    "export_lerobot",
    "read_samples",
    "read_segments",
    "register_many",
]
