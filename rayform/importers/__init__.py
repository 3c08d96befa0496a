"""Importers: recordings in — Rerun ``.rrd``, ROS 2 MCAP, LeRobot folders, MP4 — as native files.

Each format is a subpackage with one :class:`Importer`; registration asks :func:`find_importer`
which one reads a path. Optional packages (rerun-sdk, mcap, PyAV) are imported only on use.
"""

from __future__ import annotations

from rayform.importers._base import Importer
from rayform.importers._registry import ImporterRegistration, find_importer, register_importer

__all__ = ["Importer", "ImporterRegistration", "find_importer", "register_importer"]
