"""The importer contract: an object that turns one source path into native recording files.

An importer converts a source (an ``.rrd`` file, an MCAP file, a LeRobot folder …) into one or
more native recording files written into a staging folder; native recordings pass through as-is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rayform.importers._options import ImportOptions
from rayform.recording._file import is_recording_file, open_recording

ProgressCallback = Callable[[str], None]


class Importer(ABC):
    """Converts one source path into native recording files."""

    name: str = "importer"
    options_read: ClassVar[frozenset[str]] = frozenset()
    """The :class:`ImportOptions` fields this importer reads (none by default)."""

    @abstractmethod
    def sniff(self, path: Path) -> bool:
        """Cheaply decide whether this importer reads ``path``."""

    @abstractmethod
    def convert(self, path: Path, staging: Path) -> list[Path]:
        """Write native recording files for ``path`` into ``staging`` and return them.

        Raises:
            rayform.errors.FormatError: the source is corrupt or unsupported (nothing registered).
        """

    def configured(self, options: ImportOptions) -> Importer:
        """This importer with ``options`` applied (importers that read none return themselves)."""
        return self

    def segment_ids(self, path: Path) -> list[str] | None:
        """The segment ids :meth:`convert` would write, when known without converting; ``None``
        when only converting tells (a registration then finds duplicates after converting)."""
        return None


class NativeImporter(Importer):
    """Recordings written by :class:`rayform.RecordingWriter` need no conversion."""

    name = "rayform"

    def sniff(self, path: Path) -> bool:
        return path.is_file() and is_recording_file(path)

    def convert(self, path: Path, staging: Path) -> list[Path]:
        return [path]

    def segment_ids(self, path: Path) -> list[str] | None:
        return [open_recording(path)[0].recording_id]
