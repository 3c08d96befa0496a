"""The local, content-addressed cache of remote catalog data, safe to share between processes.

Layout under ``RAYFORM_CACHE_DIR`` (default ``~/.cache/rayform``)::

    objects/<ab>/<sha256>        verified, read-only copies of data objects (shared by all catalogs)
    meta/<url-hash>/…            small pointer files: which object holds a catalog's metadata file
    tmp/                         downloads in flight (renamed into ``objects/`` once verified)
    sparse/<sha256>[.blocks]     block-verified downloads in flight and their records of verified
                                 blocks (:mod:`rayform.storage._sparse`; resumed by the next fetch)
    locks/<abc>.lock             advisory locks so that processes of one host fetch an object once

Every file appears by an atomic rename of a complete, hash-checked temporary file, so a reader never
sees a torn file, and two processes (or two machines sharing the folder over NFS) fetching the same
object at once both end with the same bytes. A cached object is hashed again the first time each
process opens it (whichever ``ObjectCache`` of the process opens it: a catalog opened again for the
next epoch does not hash its data again); a corrupt one is deleted and fetched again. A failed
download leaves nothing but what a later one can resume. What killed processes left is swept by the
first download of the next process (:meth:`ObjectCache.sweep_abandoned`): ``.part`` files, and
sparse downloads nobody has touched for :data:`STALE_PART_S` and nobody is filling.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from rayform._atomic import write_atomic
from rayform._digest import is_digest, require_digest
from rayform._local_writes import naming_full_disk
from rayform._paths import path_under
from rayform.errors import CacheError
from rayform.storage._retry import RetryPolicy, TransientError
from rayform.storage._store import sha256_file

CACHE_ENV = "RAYFORM_CACHE_DIR"
OFFLINE_ENV = "RAYFORM_OFFLINE"
STALE_PART_S = 24 * 3600.0
SPARSE_DIR = "sparse"
BLOCKS_SUFFIX = ".blocks"
DEAD_WRITER_PART_S = 60.0  # a running download writes far more often than this

# Cached objects this process has hashed (or downloaded and hashed), by path: the file's
# (device, inode, size, mtime) when it matched its name. One entry (~200 bytes) per object read,
# at most _VERIFIED_MAX: past that the memo starts afresh (objects are then hashed once more).
_VERIFIED: dict[str, tuple[int, int, int, int]] = {}
_VERIFIED_MAX = 200_000


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def remember_verified(path: Path, st: os.stat_result) -> None:
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.clear()
    _VERIFIED[str(path)] = _stamp(st)


def default_cache_dir() -> Path:
    """``$RAYFORM_CACHE_DIR``, else ``~/.cache/rayform``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "rayform"


def is_offline() -> bool:
    """True when ``RAYFORM_OFFLINE`` is set to anything but ``""``, ``0``, ``false`` or ``no``."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("", "0", "false", "no")


class DigestMismatchError(TransientError):
    """A downloaded object does not hash to its name (retried: the link may have altered it)."""


class Sink(Protocol):
    """Where a transport writes a download's bytes."""

    def write(self, data: bytes, /) -> int: ...


class HashingSink:
    """A sink that writes to a file and hashes (sha256) and counts what it writes; with a
    ``cache``, a failure to write is named after the cache (a full disk is never a network
    error)."""

    def __init__(self, fh: BinaryIO, cache: ObjectCache | None = None) -> None:
        self._fh = fh
        self._cache = cache
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes, /) -> int:
        self.hash.update(data)
        self.size += len(data)
        if self._cache is None:
            return self._fh.write(data)
        with self._cache.writing("writing a download"):
            return self._fh.write(data)


Download = Callable[[Sink], None]
# Writes an object into an open, empty file descriptor; returns (sha256 hex of the bytes written,
# their number, the requests it took).
Fill = Callable[[int], tuple[str, int, int]]


class ObjectCache:
    """A content-addressed object cache in one folder (see the module docstring for the layout)."""

    def __init__(self, root: Path | None = None) -> None:
        """Open the cache folder ``root`` (default :func:`default_cache_dir`); nothing is created
        until something is cached.

        Raises:
            CacheError: ``root`` exists and is not a folder.
        """
        self.root = (root if root is not None else default_cache_dir()).expanduser().resolve()
        if self.root.exists() and not self.root.is_dir():
            raise CacheError(
                f"cache folder {self.root} is a file, not a folder; point {CACHE_ENV} at a folder "
                "(or unset it to use ~/.cache/rayform)"
            )
        self._swept = False

    def __repr__(self) -> str:
        return f"ObjectCache({str(self.root)!r})"

    # ------------------------------------------------------------------------------ paths
    def path_of(self, digest: str) -> Path:
        """Where the object ``digest`` lives in the cache (whether or not it is there).

        Raises:
            CorruptMetadataError: ``digest`` is not a sha256 (a crafted path must never reach
                the cache, which deletes copies that do not match their name).
        """
        require_digest(digest, what=f"object in cache {self.root}")
        return path_under(self.root, f"objects/{digest[:2]}/{digest}", what=f"cache {self.root}")

    @contextlib.contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Name local write failures in the block after the cache: a full disk is
        :class:`DiskFullError`, a folder gone or replaced by a file :class:`CacheError` — never a
        ``FileNotFoundError`` a caller could take for a missing remote file."""
        with naming_full_disk(self.root, what=f"{what} in the cache"):
            try:
                yield
            except (FileNotFoundError, NotADirectoryError, FileExistsError) as err:
                raise CacheError(
                    f"{what} in the cache {self.root} failed: {err}; the folder was deleted or "
                    f"replaced while in use, or {CACHE_ENV} names a file — stop whatever removes "
                    f"it, or point {CACHE_ENV} at another folder"
                ) from err

    def tmp_dir(self) -> Path:
        path = self.root / "tmp"
        with self.writing("creating the download folder"):
            path.mkdir(parents=True, exist_ok=True)
        self.sweep_on_first_fetch()
        return path

    def sweep_abandoned(self) -> int:
        """Remove what killed downloads left; returns how many files were removed.

        A ``tmp/*.part`` untouched for :data:`STALE_PART_S`, or for a minute when the process
        named in it no longer runs; a sparse download (``sparse/<digest>`` and its ``.blocks``
        record, see :mod:`rayform.storage._sparse`) whose files were both untouched for
        :data:`STALE_PART_S` and whose object lock nobody holds (no process is filling it). A
        fresher one is kept: the next fetch of the object resumes it."""
        return (_sweep_stale_parts(self.root / "tmp")
                + _sweep_stale_sparse(self.root / SPARSE_DIR, self._try_lock))

    def sweep_on_first_fetch(self) -> None:
        """Run :meth:`sweep_abandoned` once per cache handle (the first download calls it)."""
        if not self._swept:
            self._swept = True
            self.sweep_abandoned()

    def staging_dir(self) -> Path:
        """A fresh folder on the cache's filesystem for one operation's temporary files."""
        with self.writing("creating a staging folder"):
            return Path(tempfile.mkdtemp(prefix="staging-", dir=self.tmp_dir()))

    # ------------------------------------------------------------------------------ reads
    def cached(self, digest: str) -> Path | None:
        """The verified local path of ``digest``, or None when absent (a corrupt copy is removed)."""
        path = self.path_of(digest)
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        if _VERIFIED.get(str(path)) == _stamp(st):
            return path
        if sha256_file(path) != digest:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # corrupt: readers holding it open keep their inode
            _VERIFIED.pop(str(path), None)
            return None
        remember_verified(path, st)
        return path

    def read_bytes(self, digest: str) -> bytes | None:
        """The verified content of a (small) cached object, or None."""
        path = self.path_of(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if hashlib.sha256(data).hexdigest() != digest:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return None
        return data

    # ----------------------------------------------------------------------------- writes
    def fetch(self, digest: str, download: Download, *, retry: RetryPolicy, what: str) -> Path:
        """The local path of ``digest``, downloading it with ``download`` when not cached.

        ``download(sink)`` writes the object's bytes into ``sink`` and raises
        :class:`TransientError` on a dropped connection; each attempt starts a fresh temporary
        file, which is removed whatever happens unless it is complete and its sha256 matches.

        Raises:
            RemoteError: every attempt failed.
        """
        def fill(fd: int) -> tuple[str, int, int]:
            with open(fd, "wb", closefd=False) as fh:
                sink = HashingSink(fh, self)
                download(sink)
                with self.writing("finishing a download"):
                    fh.flush()
            return sink.hash.hexdigest(), sink.size, 1

        return self.fetch_into(digest, fill, retry=retry, what=what)

    def fetch_into(self, digest: str, fill: Fill, *, retry: RetryPolicy, what: str) -> Path:
        """Like :meth:`fetch`, with ``fill(fd)`` writing the object into the temporary file
        (anywhere in it: ranged parts) and returning the sha256 of the bytes it wrote, their
        number and the requests it made; the file is installed only when that digest is
        ``digest``.

        Raises:
            RemoteError: every attempt failed.
        """
        path = self.cached(digest)
        if path is not None:
            return path
        with self._lock(digest):
            path = self.cached(digest)  # another process may have fetched it meanwhile
            if path is not None:
                return path

            return self.fill_locked(digest, fill, retry=retry, what=what)

    def fill_locked(self, digest: str, fill: Fill, *, retry: RetryPolicy, what: str) -> Path:
        """:meth:`fetch_into` for a caller that holds :meth:`object_lock` of ``digest`` and saw
        it absent."""
        return retry.run(lambda: self._download_once(digest, fill), what=what)

    def _download_once(self, digest: str, fill: Fill) -> Path:
        tmp = self.tmp_dir() / f"{digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
        try:
            with self.writing("starting a download"):
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                got, size, requests = fill(fd)
                with self.writing("finishing a download"):
                    os.fsync(fd)
            finally:
                os.close(fd)
            if got != digest:
                parts = f" in {requests} ranged parts" if requests > 1 else ""
                raise DigestMismatchError(
                    f"downloaded {size} bytes{parts} whose sha256 is {got}, not {digest} "
                    "(truncated or altered in transit); nothing was cached"
                )
            return self._install(tmp, digest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _install(self, tmp: Path, digest: str) -> Path:
        path = self.path_of(digest)
        with self.writing(f"storing object {digest}"):
            path.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o444)
            os.replace(tmp, path)  # atomic: readers see no file or the whole file
            st = path.stat()
        remember_verified(path, st)
        return path

    def add_file(self, src: Path, digest: str) -> Path:
        """Copy a local file whose sha256 is ``digest`` into the cache (no-op when present)."""
        present = self.cached(digest)
        if present is not None:
            return present
        tmp = self.tmp_dir() / f"{digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
        try:
            with src.open("rb") as fin, self.writing(f"copying {src}"), tmp.open("wb") as fout:
                h = hashlib.sha256()
                while chunk := fin.read(1 << 22):
                    h.update(chunk)
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())
            if h.hexdigest() != digest:
                raise ValueError(f"{src}: content changed while it was being cached")
            return self._install(tmp, digest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def put_bytes(self, data: bytes) -> str:
        """Store a small blob; returns its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        if self.path_of(digest).exists():
            return digest
        tmp = self.tmp_dir() / f"{digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
        try:
            with self.writing("storing metadata"), tmp.open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            self._install(tmp, digest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return digest

    def write_pointer(self, path: Path, digest: str) -> None:
        """Atomically make the small file ``path`` name ``digest``."""
        try:
            if path.read_text() == digest:
                return
        except (FileNotFoundError, UnicodeDecodeError, NotADirectoryError):
            pass
        with self.writing("storing a metadata pointer"):
            write_atomic(path, digest.encode())

    def object_lock(self, digest: str) -> contextlib.AbstractContextManager[None]:
        """The advisory lock of ``digest``: processes of one host fetch an object once."""
        return self._lock(digest)

    def _open_lock_file(self, digest: str) -> int:
        """An open descriptor of the lock file of ``digest``'s stripe (created if missing)."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        return os.open(locks / f"{digest[:3]}.lock", os.O_RDWR | os.O_CREAT, 0o666)

    @contextlib.contextmanager
    def _try_lock(self, digest: str) -> Iterator[bool]:
        """Hold the lock of ``digest``'s stripe if it is free now (yields whether it is held;
        False where locks are unsupported or the folder is gone: the caller then leaves the
        object alone)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield False
            return
        try:
            fd = self._open_lock_file(digest)
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _lock(self, digest: str) -> Iterator[None]:
        """Hold the advisory lock of ``digest``'s stripe (best effort: none where unsupported)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        with self.writing("creating a lock file"):
            fd = self._open_lock_file(digest)
        try:
            # ENOLCK on an NFS mount without a lock manager: go on unlocked (still correct,
            # the object may just be downloaded twice).
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            # Unlock explicitly: a process forked while this lock was held (a DataLoader worker
            # started during a background download) keeps a duplicate of ``fd``, and a flock is
            # released by closing only once every duplicate is closed.
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class MetadataCache:
    """Which cached object holds each metadata file (or listing) of one remote catalog."""

    def __init__(self, cache: ObjectCache, url: str) -> None:
        self.cache = cache
        self.dir = cache.root / "meta" / hashlib.sha256(url.encode()).hexdigest()[:16]

    def _pointer(self, space: str, name: str) -> Path:
        key = "/".join([space, *(name.strip("/").split("/") if name.strip("/") else [])])
        if space == "lists":
            key += "/@ref"
        return path_under(self.dir, key, what=f"metadata cache {self.dir}")

    def get(self, space: str, name: str) -> bytes | None:
        """The last content stored for ``name`` in ``space`` (``"keys"`` or ``"lists"``)."""
        try:
            digest = self._pointer(space, name).read_text()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, UnicodeDecodeError):
            return None
        return self.cache.read_bytes(digest) if is_digest(digest) else None

    def has_in_any_space(self, name: str) -> bool:
        """True when some ``keys@…`` space of this catalog URL holds ``name`` (an immutable file
        cached under the catalog's identity; without knowing which identity is current)."""
        try:
            spaces = [p.name for p in self.dir.iterdir() if p.name.startswith("keys@")]
        except (FileNotFoundError, NotADirectoryError):
            return False
        return any(self._pointer(space, name).is_file() for space in spaces)

    def put(self, space: str, name: str, data: bytes) -> None:
        digest = self.cache.put_bytes(data)
        self.cache.write_pointer(self._pointer(space, name), digest)


def _sweep_stale_parts(tmp: Path) -> int:
    """Remove downloads left by killed processes: a ``.part`` untouched for a day, or for a
    minute when the process named in it (``DIGEST.PID.RANDOM.part``) no longer runs here."""
    now = time.time()
    swept = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(tmp):
            if entry.name.endswith(".part"):
                with contextlib.suppress(OSError):
                    age = now - entry.stat().st_mtime
                    if age > STALE_PART_S or (age > DEAD_WRITER_PART_S
                                              and not _writer_alive(entry.name)):
                        os.unlink(entry.path)
                        swept += 1
    return swept


def _sweep_stale_sparse(sparse: Path,
                        try_lock: Callable[[str], contextlib.AbstractContextManager[bool]]) -> int:
    """Remove sparse downloads (data file and record) untouched for :data:`STALE_PART_S` whose
    object lock is free; names that are not a digest (with or without the record's suffix) are
    left alone."""
    try:
        names = os.listdir(sparse)
    except OSError:
        return 0
    digests = sorted({n.removesuffix(BLOCKS_SUFFIX) for n in names
                      if is_digest(n.removesuffix(BLOCKS_SUFFIX))})
    swept = 0
    for digest in digests:
        files = [sparse / digest, sparse / f"{digest}{BLOCKS_SUFFIX}"]
        if not _untouched_for(files, STALE_PART_S):
            continue
        with try_lock(digest) as held:
            # Checked again under the lock: a fetch may have resumed it meanwhile.
            if not held or not _untouched_for(files, STALE_PART_S):
                continue
            for path in files:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    swept += 1
    return swept


def _untouched_for(paths: list[Path], age_s: float) -> bool:
    """True when none of the existing ``paths`` was modified in the last ``age_s`` seconds."""
    now = time.time()
    for path in paths:
        try:
            if now - path.stat().st_mtime <= age_s:
                return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def _writer_alive(part_name: str) -> bool:
    """Whether the process whose id a ``.part`` name carries still runs (unknown: alive)."""
    fields = part_name.split(".")
    if len(fields) != 4 or not fields[1].isdigit():
        return True
    try:
        os.kill(int(fields[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True
