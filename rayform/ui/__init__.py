"""rayform ui: the catalog in a web browser (datasets, episodes with their cameras and signals on
one time cursor, findings, SQL, slices). Needs the ``ui`` extra: ``pip install 'rayform[ui]'``."""

from __future__ import annotations

from rayform.ui._app import create_app
from rayform.ui._server import ExposedServerWarning, ServeOptions, is_loopback, serve

__all__ = ["ExposedServerWarning", "ServeOptions", "create_app", "is_loopback", "serve"]
