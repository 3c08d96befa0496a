"""Rayform: an embedded catalog of robot recordings with SQL, and PyTorch datasets over it.

``import rayform`` never imports torch; ``rayform.torch`` and ``rayform.dataloader`` do.
"""

from __future__ import annotations

from rayform import errors
from rayform.catalog import Catalog, DatasetEntry, DatasetView, OnDuplicate, RecordingWriter

__version__ = "0.1.0"

__all__ = [
    "Catalog",
    "DatasetEntry",
    "DatasetView",
    "OnDuplicate",
    "RecordingWriter",
    "__version__",
    "errors",
]
