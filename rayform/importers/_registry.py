"""The importer registry: which importer turns a path (file or folder) into recording files.

``register`` picks the first importer whose ``sniff`` accepts the path: importers added with
:func:`register_importer` first, then native recordings, ``.rrd``, MCAP, LeRobot, MP4, HDF5 and PX4 ULog.
"""

from __future__ import annotations

from pathlib import Path

from rayform.errors import SourceNotFoundError, UnknownFormatError
from rayform.importers._base import Importer, NativeImporter
from rayform.importers.hdf5 import Hdf5Importer
from rayform.importers.lerobot import LeRobotImporter
from rayform.importers.mcap import McapImporter
from rayform.importers.mp4 import Mp4Importer
from rayform.importers.rrd import RrdImporter
from rayform.importers.ulog import ULogImporter

# Registered importers first, then the built-in ones in this order. The built-in importers import
# their optional packages (rerun-sdk, mcap, PyAV, h5py, pyulog) only when they convert, so
# listing them is cheap.
_REGISTRY: list[Importer] = [NativeImporter(), RrdImporter(), McapImporter(), LeRobotImporter(),
                             Mp4Importer(), Hdf5Importer(), ULogImporter()]


def register_importer(importer: Importer) -> None:
    """Add an importer (tried before the built-in ones)."""
    _REGISTRY.insert(0, importer)


def find_importer(path: Path) -> Importer:
    """The importer for ``path``.

    Raises:
        SourceNotFoundError: the path does not exist.
        UnknownFormatError: no importer recognises it.
    """
    if not path.exists():
        raise SourceNotFoundError(f"{path}: no such file or folder; check the path to register")
    for importer in _REGISTRY:
        if importer.sniff(path):
            return importer
    known = ", ".join(i.name for i in _REGISTRY)
    raise UnknownFormatError(
        f"{path}: not a recording format rayform can register (known: {known}); "
        "write it with rayform.RecordingWriter or convert it first"
    )
