"""Default locations: the local catalog used when none is named, and the object cache."""

from __future__ import annotations

import os
from pathlib import Path

CATALOG_ENV = "RAYFORM_CATALOG"
CACHE_ENV = "RAYFORM_CACHE_DIR"


def default_catalog_url() -> str:
    """``$RAYFORM_CATALOG``, else ``$XDG_DATA_HOME/rayform/catalog`` (``~/.local/share/…``)."""
    url = os.environ.get(CATALOG_ENV)
    if url:
        return url
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return str(base / "rayform" / "catalog")


def default_cache_dir() -> Path:
    """``$RAYFORM_CACHE_DIR``, else ``~/.cache/rayform``."""
    path = os.environ.get(CACHE_ENV)
    return Path(path).expanduser() if path else Path.home() / ".cache" / "rayform"
