"""Register HDF5 files: the ALOHA/ACT and robomimic layouts, or any layout a mapping file declares."""

from __future__ import annotations

from pathlib import Path

from rayform.errors import FormatError
from rayform.importers._base import Importer
from rayform.importers._options import NO_OPTIONS, ImportOptions
from rayform.importers.hdf5._aloha import is_aloha, write_aloha
from rayform.importers.hdf5._file import HDF5_SUFFIXES, is_hdf5_file, open_hdf5, reading
from rayform.importers.hdf5._mapped import write_mapped
from rayform.importers.hdf5._mapping_file import Hdf5Mapping, load_mapping
from rayform.importers.hdf5._robomimic import is_robomimic, write_robomimic

RATE_OPTION = "rate_hz (rayform register --fps)"


class Hdf5Importer(Importer):
    """Reads HDF5 files with h5py (extra ``rayform[hdf5]``).

    The layout is recognised by content: robomimic (``data/demo_<N>``; also MimicGen, LIBERO,
    RoboCasa: one segment per demo) or ALOHA/ACT (``/observations`` + ``/action``: one segment per
    file). Any other layout registers with a mapping file (``ImportOptions(hdf5_mapping=…)``,
    ``rayform register --mapping``). Each episode is read and written on its own, so memory holds
    one episode at a time. ``rate_hz`` (``--fps``) gives files that store no rate a
    ``timestamp`` timeline on the exact frame grid.
    """

    name = "hdf5"
    options_read = frozenset({"rate_hz", "hdf5_mapping"})

    def __init__(self, options: ImportOptions = NO_OPTIONS, mapping: Hdf5Mapping | None = None
                 ) -> None:
        self._options = options
        self._mapping = mapping

    def configured(self, options: ImportOptions) -> Importer:
        mapping = None if options.hdf5_mapping is None else load_mapping(options.hdf5_mapping)
        return Hdf5Importer(options, mapping)

    def sniff(self, path: Path) -> bool:
        return path.is_file() and (path.suffix.lower() in HDF5_SUFFIXES or is_hdf5_file(path))

    def convert(self, path: Path, staging: Path) -> list[Path]:
        rate = self._options.rate_hz
        rate = None if rate is None else float(rate)
        if not is_hdf5_file(path):
            raise FormatError(f"{path}: not an HDF5 file (no HDF5 signature at its start); the "
                              "file is damaged, truncated or of another format")
        with open_hdf5(path) as file:
            if self._mapping is not None:
                return write_mapped(file, path, staging, self._mapping, rate_hz=rate)
            with reading(path, "recognising its layout"):
                robomimic = is_robomimic(file)
                aloha = not robomimic and is_aloha(file)
                top = sorted(file)[:10]
            if robomimic:
                return write_robomimic(file, path, staging, rate_hz=rate, rate_source=RATE_OPTION)
            if aloha:
                return write_aloha(file, path, staging, rate_hz=rate, rate_source=RATE_OPTION)
        raise FormatError(
            f"{path}: an HDF5 layout rayform does not know (top level: {top}); it reads the "
            "robomimic layout (data/demo_N) and the ALOHA layout (/observations, /action); "
            "declare this one in a mapping file and pass it with --mapping "
            "(ImportOptions(hdf5_mapping=...)), see docs/formats.md"
        )
