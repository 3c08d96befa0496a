"""The web stack ``rayform ui`` needs (the ``ui`` extra), checked once with a one-line fix."""

from __future__ import annotations

import importlib

UI_MODULES = ("starlette", "uvicorn", "jinja2")
INSTALL_HINT = "pip install 'rayform[ui]'"


def require_ui() -> None:
    """Raise an ImportError naming the extra when Starlette, uvicorn or Jinja2 is missing."""
    for module in UI_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ImportError(f"rayform ui needs the {module!r} package: {INSTALL_HINT}") from err
