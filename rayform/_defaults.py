"""Defaults: the local catalog used when none is named, the object cache, and where ``rayform ui``
listens (here, not in ``rayform.ui``, so the command line's help needs no web stack)."""

from __future__ import annotations

import os
from pathlib import Path

CATALOG_ENV = "RAYFORM_CATALOG"
CACHE_ENV = "RAYFORM_CACHE_DIR"
UI_HOST = "127.0.0.1"  # loopback: the catalog stays on this machine unless asked
UI_PORT = 8765
UI_SQL_TIMEOUT_S = 30.0  # a query of the web page that runs longer is cancelled


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
