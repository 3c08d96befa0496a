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
        self._at = raw.tell()
        self.cut: tuple[int, int, int] | None = None

    def read(self, size: int = -1) -> bytes:
        at = self._at
        data = self._raw.read(size)
        self._at += len(data)
        short = size >= 0 and len(data) < size
        clean_end = size == _HEADER and not data
        if short and not clean_end and self.cut is None:
            self.cut = (at, size, len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = self._raw.seek(offset, whence)
        return self._at

    def tell(self) -> int:
        return self._at

    def close(self) -> None:
        """pyulog closes its handle; the importer's ``with`` closes the real file."""
