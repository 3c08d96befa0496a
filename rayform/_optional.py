"""Optional dependencies of the format importers and exporters: import on use, say how to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise an ``ImportError`` naming the extra that provides it.

    Args:
        module: the module to import (``"av"``, ``"mcap.reader"``).
        extra: the ``rayform[...]`` extra that installs it.
        feature: what needs it, for the message (``"Reading MCAP files"``).

    Raises:
        ImportError: the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(missing_message(module, extra=extra, feature=feature)) from err


def missing_message(module: str, *, extra: str, feature: str) -> str:
    """``"{feature} needs the 'torch' package: pip install 'rayform[torch]'"``."""
    return f"{feature} needs the {module.split('.')[0]!r} package: pip install 'rayform[{extra}]'"
