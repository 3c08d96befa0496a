"""Rerun ``.rrd`` files: registered with ``rerun-sdk`` (extra ``rayform[rerun]``)."""

from __future__ import annotations

from rayform.catalog.rrd._importer import RrdImporter

__all__ = ["RrdImporter"]
