"""Importers: recordings in — ``.rrd``, MCAP, LeRobot, MP4, HDF5, PX4 ULog — as native files.

Each format is a subpackage with one :class:`Importer`; registration asks :func:`find_importer`
which one reads a path. Optional packages (rerun-sdk, mcap, PyAV, h5py, pyulog) are imported only on use;
:class:`ImportOptions` carries what a source leaves out (its rate, its HDF5 layout).
"""

from __future__ import annotations

from rayform.importers._base import Importer
from rayform.importers._options import ImportOptions
from rayform.importers._registry import ImporterRegistration, find_importer, register_importer

__all__ = ["ImportOptions", "Importer", "ImporterRegistration", "find_importer", "register_importer"]
