"""How the ULog importer notices a truncated log, which pyulog reads to its cut end quietly.

A log ends cleanly where its last message ends. pyulog is handed the file followed by an end
marker, an info message of its own (:func:`marked_file`): pyulog parses the marker only when its
last message ended exactly at the end of the file; a message cut short swallows the marker's
bytes instead. The file is read through a C buffered reader (pyulog reads twice a message, ~130k
reads for a 4 MB log, which a Python ``read`` wrapper made cost some 10 % more than pyulog's
own parse).

When the marker is missing, the log is parsed again through :class:`WatchedFile`, which records
the read that the end of the file cut short, for an error saying where.
"""

from __future__ import annotations

import io
import os
import struct
from typing import BinaryIO, Final

_HEADER: Final = 3
"""A ULog message header's size: reaching the end of the file exactly at one is a clean end."""
MARKER_KEY: Final = "__rayform_end_of_file__"
"""The info key of the end marker (an ``uint8_t`` of :data:`MARKER_VALUE`)."""
MARKER_VALUE: Final = 0xE0
_INFO: Final = ord("I")
_MARKER_PAYLOAD: Final = bytes([len(f"uint8_t {MARKER_KEY}")]) + \
    f"uint8_t {MARKER_KEY}".encode() + bytes([MARKER_VALUE])
MARKER: Final = struct.pack("<HB", len(_MARKER_PAYLOAD), _INFO) + _MARKER_PAYLOAD
"""The end marker: a ULog info message (header: payload size, type ``I``)."""
_BUFFER_BYTES: Final = 1 << 16


class _MarkedRaw(io.RawIOBase):
    """The bytes of ``file`` (its first ``size``) followed by :data:`MARKER`, as a raw stream;
    the buffered reader above it calls :meth:`readinto` once a buffer."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        super().__init__()
        self._file = file
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._pos < self._size:
            self._file.seek(self._pos)
            got = self._file.readinto(view[: self._size - self._pos])  # type: ignore[attr-defined]
            count = int(got or 0)
            if count == 0:  # the file shrank while read: what is left is the marker
                self._size = self._pos
        if self._pos >= self._size:
            tail = MARKER[self._pos - self._size:]
            count = min(len(view), len(tail))
            view[:count] = tail[:count]
        self._pos += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos,
                io.SEEK_END: self._size + len(MARKER)}[whence]
        if base + offset < 0:
            raise OSError(f"seek to {base + offset}: before the start of the file")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        """pyulog closes its handle; the importer's ``with`` closes the real file."""
        super().close()


def marked_file(file: BinaryIO) -> io.BufferedReader:
    """``file`` (open, binary, at any position) read from its start with :data:`MARKER` after
    its end; closing it leaves ``file`` open."""
    size = os.fstat(file.fileno()).st_size
    return io.BufferedReader(_MarkedRaw(file, size), buffer_size=_BUFFER_BYTES)


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
