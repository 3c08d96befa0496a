"""Remote objects fetched as ranged reads verified block by block into a sparse cache file.

For an object whose block hashes are known (:mod:`rayform.storage._block_hashes`, named by
trusted metadata), :func:`fetch_blocks` fills the cache without ever hashing the whole object:

1. a fresh fetch sends a plain GET while the block list arrives (a remote store sends it first,
   to learn the size: an object below ``PartPlan.blocks_from_bytes`` is fetched and hashed whole
   instead, see :mod:`rayform.storage._remote`); of a larger object it keeps
   the first part and asks for the rest, as for a resumed fetch, in ranges: the missing blocks
   coalesced (adjacent blocks in one request, at most ``PartPlan.part_bytes`` each), spread over
   ``PartPlan.connections`` requests at once;
2. each reply is cut at block boundaries as it streams in; a block is written into the sparse file
   ``sparse/<digest>`` only once its bytes hash to the list's entry, and only after that write is
   its byte in the record ``sparse/<digest>.blocks`` set (one byte a block, ``1``: verified);
3. when every block is verified the file is installed, read-only, as ``objects/<ab>/<digest>``
   (an atomic rename, as for any cached object) and the record removed.

An interrupted fetch (a dropped connection, a killed process) leaves the sparse file and its
record; the next fetch of the object asks only for the blocks not marked. A block is marked only
after its verified bytes were written, and every marked block is hashed again before a fetch
trusts the record (a machine that lost power may have kept the mark and not the bytes), so a
partially written block is never taken for a verified one. No byte of the sparse file reaches a
reader: readers open installed objects only, whose every block was checked. A sparse file nobody
resumed for a day, and nobody is filling, is swept (:meth:`ObjectCache.sweep_abandoned`, run by
the first fetch of each cache handle).

A block that does not match raises :class:`BlockMismatchError` (retried like a truncated download:
the link may have altered it); the store turns the last one into an
:class:`~rayform.errors.IntegrityError` naming the object and the block. A server that ignores
ranges (an HTTPS server without ``Accept-Ranges``) answers the first request with the whole
object, which is verified block by block just the same.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rayform._paths import path_under
from rayform.storage._block_hashes import BlockHashes
from rayform.storage._cache import BLOCKS_SUFFIX, SPARSE_DIR, ObjectCache, remember_verified
from rayform.storage._parts import PartPlan, RangedSource, RangeReply
from rayform.storage._retry import RetryPolicy, TransientError

VERIFIED = b"\x01"


class BlockMismatchError(TransientError):
    """A block of a remote object does not hash to its entry in the object's block list."""


def sparse_paths(cache: ObjectCache, digest: str) -> tuple[Path, Path]:
    """The sparse data file of ``digest`` in ``cache`` and its record of verified blocks."""
    cache.path_of(digest)  # checks that ``digest`` is one
    data = path_under(cache.root, f"{SPARSE_DIR}/{digest}", what=f"cache {cache.root}")
    return data, data.with_name(f"{digest}{BLOCKS_SUFFIX}")


def fetch_blocks(cache: ObjectCache, digest: str, hashes: Callable[[], BlockHashes],
                 source: RangedSource, key: str, *, plan: PartPlan, retry: RetryPolicy,
                 what: str) -> Path:
    """The verified cached path of ``digest``, fetching the blocks not yet verified (see the
    module docstring). ``hashes()`` returns the object's block hashes (it may still be fetching
    them: a fresh download sends its first ranged GET meanwhile, and verifies that reply once
    the list is there).

    Raises:
        RemoteError: every attempt failed (the last cause a :class:`BlockMismatchError` when the
            object's bytes do not match its block hashes).
    """
    path = cache.cached(digest)
    if path is not None:
        return path
    cache.sweep_on_first_fetch()  # before taking the lock: the sweep skips locked objects
    with cache.object_lock(digest):
        path = cache.cached(digest)  # another process may have finished it meanwhile
        if path is not None:
            return path
        return fetch_blocks_locked(cache, digest, hashes, source, key, plan=plan, retry=retry,
                                   what=what)


def fetch_blocks_locked(cache: ObjectCache, digest: str, hashes: Callable[[], BlockHashes],
                        source: RangedSource, key: str, *, plan: PartPlan, retry: RetryPolicy,
                        what: str, first: RangeReply | None = None) -> Path:
    """:func:`fetch_blocks` for a caller that holds :meth:`ObjectCache.object_lock` of
    ``digest`` and saw it absent (having run :meth:`ObjectCache.sweep_on_first_fetch` before)."""
    held = [first] if first is not None else []
    try:
        return retry.run(lambda: _fill(cache, digest, hashes, source, key, plan=plan,
                                       first=held.pop() if held else None), what=what)
    finally:
        for reply in held:
            reply.close()


def _fill(cache: ObjectCache, digest: str, hashes: Callable[[], BlockHashes],
          source: RangedSource, key: str, *, plan: PartPlan, first: RangeReply | None) -> Path:
    data_path, map_path = sparse_paths(cache, digest)
    what = f"GET {source.url}/{key}"
    # Nothing of it cached yet: a plain GET goes out while the block list arrives (an object
    # no larger than a part costs one request, as when it is fetched whole).
    early = first
    if early is None and not map_path.exists():
        early = source.open_range(key, 0, None)
    try:
        listed = hashes()
        with cache.writing("starting a block download"):
            data_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(data_path, os.O_RDWR | os.O_CREAT, 0o600)
            mfd = os.open(map_path, os.O_RDWR | os.O_CREAT, 0o600)
    except BaseException:
        if early is not None:
            early.close()
        raise
    try:
        sparse = _SparseFile(fd, mfd, listed, cache)
        sparse.trust_only_what_matches()
        _download_missing(sparse, source, key, plan=plan, what=what, early=early)
        missing = sparse.missing()
        if missing:
            raise TransientError(f"{len(missing)} of {listed.num_blocks} blocks were not "
                                 "received")
        with cache.writing("finishing a block download"):
            os.fsync(fd)
    finally:
        os.close(fd)
        os.close(mfd)
    path = cache.path_of(digest)
    with cache.writing(f"storing object {digest}"):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(data_path, 0o444)
        os.replace(data_path, path)  # atomic: readers see no file or the whole, verified file
        st = path.stat()
        map_path.unlink(missing_ok=True)
    remember_verified(path, st)
    return path


class _SparseFile:
    """The sparse data file of one object and its record of verified blocks (both open)."""

    def __init__(self, fd: int, mfd: int, hashes: BlockHashes, cache: ObjectCache) -> None:
        self._fd = fd
        self._mfd = mfd
        self.hashes = hashes
        self._cache = cache
        self._lock = threading.Lock()
        n = hashes.num_blocks
        if os.fstat(fd).st_size != hashes.size_bytes:
            with cache.writing("sizing a block download"):
                os.ftruncate(fd, hashes.size_bytes)
                os.ftruncate(mfd, 0)
        marks = os.pread(mfd, n, 0)
        self._marks = bytearray(marks.ljust(n, b"\0")[:n])

    def trust_only_what_matches(self) -> None:
        """Hash every block the record marks again; unmark those that do not match."""
        for block in range(self.hashes.num_blocks):
            if self._marks[block] != VERIFIED[0]:
                continue
            start, stop = self.hashes.span(block)
            if not self.hashes.matches(block, os.pread(self._fd, stop - start, start)):
                self._marks[block] = 0
                with self._cache.writing("updating a block record"):
                    os.pwrite(self._mfd, b"\0", block)

    def missing(self) -> list[int]:
        with self._lock:
            return [b for b in range(self.hashes.num_blocks) if self._marks[b] != VERIFIED[0]]

    def is_verified(self, block: int) -> bool:
        with self._lock:
            return self._marks[block] == VERIFIED[0]

    def commit(self, block: int, data: bytes | memoryview, *, what: str) -> None:
        """Write block ``block`` and mark it verified, if ``data`` is that block.

        Raises:
            BlockMismatchError: it is not.
        """
        if self.is_verified(block):
            return
        if not self.hashes.matches(block, data):
            start, stop = self.hashes.span(block)
            raise BlockMismatchError(
                f"{what}: block {block} (bytes {start}-{stop - 1}) does not match its sha256 in "
                "the object's block list (altered on the server or in transit)")
        start, _ = self.hashes.span(block)
        with self._cache.writing("writing a block download"):
            view = memoryview(data)
            pos = start
            while view:
                written = os.pwrite(self._fd, view, pos)
                view = view[written:]
                pos += written
            os.pwrite(self._mfd, VERIFIED, block)  # only after the verified bytes are written
        with self._lock:
            self._marks[block] = VERIFIED[0]


def _ranges(sparse: _SparseFile, plan: PartPlan, *, skip: int = 0) -> list[tuple[int, int]]:
    """Block ranges ``[first, stop)`` to request: runs of missing blocks (from block ``skip``
    on), split so that the missing bytes spread over ``plan.connections`` requests of at most
    ``plan.part_bytes``."""
    hashes = sparse.hashes
    missing = [b for b in sparse.missing() if b >= skip]
    if not missing:
        return []
    per = max(1, min(plan.part_bytes // hashes.block_bytes,
                     -(-len(missing) // plan.connections)))
    out: list[tuple[int, int]] = []
    run_start = prev = missing[0]
    for block in [*missing[1:], -1]:
        if block == prev + 1 and block - run_start < per:
            prev = block
            continue
        out.append((run_start, prev + 1))
        run_start = prev = block
    return out


def _download_missing(sparse: _SparseFile, source: RangedSource, key: str, *, plan: PartPlan,
                      what: str, early: RangeReply | None) -> None:
    hashes = sparse.hashes
    everything = (0, hashes.num_blocks)
    if early is not None:
        first_reply = _checked(early, sparse, 0, what=what)
        if (hashes.size_bytes <= plan.part_bytes or plan.connections < 2
                or not first_reply.accepts_ranges):
            _consume(first_reply, sparse, everything, what=what)
            return
        # A large object: the plain GET's first part is kept, the rest asked for in ranges.
        first_blocks = (0, min(hashes.num_blocks, max(1, plan.part_bytes // hashes.block_bytes)))
        ranges = [first_blocks, *_ranges(sparse, plan, skip=first_blocks[1])]
    else:
        ranges = _ranges(sparse, plan)
        if not ranges:
            return
        # The first range alone: a server that ignores ranges answers it with the whole object.
        first_reply = _open(source, key, sparse, ranges[0], what=what)
        if first_reply.start == 0 and first_reply.length_bytes == hashes.size_bytes:
            _consume(first_reply, sparse, everything, what=what)
            return
    stop = threading.Event()
    errors: list[BaseException] = []
    todo = iter(ranges[1:])
    lock = threading.Lock()

    def work(*, own_thread: bool = True) -> None:
        try:
            while not stop.is_set():
                with lock:
                    blocks = next(todo, None)
                if blocks is None:
                    return
                _consume(_open(source, key, sparse, blocks, what=what), sparse, blocks,
                         what=what, stop=stop)
        except BaseException as err:  # handed to the caller, which raises it
            stop.set()
            errors.append(err)
        finally:
            if own_thread:
                release_thread(source)

    # Daemon threads, as for read-ahead: a process that exits does not wait for blocks nobody
    # will read (the sparse file keeps what was verified).
    threads = [threading.Thread(target=work, daemon=True, name="rayform-blocks")
               for _ in range(min(plan.connections - 1, len(ranges) - 1))]
    for thread in threads:
        thread.start()
    try:
        _consume(first_reply, sparse, ranges[0], what=what, stop=stop)
    except BaseException as err:
        stop.set()
        errors.append(err)
    if not threads:
        work(own_thread=False)  # one connection: the ranges in turn, on this thread
    for thread in threads:
        thread.join()
    if errors:
        mismatch = [e for e in errors if isinstance(e, BlockMismatchError)]
        raise mismatch[0] if mismatch else errors[0]


def release_thread(source: object) -> None:
    """Let a transport close the connection of a thread that is about to end."""
    release = getattr(source, "release_thread", None)
    if release is not None:
        release()


def _open(source: RangedSource, key: str, sparse: _SparseFile, blocks: tuple[int, int], *,
          what: str) -> RangeReply:
    hashes = sparse.hashes
    start, _ = hashes.span(blocks[0])
    _, stop = hashes.span(blocks[1] - 1)
    return _checked(source.open_range(key, start, stop), sparse, start, what=what)


def _checked(reply: RangeReply, sparse: _SparseFile, start: int, *, what: str) -> RangeReply:
    """``reply`` when it answers a GET from byte ``start`` of the object the list describes."""
    hashes = sparse.hashes
    if reply.total_bytes is not None and reply.total_bytes != hashes.size_bytes:
        reply.close()
        raise BlockMismatchError(f"{what}: the server's object is {reply.total_bytes} bytes, its "
                            f"block list says {hashes.size_bytes} (altered on the server)")
    whole = reply.start == 0 and reply.length_bytes == hashes.size_bytes
    if reply.start != start and not whole:
        reply.close()
        raise TransientError(f"{what}: asked for bytes from {start}, the server answered from "
                             f"byte {reply.start}")
    return reply


def _consume(reply: RangeReply, sparse: _SparseFile, blocks: tuple[int, int], *, what: str,
             stop: threading.Event | None = None) -> None:
    """Verify and write the blocks ``blocks`` of ``reply`` as they arrive (the reply starts at
    the first; the connection is dropped once the last is in)."""
    hashes = sparse.hashes
    first = reply.start // hashes.block_bytes
    last = blocks[1] if first == blocks[0] else hashes.num_blocks  # a whole reply to a range
    block = first
    buf = bytearray()
    used = 0  # bytes at the front of ``buf`` already committed
    try:
        for chunk in _chunks(reply, stop, what=what):
            if used:
                del buf[:used]
                used = 0
            buf += chunk
            with memoryview(buf) as view:
                while block < last:
                    start, end = hashes.span(block)
                    if len(buf) - used < end - start:
                        break
                    with view[used:used + end - start] as piece:
                        sparse.commit(block, piece, what=what)
                    used += end - start
                    block += 1
            if block >= last:
                break
    finally:
        reply.close()
    if block < last:
        start, _ = hashes.span(block)
        raise TransientError(f"{what}: the connection closed at byte {start + len(buf) - used}, "
                             f"before the end of block {block}")


def _chunks(reply: RangeReply, stop: threading.Event | None, *, what: str) -> Iterator[bytes]:
    for chunk in reply.chunks:
        if stop is not None and stop.is_set():
            raise TransientError(f"{what}: stopped (another range failed)")
        yield chunk
