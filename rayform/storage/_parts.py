"""Large objects downloaded as concurrent ranged GETs into one file, hashed as the bytes arrive.

Object stores cap each connection (S3: roughly 50-90 MB/s) and scale with concurrent requests, so
one GET of a large object takes ``size / per-connection rate`` however fast the machine's link is.
:func:`download_in_parts` sends a plain GET (an object no larger than :attr:`PartPlan.part_bytes`
costs what it always did); when the reply names a larger size and the server takes ranges, it
keeps only the first part of that reply and asks for the others with ranged GETs, on up to
:attr:`PartPlan.connections` connections at once, each written at its offset into the caller's
(temporary) file.

Verification is unchanged: the sha256 of the whole object is computed over the bytes written, in
order, by a :class:`HashFront` that hashes each chunk from memory when it lands at the front and
reads later parts back from the file (the page cache) once the parts before them are complete;
the caller installs the file only when that digest matches the object's name. A part that comes
back short, with a range it was not asked for, or altered, fails the whole download.

Bounds per object: ``connections`` requests at once, each holding one transport chunk (1 MiB) in
memory, plus one read-back buffer (:data:`READ_BACK_BYTES`) and one small entry per chunk written
ahead of the hash front.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from rayform.errors import ConfigError
from rayform.storage._retry import TransientError

DEFAULT_PART_BYTES = 8 << 20
DEFAULT_CONNECTIONS = 4
DEFAULT_BLOCKS_FROM_BYTES = 4 * DEFAULT_PART_BYTES
READ_BACK_BYTES = 1 << 20
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")

Writing = Callable[[str], AbstractContextManager[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartPlan:
    """How a remote object is split into ranged GETs.

    Attributes:
        part_bytes: bytes per request (an object no larger is fetched with one request).
        connections: requests of one object in flight at once.
        blocks_from_bytes: an object with block hashes is fetched block by block from this size
            on (resumable, never hashed whole); a smaller one is fetched and hashed whole, which
            spares the request for its block-hash object (:mod:`rayform.storage._sparse`).
    """

    part_bytes: int = DEFAULT_PART_BYTES
    connections: int = DEFAULT_CONNECTIONS
    blocks_from_bytes: int = field(default_factory=lambda: DEFAULT_BLOCKS_FROM_BYTES)

    def __post_init__(self) -> None:
        if not isinstance(self.part_bytes, int) or self.part_bytes < 1:
            raise ConfigError(f"PartPlan.part_bytes must be an integer >= 1, got "
                              f"{self.part_bytes!r}")
        if not isinstance(self.connections, int) or self.connections < 1:
            raise ConfigError(f"PartPlan.connections must be an integer >= 1, got "
                              f"{self.connections!r}")
        if not isinstance(self.blocks_from_bytes, int) or self.blocks_from_bytes < 0:
            raise ConfigError(f"PartPlan.blocks_from_bytes must be an integer >= 0, got "
                              f"{self.blocks_from_bytes!r}")


@dataclass(slots=True, kw_only=True)
class RangeReply:
    """A transport's answer to a GET, whole or ranged.

    Attributes:
        total_bytes: the object's size (a ranged reply's ``Content-Range``, a whole one's
            ``Content-Length``), when the server says.
        start: the first byte the body holds (0 for a whole object).
        length_bytes: what the body should hold (its ``Content-Length``), when the server says.
        accepts_ranges: the server answers ranged GETs (S3 always; a web server that says
            ``Accept-Ranges: bytes``).
        chunks: the body; raises :class:`TransientError` when the connection drops.
        close: releases the connection (called once the body is read or abandoned).
    """

    total_bytes: int | None
    start: int
    length_bytes: int | None
    accepts_ranges: bool
    chunks: Iterator[bytes]
    close: Callable[[], None] = field(default=lambda: None)


def parse_content_range(value: str | None, *, what: str) -> tuple[int, int, int] | None:
    """``(first, last, total)`` of a ``Content-Range`` header (``None`` when absent).

    Raises:
        TransientError: a header that is not ``bytes first-last/total`` with first <= last < total.
    """
    if value is None:
        return None
    found = _CONTENT_RANGE.match(value.strip())
    if found is None:
        raise TransientError(f"{what}: unreadable Content-Range {value[:80]!r}")
    first, last, total = (int(g) for g in found.groups())
    if not first <= last < total:
        raise TransientError(f"{what}: impossible Content-Range {value[:80]!r}")
    return first, last, total


class RangedSource(Protocol):
    """What :func:`download_in_parts` needs of a transport."""

    url: str

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply: ...


class HashFront:
    """The sha256 of a file written out of order, advanced over its complete prefix.

    Writers report each chunk after writing it (:meth:`wrote`); the chunk at the front is hashed
    from memory, chunks beyond it are hashed by reading them back once everything before them is
    written. One thread hashes at a time; the others only record what they wrote.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._hash = hashlib.sha256()
        self._lock = threading.Lock()
        self._ahead: dict[int, int] = {}  # start -> end of chunks written beyond the front
        self._busy = False
        self.front = 0

    def wrote(self, offset: int, data: bytes | memoryview) -> None:
        """``data`` now lies at ``offset`` in the file."""
        with self._lock:
            if self._busy or offset != self.front:
                if data:
                    self._ahead[offset] = offset + len(data)
                return
            self._busy = True
        self._hash.update(data)
        with self._lock:
            self.front += len(data)
        self._catch_up()

    def _catch_up(self) -> None:
        """Hash the chunks that the front has reached (holding the hasher's turn)."""
        while True:
            with self._lock:
                end = self._ahead.pop(self.front, None)
                if end is None:
                    self._busy = False
                    return
                pos = self.front
            while pos < end:
                piece = os.pread(self._fd, min(READ_BACK_BYTES, end - pos), pos)
                if not piece:
                    raise OSError(f"the download file ended at byte {pos} while hashing it")
                self._hash.update(piece)
                pos += len(piece)
            with self._lock:
                self.front = end

    def hexdigest(self, size: int) -> str:
        """The digest of the first ``size`` bytes, once every one of them was reported."""
        self._catch_up_if_idle()
        if self.front != size:
            raise TransientError(f"only {self.front} of {size} bytes were written in order "
                                 "(a part is missing)")
        return self._hash.hexdigest()

    def _catch_up_if_idle(self) -> None:
        with self._lock:
            if self._busy:
                return
            self._busy = True
        self._catch_up()


def download_in_parts(transport: RangedSource, key: str, fd: int, *, plan: PartPlan,
                      writing: Writing, first: RangeReply | None = None) -> tuple[str, int, int]:
    """Download ``key`` into the empty file ``fd`` (see the module docstring); ``first``: the
    plain GET's reply when the caller sent it already.

    Returns:
        ``(sha256 hex, size in bytes, number of requests)`` of what was written.

    Raises:
        TransientError: a dropped connection, a short part, or a reply for another range.
        FileNotFoundError: no such key.
    """
    what = f"GET {transport.url}/{key}"
    front = HashFront(fd)
    # A plain GET first: an object no larger than a part costs what it always did, and a
    # larger one's first part streams while the others are asked for.
    if first is None:
        first = transport.open_range(key, 0, None)
    total = first.total_bytes
    if (total is None or total <= plan.part_bytes or plan.connections < 2
            or not first.accepts_ranges):
        size = _write_body(first, fd, front, start=0, expected=None, what=what, writing=writing)
        return front.hexdigest(size), size, 1
    bounds = [(s, min(s + plan.part_bytes, total)) for s in range(0, total, plan.part_bytes)]
    stop = threading.Event()

    def part(start: int, end: int) -> None:
        if stop.is_set():
            return
        reply = transport.open_range(key, start, end)
        if reply.total_bytes != total or reply.start != start:
            reply.close()
            raise TransientError(f"{what}: asked for bytes {start}-{end - 1} of {total}, the "
                                 f"server answered from byte {reply.start} of "
                                 f"{reply.total_bytes}")
        _write_body(reply, fd, front, start=start, expected=end - start, what=what,
                    writing=writing, stop=stop)

    workers = min(plan.connections - 1, len(bounds) - 1)
    todo = iter(bounds[1:])  # taken in order, so that the hash front keeps moving
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work() -> None:
        try:
            while not stop.is_set():
                with lock:
                    bound = next(todo, None)
                if bound is None:
                    return
                part(*bound)
        except BaseException as err:  # handed to the caller, which raises the first one
            failures.append(err)
            stop.set()

    # Daemon threads, as for read-ahead: a process that exits does not wait for parts nobody
    # will read (the cache sweeps the partial file later).
    threads = [threading.Thread(target=work, daemon=True, name="rayform-part")
               for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        _write_body(first, fd, front, start=0, expected=bounds[0][1], what=what, writing=writing,
                    stop=stop, first_of_whole=True)
    except BaseException as err:
        stop.set()  # parts not started are skipped, running ones stop at their next chunk
        failures.append(err)  # after a part's own failure, which stopped this one
    finally:
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return front.hexdigest(total), total, len(bounds)


def _write_body(reply: RangeReply, fd: int, front: HashFront, *, start: int,
                expected: int | None, what: str, writing: Writing,
                stop: threading.Event | None = None, first_of_whole: bool = False) -> int:
    """Write a reply's body at ``start``; returns its length (checked against ``expected``).
    ``first_of_whole``: the reply is the whole object, of which only the first ``expected``
    bytes are wanted (the rest is left unread and the connection dropped)."""
    pos = start
    try:
        for chunk in reply.chunks:
            if stop is not None and stop.is_set():
                raise TransientError(f"{what}: stopped (another part failed)")
            if expected is not None and pos - start + len(chunk) > expected:
                if not first_of_whole:
                    raise TransientError(f"{what}: the server sent more than the {expected} "
                                         f"bytes asked for from byte {start}")
                chunk = chunk[:expected - (pos - start)]
            _write_at(fd, chunk, pos, writing)
            front.wrote(pos, chunk)
            pos += len(chunk)
            if first_of_whole and pos - start == expected:
                break
    finally:
        reply.close()
    got = pos - start
    if not first_of_whole and reply.length_bytes is not None and got != reply.length_bytes:
        raise TransientError(f"{what}: connection closed after {got} of {reply.length_bytes} "
                             f"bytes from byte {start}")
    if expected is not None and got != expected:
        raise TransientError(f"{what}: got {got} of the {expected} bytes asked for from byte "
                             f"{start}")
    return got


def _write_at(fd: int, chunk: bytes, pos: int, writing: Writing) -> None:
    with writing("writing a download"):
        view = memoryview(chunk)
        while view:
            written = os.pwrite(fd, view, pos)
            view = view[written:]
            pos += written
