"""A file wrapper that notices a read cut short by the end of the file (a truncated ULog).

pyulog stops quietly where a truncated log ends; the wrapper records the read that came back
short so that the importer can refuse the file.
"""

from __future__ import annotations

from typing import BinaryIO, Final

_HEADER: Final = 3
"""A ULog message header's size: reaching the end of the file exactly at one is a clean end."""


class WatchedFile:
    """Delegates ``read``/``seek``/``tell``/``close`` to ``raw``; :attr:`cut` is
    ``(offset, wanted, got)`` of the first read that the end of the file cut short (a read that
    finds the end exactly where a message header would start is a clean end), else ``None``."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._read = raw.read  # pyulog reads twice a message: keep this path short
        self.cut: tuple[int, int, int] | None = None

    def read(self, size: int = -1) -> bytes:
        data = self._read(size)
        if len(data) < size and self.cut is None and (data or size != _HEADER):
            self.cut = (self._raw.tell() - len(data), size, len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        """pyulog closes its handle; the importer's ``with`` closes the real file."""
