"""Rerun ``.rrd`` files: registered with ``rerun-sdk`` (extra ``rayform[rerun]``)."""

from __future__ import annotations

from rayform.importers.rrd._importer import RrdImporter

__all__ = ["RrdImporter"]
