"""The importer registry: which reader turns a path (file or folder) into recording files.

An importer converts a source (an ``.rrd`` file, an MCAP file, a LeRobot folder …) into one or
more native recording files written into a staging folder; native recordings pass through as-is.
``register`` picks the first importer whose ``sniff`` accepts the path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from rayform.catalog._recording import is_recording_file
from rayform.errors import SourceNotFoundError, UnknownFormatError

ProgressCallback = Callable[[str], None]


class Importer(ABC):
    """Converts one source path into native recording files."""

    name: str = "importer"

    @abstractmethod
    def sniff(self, path: Path) -> bool:
        """Cheaply decide whether this importer reads ``path``."""

    @abstractmethod
    def convert(self, path: Path, staging: Path) -> list[Path]:
        """Write native recording files for ``path`` into ``staging`` and return them.

        Raises:
            rayform.errors.FormatError: the source is corrupt or unsupported (nothing registered).
        """


class NativeImporter(Importer):
    """Recordings written by :class:`rayform.RecordingWriter` need no conversion."""

    name = "rayform"

    def sniff(self, path: Path) -> bool:
        return path.is_file() and is_recording_file(path)

    def convert(self, path: Path, staging: Path) -> list[Path]:
        return [path]


_REGISTRY: list[Importer] = [NativeImporter()]
_LAZY: list[tuple[str, str]] = [
    # (module, class) of importers that need optional dependencies; loaded on first lookup.
    ("rayform.catalog.rrd", "RrdImporter"),
    ("rayform.catalog.mcap", "McapImporter"),
    ("rayform.catalog.lerobot", "LeRobotImporter"),
    ("rayform.catalog.mp4", "Mp4Importer"),
]
_loaded = False


def register_importer(importer: Importer) -> None:
    """Add an importer (tried before the built-in ones)."""
    _REGISTRY.insert(0, importer)


def _load_lazy() -> None:
    global _loaded
    if _loaded:
        return
    import importlib

    for module_name, cls_name in _LAZY:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name == module_name:
                continue  # importer not part of this build
            raise
        _REGISTRY.append(getattr(module, cls_name)())
    _loaded = True


def find_importer(path: Path) -> Importer:
    """The importer for ``path``.

    Raises:
        SourceNotFoundError: the path does not exist.
        UnknownFormatError: no importer recognises it.
    """
    if not path.exists():
        raise SourceNotFoundError(f"{path}: no such file or folder; check the path to register")
    # Importers already loaded come first in _REGISTRY, so trying them before loading the lazy
    # ones keeps the order and spares native recordings the optional imports.
    for importer in _REGISTRY:
        if importer.sniff(path):
            return importer
    if not _loaded:
        _load_lazy()
        for importer in _REGISTRY:
            if importer.sniff(path):
                return importer
    known = ", ".join(i.name for i in _REGISTRY)
    raise UnknownFormatError(
        f"{path}: not a recording format rayform can register (known: {known}); "
        "write it with rayform.RecordingWriter or convert it first"
    )
