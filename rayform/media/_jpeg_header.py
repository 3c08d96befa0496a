"""A JPEG's frame header (size and colour components) read in Python, without releasing the GIL.

``simplejpeg.decode_jpeg_header`` releases the GIL around libjpeg-turbo's header parse (a couple
of microseconds). On a decode thread that is a GIL round trip per image: the thread hands the GIL
to whichever thread wants it and then waits until that thread lets it go again (up to the
interpreter's switch interval while that thread runs Python), so with two threads decoding one
batch the header calls cost more than the decodes' own GIL hand-offs. Walking the markers to the
frame header (``SOFn``) in Python keeps the GIL for about as long as the library call takes.

Only the common frames are read here (8-bit baseline, extended and progressive Huffman:
``SOF0``–``SOF2``); anything else is left to the library (:data:`UNKNOWN`).
"""

from __future__ import annotations

from typing import Final

UNKNOWN: Final = "unknown"
"""Returned when the header is not one this module reads: ask the JPEG library."""

_SOI = b"\xff\xd8"
_READ_FRAMES = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive (Huffman, 8-bit)
_OTHER_FRAMES = frozenset({0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RSTn: no length field
_MAX_MARKERS = 64  # a header with more segments before its frame is left to the library


def frame_header(data: bytes | memoryview) -> tuple[int, int, int] | str | None:
    """``(height, width, components)`` from the frame header of the JPEG ``data``.

    Returns:
        The frame's size and component count (1 grey, 3 colour, 4 CMYK …) for an 8-bit
        ``SOF0``–``SOF2`` frame; :data:`UNKNOWN` for any other frame, a header this walk does not
        follow, or one it finds damaged (the library decides); ``None`` when ``data`` is not a
        JPEG (no start-of-image marker).
    """
    return _walk(data)[0]


def frame_header_end(data: bytes | memoryview) -> int:
    """How many leading bytes of ``data`` :func:`frame_header` reads to give a size: every
    JPEG whose first bytes equal these has the same frame header (the walk reads nothing else).
    ``0`` when it gives no size (:data:`UNKNOWN` or not a JPEG)."""
    return _walk(data)[1]


def _walk(data: bytes | memoryview) -> tuple[tuple[int, int, int] | str | None, int]:
    """:func:`frame_header`'s result and the end of the bytes it read (``0`` without a size)."""
    if bytes(data[:2]) != _SOI:
        return None, 0
    size = len(data)
    at = 2
    for _ in range(_MAX_MARKERS):
        if at + 4 > size or data[at] != 0xFF:
            return UNKNOWN, 0
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte before a marker
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        if marker in _READ_FRAMES:
            if at + 10 > size or data[at + 4] != 8:
                return UNKNOWN, 0
            height = data[at + 5] << 8 | data[at + 6]
            width = data[at + 7] << 8 | data[at + 8]
            components = data[at + 9]
            if not height or not width:  # DNL (height given after the scan): the library's call
                return UNKNOWN, 0
            return (height, width, components), at + 10
        if marker in _OTHER_FRAMES or marker in (0xD8, 0xD9, 0xDA):
            return UNKNOWN, 0
        at += 2 + (data[at + 2] << 8 | data[at + 3])
    return UNKNOWN, 0
