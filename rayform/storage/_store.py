"""The storage interface of a catalog: a key/value view of a directory or an object store.

Keys are ``/``-separated paths relative to the catalog root. Data objects are immutable and named by
their sha256 (``objects/ab/abcdef…``); metadata snapshots are created exclusively (a second writer
of the same key loses and retries), so a crash never leaves a half-written file visible.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rayform._digest import is_digest, require_digest
from rayform.errors import ObjectMissingError, ReadOnlyCatalogError

if TYPE_CHECKING:
    from rayform.storage._inventory import StoredObject

_T = TypeVar("_T")

OBJECTS_PREFIX = "objects"
STAGING_DIR = ".staging"


def object_key(digest: str) -> str:
    """The key of a content-addressed object.

    Raises:
        CorruptMetadataError: ``digest`` is not 64 lowercase hex characters.
    """
    require_digest(digest, what="object key")
    return f"{OBJECTS_PREFIX}/{digest[:2]}/{digest}"


def digest_of_key(key: str) -> str | None:
    """The digest of an object key ``objects/ab/<digest>`` (the inverse of :func:`object_key`);
    None for any other key."""
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != OBJECTS_PREFIX:
        return None
    prefix, name = parts[1], parts[2]
    if not is_digest(name) or name[:2] != prefix:
        return None
    return name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class Store(ABC):
    """Where a catalog's bytes live."""

    url: str
    read_only: bool = False

    @abstractmethod
    def read_bytes(self, key: str) -> bytes:
        """Read a whole (small) file. Raises ``FileNotFoundError`` when absent."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list_names(self, prefix: str) -> list[str]:
        """Names directly below ``prefix`` (files and folders), sorted; empty if none."""

    @abstractmethod
    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Atomically create ``key`` with ``data``; False (and nothing written) if it exists."""

    @abstractmethod
    def put_object(self, src: Path) -> tuple[str, int]:
        """Copy ``src`` into the object store under its sha256; returns (digest, size)."""

    def put_object_bytes(self, data: bytes) -> tuple[str, int]:
        """Store ``data`` (a small object made in memory) under its sha256; returns (digest,
        size). The default stores a staging file of it with :meth:`put_object`."""
        import shutil

        staging = self.staging_dir()
        try:
            path = staging / "object"
            path.write_bytes(data)
            return self.put_object(path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def folder_syncs_deferred(self, pending: set[str]) -> AbstractContextManager[None]:
        """Within it, on the calling thread, the objects stored are made durable except for their
        names: a local store adds each object's folder to ``pending`` instead of fsyncing it,
        so that many objects in one folder cost one fsync. The caller must call
        :meth:`sync_folders` on ``pending`` before anything may name those objects. Stores
        without folders have nothing to defer."""
        return nullcontext()

    def sync_folders(self, pending: set[str]) -> None:
        """Make durable the names of the objects stored while deferring into ``pending``."""
        return None

    def put_own_object(self, src: Path, *, sha256: str) -> tuple[str, int]:
        """Store a file the caller wrote and gives up (it may be gone afterwards), whose sha256
        it computed while writing it; returns (digest, size). A local store moves the file into
        place instead of copying and hashing it again; other stores copy as :meth:`put_object`."""
        return self.put_object(src)

    def keep_object(self, digest: str) -> bool:
        """True when the object is stored, marking it as in use where the store can (a local
        catalog renews its time, so a concurrent garbage collection keeps it)."""
        return self.exists(object_key(digest))

    def prefetch(self, digests: Iterable[str], *, first: bool = False) -> None:
        """Hint that the objects ``digests`` will be read soon, in this order (a remote store
        downloads them in the background, bounded; a local one has nothing to do); ``first``:
        before whatever earlier hints announced (they are needed sooner)."""
        return None

    def note_block_hashes(self, lists: Mapping[str, str]) -> None:
        """Remember the block-hash object of each object in ``lists`` (object digest -> block-hash
        object digest, read from trusted metadata): a remote store then reads those objects
        block by block, each block verified on arrival; a local one reads files whole anyway."""
        return None

    def prefetch_metadata(self, keys: Iterable[str]) -> None:
        """Hint that the metadata files ``keys`` will be read next (a remote store requests them
        at once, so that reads one after another cost one round trip; a local one does nothing)."""
        return None

    @abstractmethod
    def object_path(self, digest: str) -> Path:
        """A local, read-only path of the object's bytes (fetched into the cache if remote)."""

    def read_object(self, digest: str, read: Callable[[Path], _T]) -> _T:
        """``read(path)`` of the object's local path. A file that vanishes between being found
        and being opened (a cache cleaned while in use) is fetched once more.

        Raises:
            ObjectMissingError: the object is missing, or vanished again after the refetch.
        """
        try:
            return read(self.object_path(digest))
        except ObjectMissingError:
            raise
        except FileNotFoundError:
            pass
        try:
            return read(self.object_path(digest))
        except ObjectMissingError:
            raise
        except FileNotFoundError as err:
            raise ObjectMissingError(
                f"object {digest} of catalog {self.url} vanished while being read, twice (it was "
                f"fetched again in between): {err}; something is deleting the cache or the "
                "catalog's objects — stop it and retry"
            ) from err

    def stored_objects(self) -> list[StoredObject]:
        """Every object the store holds (an inventory for ``gc``: keys of any other shape below
        ``objects/`` are skipped), sorted by digest.

        Raises:
            ReadOnlyCatalogError: a store that cannot be listed and written (HTTPS).
        """
        raise ReadOnlyCatalogError(f"catalog {self.url} cannot be garbage-collected: it is "
                                   "read-only here; run gc where it can be written")

    def stored_object(self, digest: str) -> StoredObject | None:
        """The object ``digest`` as stored now (None when absent): checked just before a delete."""
        raise ReadOnlyCatalogError(f"catalog {self.url} is read-only")

    def delete_object(self, digest: str) -> None:
        """Remove the object ``digest`` (absent: nothing to do); for ``gc`` only."""
        raise ReadOnlyCatalogError(f"catalog {self.url} is read-only")

    def sweep_leftovers(self, *, grace_s: float, dry_run: bool) -> int:
        """Remove what killed writers left outside ``objects/`` (a local catalog's ``.staging``
        entries, an S3 catalog's conditional-write probe keys) once older than ``grace_s``;
        returns how many (would have been, with ``dry_run``) removed."""
        raise ReadOnlyCatalogError(f"catalog {self.url} is read-only")

    @abstractmethod
    def staging_dir(self) -> Path:
        """A fresh local folder for temporary files of one operation (caller removes it)."""
