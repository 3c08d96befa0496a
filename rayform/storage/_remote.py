"""Remote catalogs (``s3://bucket/prefix``, ``https://host/prefix``) behind the ``Store`` interface.

A :class:`RemoteStore` adds to a :class:`Transport` (the protocol: S3 or HTTPS) everything the two
share: the local content-addressed cache (data objects are fetched on demand, verified, and read
from disk afterwards), retries with backoff, offline mode (``RAYFORM_OFFLINE=1``), and metadata
caching. An object whose block hashes the metadata names (:meth:`RemoteStore.note_block_hashes`)
is fetched as ranged reads verified block by block (:mod:`rayform.storage._sparse`) when it is
large (:attr:`PartPlan.blocks_from_bytes`, told by the reply to its first GET); a smaller one, and
any other object, is fetched and hashed whole. Snapshot and slice files are immutable, so once
cached they are never fetched again; ``catalog.json``, entry files and listings are fetched on
every open while online, and the last copy seen serves offline use. ``catalog.json`` is fetched
once per store: the store's cache namespace is that copy's hash, so the store trusts it for its
life; a new store (every ``Catalog.open``) fetches it afresh.
"""

from __future__ import annotations

import hashlib
import io
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path

from rayform._digest import require_digest
from rayform._paths import component_problem
from rayform.errors import (
    CacheError,
    CorruptMetadataError,
    IntegrityError,
    OfflineError,
    ReadOnlyCatalogError,
    RemoteError,
)
from rayform.storage._block_hashes import BlockHashes
from rayform.storage._cache import (
    DigestMismatchError,
    MetadataCache,
    ObjectCache,
    Sink,
    is_offline,
)
from rayform.storage._early import EarlyReads
from rayform.storage._inventory import ListedKey, StoredObject
from rayform.storage._parts import PartPlan, RangeReply, download_in_parts
from rayform.storage._prefetch import ObjectPrefetcher
from rayform.storage._retry import RetryPolicy
from rayform.storage._sparse import (
    BlockMismatchError,
    fetch_blocks,
    fetch_blocks_locked,
    release_thread,
    sparse_paths,
)
from rayform.storage._store import OBJECTS_PREFIX, Store, digest_of_key, object_key, sha256_file

CATALOG_FILE = "catalog.json"
PROBE_PREFIX = ".rayform-probe-"  # hidden keys a writer probes the server with, then deletes
RENEW_AFTER_S = 3600.0  # a writer reusing an object older than this stores it again (for gc)
_IMMUTABLE_KEYS = (
    re.compile(r"^entries/[^/]+/versions/\d+\.json$"),
    re.compile(r"^slices/slc_[0-9a-f]+\.json$"),
)


def is_immutable_key(key: str) -> bool:
    """Metadata files that never change once written (safe to serve from cache while online)."""
    return any(p.match(key) for p in _IMMUTABLE_KEYS)


class Transport(ABC):
    """One protocol's requests. Raises ``FileNotFoundError`` for a missing key,
    :class:`~rayform.storage._retry.TransientError` when a retry may help, and
    :class:`~rayform.errors.RemoteError` otherwise."""

    url: str
    writable: bool
    ranged: bool = False  # implements open_range: large objects come in concurrent parts

    def get(self, key: str) -> bytes:
        """The whole content of a small file (through :meth:`download`)."""
        buffer = io.BytesIO()
        self.download(key, buffer)
        return buffer.getvalue()

    @abstractmethod
    def download(self, key: str, sink: Sink) -> None:
        """Stream a file's content into ``sink``; a short body raises ``TransientError``."""

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply:
        """Start a GET of bytes ``[start, stop)`` of ``key``, or of all of it when ``stop`` is
        None (where :attr:`ranged`); see :class:`~rayform.storage._parts.RangeReply`."""
        raise NotImplementedError(f"{type(self).__name__} has no ranged GETs")

    @abstractmethod
    def list_names(self, prefix: str) -> list[str]:
        """Names directly below ``prefix`` (empty if none)."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    def put_exclusive(self, key: str, data: bytes) -> bool:
        """Create ``key`` unless it exists; False when it does."""
        raise ReadOnlyCatalogError(f"{self.url} is read-only")

    def upload(self, key: str, src: Path) -> None:
        """Store the local file ``src`` under ``key`` (overwriting is harmless: same content)."""
        raise ReadOnlyCatalogError(f"{self.url} is read-only")

    def stat(self, key: str) -> ListedKey | None:
        """``key`` as stored now (None when absent). A transport that cannot tell a key's age
        reports 0 s (it is never garbage-collected: such stores are read-only)."""
        if not self.exists(key):
            return None
        return ListedKey(key=key, size_bytes=-1, age_s=0.0, stamp="")

    def list_keys(self, prefix: str) -> list[ListedKey]:
        """Every key starting with ``prefix`` (at any depth), with its size and age."""
        raise ReadOnlyCatalogError(f"{self.url} cannot be listed with ages (read-only)")

    def delete(self, key: str) -> None:
        """Remove ``key`` (absent: nothing to do)."""
        raise ReadOnlyCatalogError(f"{self.url} is read-only")


class RemoteStore(Store):
    """A catalog on an object store or web server, read through the local cache."""

    def __init__(self, transport: Transport, *, cache: ObjectCache | None = None,
                 retry: RetryPolicy | None = None, offline: bool = False,
                 parts: PartPlan | None = None) -> None:
        """A remote catalog's store; ``offline`` forbids the network whatever
        ``RAYFORM_OFFLINE`` says (see :meth:`offline_view`); ``parts``: how a transport with
        ranged GETs splits large objects (:class:`~rayform.storage._parts.PartPlan`)."""
        self.transport = transport
        self.offline = offline
        self.url = transport.url
        self.read_only = not transport.writable
        self.cache = cache if cache is not None else ObjectCache()
        self.retry = retry if retry is not None else RetryPolicy.from_env()
        self.parts = parts if parts is not None else PartPlan()
        self.meta = MetadataCache(self.cache, self.url)
        self._namespace: str | None = None
        self._catalog_json: bytes | None = None  # the copy this store opened (online reads)
        self._prefetcher: ObjectPrefetcher | None = None
        self._early = EarlyReads(self._get)
        self._block_lists: dict[str, str] = {}  # object -> its block-hash object
        self._block_hashes: dict[str, BlockHashes] = {}  # block-hash object -> parsed

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, cache={str(self.cache.root)!r})"

    # ------------------------------------------------------------------------- offline
    def is_offline(self) -> bool:
        """True when this store may not use the network (``offline`` or ``RAYFORM_OFFLINE``)."""
        return self.offline or is_offline()

    def offline_view(self) -> RemoteStore:
        """The same catalog and cache, read as an offline process would (what ``rayform pull``
        checks before it reports success)."""
        return RemoteStore(self.transport, cache=self.cache, retry=self.retry, offline=True,
                           parts=self.parts)

    def _offline(self, what: str) -> OfflineError:
        return OfflineError(
            f"RAYFORM_OFFLINE=1 forbids network access and {what} of catalog {self.url} is not "
            f"in the local cache {self.cache.root}; prefetch it while online with "
            "`rayform pull slc_…` (the slice you read), or unset RAYFORM_OFFLINE"
        )

    # ----------------------------------------------------------------------- metadata
    def _space(self, key: str) -> str:
        """Cache namespace of a key: immutable files are scoped to the catalog's identity (the
        hash of its ``catalog.json``), so a catalog recreated at the same URL never reads stale
        snapshots."""
        if not is_immutable_key(key):
            return "keys"
        if self._namespace is None:
            self._namespace = hashlib.sha256(self.read_bytes(CATALOG_FILE)).hexdigest()[:16]
        return f"keys@{self._namespace}"

    def read_bytes(self, key: str) -> bytes:
        if key == CATALOG_FILE and self._catalog_json is not None and not self.is_offline():
            # Read once per store: its namespace is that copy's hash. Kept on disk for offline
            # use all the same (a cache cleaner may have removed it meanwhile).
            if self.meta.get("keys", key) != self._catalog_json:
                self._remember("keys", key, self._catalog_json)
            return self._catalog_json
        data = self._read_metadata(key)
        if key == CATALOG_FILE:
            if not self.is_offline():
                self._catalog_json = data
            if self._namespace is None:
                # The copy that opened the catalog names its namespace: one request fewer per
                # open, and immutable files are scoped to the catalog this store actually read.
                self._namespace = hashlib.sha256(data).hexdigest()[:16]
        return data

    def _read_metadata(self, key: str) -> bytes:
        space = self._space(key)
        early = self._early.take(key)
        if is_immutable_key(key):
            cached = self.meta.get(space, key)
            if cached is not None:
                return cached
        if self.is_offline():
            cached = self.meta.get(space, key)
            if cached is None:
                raise self._offline(f"metadata file {key!r}")
            return cached
        data = early.result() if early is not None else self._get(key)
        self._remember(space, key, data)
        return data

    def _get(self, key: str) -> bytes:
        return self.retry.run(lambda: self.transport.get(key), what=f"GET {self.url}/{key}")

    def prefetch_metadata(self, keys: Iterable[str]) -> None:
        """Request the metadata files ``keys`` at once in the background: the next read of each
        takes that response (see :class:`~rayform.storage._early.EarlyReads`). An immutable file
        this catalog's cache already holds is skipped; nothing offline."""
        if self.is_offline():
            return
        self._early.start(k for k in keys
                          if not (k == CATALOG_FILE and self._catalog_json is not None)
                          and not (is_immutable_key(k) and self.meta.has_in_any_space(k)))

    def _remember(self, space: str, key: str, data: bytes) -> None:
        """Cache a metadata file for offline use; a cache folder deleted meanwhile is recreated
        once (a second failure is a :class:`CacheError`, never a missing remote file)."""
        try:
            self.meta.put(space, key, data)
        except CacheError:
            self.meta.put(space, key, data)

    def exists(self, key: str) -> bool:
        if self.is_offline():
            if self.meta.get(self._space(key), key) is not None:
                return True
            raise self._offline(f"{key!r}")
        return self.retry.run(lambda: self.transport.exists(key), what=f"HEAD {self.url}/{key}")

    def list_names(self, prefix: str) -> list[str]:
        if self.is_offline():
            cached = self.meta.get("lists", prefix)
            if cached is None:
                raise self._offline(f"the listing of {prefix or '/'!r}")
            return self._checked_names(prefix, [n for n in cached.decode().split("\n") if n])
        names = self._checked_names(prefix, self.retry.run(
            lambda: self.transport.list_names(prefix), what=f"list {self.url}/{prefix}"))
        self._remember("lists", prefix, "\n".join(names).encode())
        return names

    def _checked_names(self, prefix: str, names: list[str]) -> list[str]:
        """The listed names, each a single safe path component (listings are untrusted)."""
        for name in names:
            problem = component_problem(name)
            if problem is not None:
                raise CorruptMetadataError(
                    f"listing of {self.url}/{prefix}: name {name[:80]!r} {problem}; the catalog "
                    "is damaged or crafted — refusing to read it"
                )
        return sorted(names)

    # --------------------------------------------------------------------------- writes
    def _require_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyCatalogError(
                f"catalog {self.url} is read-only ({what}); write into a local or s3:// catalog"
            )
        if self.is_offline():
            raise OfflineError(f"RAYFORM_OFFLINE=1 forbids {what} in catalog {self.url}; unset it")

    def create_exclusive(self, key: str, data: bytes) -> bool:
        self._require_writable(f"creating {key!r}")
        created = self.retry.run(lambda: self.transport.put_exclusive(key, data),
                                 what=f"PUT {self.url}/{key}")
        if created:
            self._remember(self._space(key), key, data)
        return created

    def put_object(self, src: Path) -> tuple[str, int]:
        self._require_writable(f"storing {src}")
        digest = sha256_file(src)
        size = src.stat().st_size
        key = object_key(digest)
        if not self.keep_object(digest):  # absent, or old enough to be renewed by a new PUT
            self.retry.run(lambda: self.transport.upload(key, src), what=f"PUT {self.url}/{key}")
        self.cache.add_file(src, digest)  # reading it back later needs no download
        return digest, size

    def keep_object(self, digest: str) -> bool:
        """True when the object is stored and was written less than :data:`RENEW_AFTER_S` ago.
        An older one is reported absent, so that the writer stores it again: the new ``PUT``
        (same bytes) renews its time on the server, and a concurrent ``gc`` keeps it."""
        key = object_key(digest)
        found = self.retry.run(lambda: self.transport.stat(key), what=f"HEAD {self.url}/{key}")
        return found is not None and found.age_s < RENEW_AFTER_S

    # ------------------------------------------------------------------------------ gc
    def stored_objects(self) -> list[StoredObject]:
        self._require_writable("garbage collection")
        listed = self.retry.run(lambda: self.transport.list_keys(f"{OBJECTS_PREFIX}/"),
                                what=f"list {self.url}/{OBJECTS_PREFIX}/")
        out = [_stored(digest, item) for item in listed
               if (digest := digest_of_key(item.key)) is not None]
        return sorted(out, key=lambda o: o.digest)

    def stored_object(self, digest: str) -> StoredObject | None:
        key = object_key(digest)
        found = self.retry.run(lambda: self.transport.stat(key), what=f"HEAD {self.url}/{key}")
        return None if found is None else _stored(digest, found)

    def delete_object(self, digest: str) -> None:
        self._require_writable(f"deleting object {digest}")
        self._delete(object_key(digest))

    def _delete(self, key: str) -> None:
        self.retry.run(lambda: self.transport.delete(key), what=f"DELETE {self.url}/{key}")

    def sweep_leftovers(self, *, grace_s: float, dry_run: bool) -> int:
        self._require_writable("garbage collection")
        listed = self.retry.run(lambda: self.transport.list_keys(PROBE_PREFIX),
                                what=f"list {self.url}/{PROBE_PREFIX}*")
        swept = 0
        for item in listed:
            if "/" in item.key or item.age_s < grace_s:
                continue
            if not dry_run:
                self._delete(item.key)
            swept += 1
        return swept

    # ----------------------------------------------------------------------------- data
    def object_path(self, digest: str) -> Path:
        if self._prefetcher is not None:
            self._prefetcher.claimed(digest)
        cached = self.cache.cached(digest)
        if cached is not None:
            return cached
        if self.is_offline():
            raise self._offline(f"object {digest}")
        try:
            return self._download(digest)
        except CacheError:  # the cache folder was removed mid-download: once more
            return self._download(digest)

    def prefetch(self, digests: Iterable[str], *, first: bool = False) -> None:
        """Start downloading ``digests`` into the cache in the background (see
        :class:`~rayform.storage._prefetch.ObjectPrefetcher` for the bounds), ahead of earlier
        hints when ``first``; nothing offline."""
        if self.is_offline():
            return
        if self._prefetcher is None:
            self._prefetcher = ObjectPrefetcher(self._download,
                                               lambda d: self.cache.path_of(d).exists())
        self._prefetcher.announce(digests, first=first)

    def note_block_hashes(self, lists: Mapping[str, str]) -> None:
        """Remember which objects have block hashes (from trusted metadata): they are fetched as
        ranged reads verified block by block (see :mod:`rayform.storage._sparse`)."""
        for digest, blocks in lists.items():
            require_digest(digest, what="object with block hashes")
            require_digest(blocks, what=f"block-hash object of {digest}")
            self._block_lists[digest] = blocks

    def _hashes_of(self, blocks: str) -> BlockHashes:
        """The parsed block-hash object ``blocks`` (fetched whole and checked against its name)."""
        hashes = self._block_hashes.get(blocks)
        if hashes is None:
            path = self._download(blocks)
            with self.cache.writing(f"reading block-hash object {blocks}"):  # a cleaner may race
                data = path.read_bytes()
            hashes = BlockHashes.from_bytes(data, source=f"{self.url}/{object_key(blocks)}")
            self._block_hashes[blocks] = hashes
        return hashes

    def _hashes_soon(self, blocks: str) -> Future[BlockHashes]:
        """:meth:`_hashes_of` on a thread of its own (a fresh block download's first ranged GET
        goes out meanwhile), or at once when known."""
        future: Future[BlockHashes] = Future()
        known = self._block_hashes.get(blocks)
        if known is not None:
            future.set_result(known)
            return future

        def run() -> None:
            try:
                future.set_result(self._hashes_of(blocks))
            except BaseException as err:  # raised by the download that waits on it
                future.set_exception(err)
            finally:
                release_thread(self.transport)

        threading.Thread(target=run, daemon=True, name="rayform-block-list").start()
        return future

    def _download(self, digest: str) -> Path:
        """One verified download into the cache (for :meth:`object_path` and read-ahead)."""
        key = object_key(digest)
        what = f"download {self.url}/{key}"
        blocks = self._block_lists.get(digest)
        if not self.transport.ranged:
            return self.cache.fetch(digest, lambda sink: self.transport.download(key, sink),
                                    retry=self.retry, what=what)
        if blocks is None:
            return self.cache.fetch_into(digest, self._whole_fill(key, None), retry=self.retry,
                                         what=what)
        if self.parts.blocks_from_bytes <= 0:
            return self._fetch_blocks(digest, blocks, key, what, first=None)
        path = self.cache.cached(digest)
        if path is not None:
            return path
        self.cache.sweep_on_first_fetch()  # before taking the lock: the sweep skips locked ones
        with self.cache.object_lock(digest):  # one request for the object, even when raced
            path = self.cache.cached(digest)
            if path is not None:
                return path
            first = None
            if not sparse_paths(self.cache, digest)[1].exists():
                # Nothing to resume: the reply to a plain GET tells the size, which picks the
                # way. A small object costs one request fetched whole; block by block, two.
                first = self.retry.run(lambda: self.transport.open_range(key, 0, None),
                                       what=what)
                if (first.total_bytes is not None
                        and first.total_bytes < self.parts.blocks_from_bytes):
                    return self._fetch_whole(digest, blocks, key, what, first=first)
            return self._fetch_blocks(digest, blocks, key, what, first=first, locked=True)

    def _whole_fill(self, key: str, first: RangeReply | None) -> Callable[[int], tuple[str, int, int]]:
        """A fill for :meth:`ObjectCache.fetch_into`: ``key`` in ranged parts when large, hashed
        whole; ``first``: the reply to its plain GET, taken by the first attempt."""
        held = [first] if first is not None else []

        def fill(fd: int) -> tuple[str, int, int]:
            return download_in_parts(self.transport, key, fd, plan=self.parts,
                                     writing=self.cache.writing,
                                     first=held.pop() if held else None)

        return fill

    def _fetch_whole(self, digest: str, blocks: str, key: str, what: str, *,
                     first: RangeReply) -> Path:
        """A small object with block hashes, fetched and hashed whole (object lock held)."""
        try:
            return self.cache.fill_locked(digest, self._whole_fill(key, first), retry=self.retry,
                                          what=what)
        except RemoteError as err:
            if isinstance(err.__cause__, DigestMismatchError):
                raise self._altered(digest, blocks, err.__cause__) from err
            raise

    def _fetch_blocks(self, digest: str, blocks: str, key: str, what: str, *,
                      first: RangeReply | None, locked: bool = False) -> Path:
        """A large object, fetched block by block (see :mod:`rayform.storage._sparse`);
        ``locked``: the caller holds its object lock."""
        hashes = self._hashes_soon(blocks)
        try:
            if locked:
                path = fetch_blocks_locked(self.cache, digest, hashes.result, self.transport, key,
                                           plan=self.parts, retry=self.retry, what=what,
                                           first=first)
            else:
                path = fetch_blocks(self.cache, digest, hashes.result, self.transport, key,
                                    plan=self.parts, retry=self.retry, what=what)
            self._block_hashes.pop(blocks, None)  # needed again only to fetch it again
            return path
        except RemoteError as err:
            if isinstance(err.__cause__, BlockMismatchError):
                raise self._altered(digest, blocks, err.__cause__) from err
            raise

    def _altered(self, digest: str, blocks: str, cause: Exception) -> IntegrityError:
        return IntegrityError(
            f"object {digest} of catalog {self.url} does not match the hashes its metadata "
            f"names (its sha256; block hashes {object_key(blocks)}): {cause}; no byte of it was "
            "used. The object was altered on the server (or every attempt was corrupted in "
            f"transit): restore it from a good copy; `rayform check {self.url}` lists damaged "
            "objects"
        )

    def is_cached(self, digest: str) -> bool:
        """True when ``digest`` is in the local cache (verified)."""
        return self.cache.cached(digest) is not None

    def staging_dir(self) -> Path:
        return self.cache.staging_dir()


def _stored(digest: str, item: ListedKey) -> StoredObject:
    return StoredObject(digest=digest, size_bytes=item.size_bytes, age_s=item.age_s,
                        stamp=item.stamp)
