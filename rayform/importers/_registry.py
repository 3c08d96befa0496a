"""The importer registry: which importer turns a path (file or folder) into recording files.

``register`` picks the first importer whose ``sniff`` accepts the path: importers added with
:func:`register_importer` first, then native recordings, ``.rrd``, MCAP, ROS bags (``.bag``,
``.db3``), RLDS / TFDS builder folders, Zarr replay buffers, LeRobot, MP4, HDF5 and PX4 ULog.
"""

from __future__ import annotations

from pathlib import Path

from rayform.errors import SourceNotFoundError, UnknownFormatError
from rayform.importers._base import Importer, NativeImporter
from rayform.importers.hdf5 import Hdf5Importer
from rayform.importers.lerobot import LeRobotImporter
from rayform.importers.mcap import McapImporter
from rayform.importers.mp4 import Mp4Importer
from rayform.importers.rlds import RldsImporter
from rayform.importers.rosbag import RosbagImporter
from rayform.importers.rrd import RrdImporter
from rayform.importers.ulog import ULogImporter
from rayform.importers.zarr import ZarrImporter

# Registered importers first, then the built-in ones in this order. The built-in importers import
# their optional packages (rerun-sdk, mcap, rosbags, PyAV, google-crc32c, zarr, h5py, pyulog) only
# when they convert, so listing them is cheap. RLDS and Zarr folders come before LeRobot, which
# claims any folder.
_REGISTRY: list[Importer] = [NativeImporter(), RrdImporter(), McapImporter(), RosbagImporter(),
                             RldsImporter(), ZarrImporter(), LeRobotImporter(), Mp4Importer(),
                             Hdf5Importer(), ULogImporter()]


class ImporterRegistration:
    """An importer added by :func:`register_importer`; ``with`` it (or :meth:`remove`) to take
    it out again, so that options such as ``RldsImporter(fps=5)`` apply to one registration."""

    def __init__(self, importer: Importer) -> None:
        self.importer = importer

    def remove(self) -> None:
        """Take the importer out of the registry (no-op when it is no longer there)."""
        for i, registered in enumerate(_REGISTRY):
            if registered is self.importer:
                del _REGISTRY[i]
                return

    def __enter__(self) -> Importer:
        return self.importer

    def __exit__(self, *exc: object) -> None:
        self.remove()


def register_importer(importer: Importer) -> ImporterRegistration:
    """Add an importer (tried before the built-in ones), for good or within a ``with`` block::

        with register_importer(RldsImporter(fps=5)):
            dataset.register("bridge_dataset")
    """
    _REGISTRY.insert(0, importer)
    return ImporterRegistration(importer)


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
