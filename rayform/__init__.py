"""Rayform: an embedded catalog of robot recordings with SQL, and PyTorch datasets over it.

``import rayform`` never imports torch; ``rayform.torch`` and ``rayform.dataloader`` do. The
catalog and DataFusion load on first use of a name such as ``rayform.Catalog``.
"""

from __future__ import annotations

import typing
from typing import Any

from rayform import errors

if typing.TYPE_CHECKING:
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
# Loaded on first use, so that ``rayform --version`` and ``--help`` need neither the catalog nor
# DataFusion (``benchmarks/bench_cli.py``).
_LAZY_NAMES = {"Catalog": "rayform.catalog", "CatalogClient": "rayform.catalog",
               "DatasetEntry": "rayform.catalog", "DatasetView": "rayform.catalog",
               "OnDuplicate": "rayform.catalog", "RecordingWriter": "rayform.catalog",
               "Slice": "rayform.catalog", "TimeRange": "rayform.catalog",
               "Client": "rayform.client"}


def __getattr__(name: str) -> Any:
    """The public names and ``rayform.torch`` / ``rayform.dataloader``, imported when first used
    (``import rayform`` never imports torch, DataFusion or the catalog)."""
    import importlib

    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"rayform.{name}")
    module = _LAZY_NAMES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rayform' has no attribute {name!r}")
