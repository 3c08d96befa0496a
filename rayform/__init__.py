"""Rayform: an embedded catalog of robot recordings with SQL, and PyTorch datasets over it.

``import rayform`` never imports torch; ``rayform.torch`` and ``rayform.dataloader`` do.
"""

from __future__ import annotations

from typing import Any

from rayform import errors
from rayform.catalog import (
    Catalog,
    CatalogClient,
    DatasetEntry,
    DatasetView,
    OnDuplicate,
    RecordingWriter,
    Slice,
    TimeRange,
)
from rayform.client import Client

__version__ = "0.1.0"

__all__ = [
    "Catalog",
    "CatalogClient",
    "Client",
    "DatasetEntry",
    "DatasetView",
    "OnDuplicate",
    "RecordingWriter",
    "Slice",
    "TimeRange",
    "__version__",
    "errors",
]


_LAZY_SUBMODULES = ("dataloader", "torch")


def __getattr__(name: str) -> Any:
    """``rayform.torch`` / ``rayform.dataloader`` without importing torch at ``import rayform``."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"rayform.{name}")
    raise AttributeError(f"module 'rayform' has no attribute {name!r}")
