"""HDF5 files (ALOHA/ACT, robomimic / MimicGen / LIBERO / RoboCasa, declared mappings) with h5py."""

from __future__ import annotations

from rayform.importers.hdf5._importer import Hdf5Importer
from rayform.importers.hdf5._mapping_file import Hdf5Mapping, load_mapping

__all__ = ["Hdf5Importer", "Hdf5Mapping", "load_mapping"]
