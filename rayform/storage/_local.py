"""Local catalogs: a directory on a local or shared (NFS) filesystem behind the ``Store`` interface.

Durability: an object's bytes and its name are fsynced before :meth:`LocalStore.put_object`
(or :meth:`LocalStore.put_own_object`, which moves a file the caller wrote into place) returns
(its name, within :meth:`LocalStore.folder_syncs_deferred`, when the caller's
:meth:`LocalStore.sync_folders` returns: one fsync a folder for a registration's many objects),
and a metadata file's bytes before its exclusive link and its folder after it, so a commit (a
snapshot naming objects) that :meth:`~LocalStore.create_exclusive` reports survives a power loss
together with everything it names.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rayform._atomic import fsync_dir, fsync_file, make_dirs_durable
from rayform._digest import is_digest
from rayform._local_writes import naming_full_disk
from rayform._paths import path_under
from rayform.errors import ObjectMissingError
from rayform.storage._hashcopy import copy_hashed
from rayform.storage._inventory import StoredObject
from rayform.storage._listing import LocalListings
from rayform.storage._store import OBJECTS_PREFIX, STAGING_DIR, Store, object_key

_SYNC_THREADS = 4


def write_durably(path: Path, data: bytes) -> None:
    """Write a new file of ``data`` and fsync it."""
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


class LocalStore(Store):
    """A catalog that is a directory on a local or shared (NFS) filesystem."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.url = str(self.root)
        self._deferring = threading.local()  # .pending: folders to fsync later, this thread

    def _path(self, key: str) -> Path:
        return path_under(self.root, key, what=f"catalog {self.url}")

    def read_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def list_names(self, prefix: str) -> list[str]:
        try:
            return sorted(os.listdir(self._path(prefix)))
        except FileNotFoundError:
            return []

    def create_exclusive(self, key: str, data: bytes) -> bool:
        with naming_full_disk(self.root, what=f"writing {key} into catalog {self.url}"):
            return self._create_exclusive(key, data)

    def _create_exclusive(self, key: str, data: bytes) -> bool:
        dest = self._path(key)
        make_dirs_durable(dest.parent, root=self.root)
        # The temporary file lives in the staging folder, so a writer killed before the link
        # leaves no stray file next to the metadata (only invisible garbage in .staging).
        staging = self.root / STAGING_DIR
        staging.mkdir(exist_ok=True)
        tmp = staging / f"{dest.name}.{uuid.uuid4().hex}.tmp"
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, dest)  # atomic, fails if dest exists: the commit point
            created = True
        except FileExistsError:
            created = False
        finally:
            tmp.unlink()
        if created:
            fsync_dir(dest.parent)  # the commit survives a power loss once this returns
        # Listing files let a static HTTPS server publish this directory as a catalog. They are
        # refreshed after a lost race too: a writer killed between its link and its refresh
        # left them stale, and the next write there repairs them.
        LocalListings(self.root).refresh_above(key)
        return created

    def put_object(self, src: Path) -> tuple[str, int]:
        with naming_full_disk(self.root, what=f"storing {src} in catalog {self.url}"):
            return self._put_object(src)

    def _put_object(self, src: Path) -> tuple[str, int]:
        staging = self.root / STAGING_DIR
        staging.mkdir(exist_ok=True)
        tmp = staging / f"object.{uuid.uuid4().hex}.tmp"
        try:
            digest, size = copy_hashed(src, tmp)
            dest = self._path(object_key(digest))
            if not self.keep_object(digest):  # (present: now marked in use for a gc)
                # Durable before any snapshot can name it: bytes, then the name in its folder.
                fsync_file(tmp)
                os.chmod(tmp, 0o444)
                self._place(tmp, dest)
            return digest, size
        finally:
            tmp.unlink(missing_ok=True)

    def put_object_bytes(self, data: bytes) -> tuple[str, int]:
        with naming_full_disk(self.root, what=f"storing an object in catalog {self.url}"):
            digest = hashlib.sha256(data).hexdigest()
            if self.keep_object(digest):
                return digest, len(data)
            staging = self.root / STAGING_DIR
            staging.mkdir(exist_ok=True)
            tmp = staging / f"object.{uuid.uuid4().hex}.tmp"
            try:
                write_durably(tmp, data)  # durable before any snapshot can name it
                os.chmod(tmp, 0o444)
                self._place(tmp, self._path(object_key(digest)))
            finally:
                tmp.unlink(missing_ok=True)
            return digest, len(data)

    def _place(self, tmp: Path, dest: Path) -> None:
        """Move a durable file into its object name, the name made durable in its folder (or
        that folder noted, see :meth:`folder_syncs_deferred`)."""
        try:
            os.replace(tmp, dest)
        except FileNotFoundError:  # first object under this prefix
            make_dirs_durable(dest.parent, root=self.root)
            os.replace(tmp, dest)
        self._sync_name(dest)

    def _sync_name(self, dest: Path) -> None:
        pending: set[str] | None = getattr(self._deferring, "pending", None)
        if pending is None:
            fsync_dir(dest.parent)
        else:
            pending.add(os.fspath(dest.parent))

    @contextlib.contextmanager
    def folder_syncs_deferred(self, pending: set[str]) -> Iterator[None]:
        outer = getattr(self._deferring, "pending", None)
        self._deferring.pending = pending
        try:
            yield
        finally:
            self._deferring.pending = outer

    def sync_folders(self, pending: set[str]) -> None:
        folders = [Path(folder) for folder in sorted(pending)]
        if len(folders) <= 1:
            for folder in folders:
                fsync_dir(folder)
            return
        # Concurrent fsyncs share the filesystem's journal commits.
        with ThreadPoolExecutor(max_workers=_SYNC_THREADS, thread_name_prefix="rayform-sync") as pool:
            list(pool.map(fsync_dir, folders))

    def put_own_object(self, src: Path, *, sha256: str) -> tuple[str, int]:
        with naming_full_disk(self.root, what=f"storing {src} in catalog {self.url}"):
            dest = self._path(object_key(sha256))
            size = src.stat().st_size
            if self.keep_object(sha256):
                return sha256, size
            fsync_file(src)  # durable before any snapshot can name it, as in put_object
            os.utime(src)  # its age counts from now, as a copy's would (gc's grace period)
            os.chmod(src, 0o444)
            try:
                try:
                    os.replace(src, dest)
                except FileNotFoundError:  # first object under this prefix
                    make_dirs_durable(dest.parent, root=self.root)
                    os.replace(src, dest)
            except OSError:  # another filesystem (a staging folder elsewhere): copy
                os.chmod(src, 0o644)
                return self._put_object(src)
            self._sync_name(dest)
            return sha256, size

    def keep_object(self, digest: str) -> bool:
        """True when the object is stored; its modification time is renewed, so that a
        concurrent ``gc_catalog`` treats it as new (within its grace period) until the commit
        that reuses it lands."""
        path = self._path(object_key(digest))
        try:
            os.utime(path)
        except FileNotFoundError:
            return False
        except OSError:  # another user's object on a shared catalog: present, not renewable
            return path.exists()
        return True

    def object_path(self, digest: str) -> Path:
        path = self._path(object_key(digest))
        if not path.exists():
            raise ObjectMissingError(
                f"object {digest} is missing from catalog {self.url} ({path}); the catalog is "
                "damaged: restore the object from a copy, or unregister the segments naming it"
            )
        return path

    def stored_objects(self) -> list[StoredObject]:
        out: list[StoredObject] = []
        base = self.root / OBJECTS_PREFIX
        if not base.is_dir():
            return out
        now = time.time()
        for prefix in sorted(os.listdir(base)):
            folder = base / prefix
            if not folder.is_dir():
                continue
            for name in sorted(os.listdir(folder)):
                if not is_digest(name) or name[:2] != prefix:
                    continue  # no object of rayform's
                found = self._stat_object(name, now)
                if found is not None:
                    out.append(found)
        return out

    def stored_object(self, digest: str) -> StoredObject | None:
        return self._stat_object(digest, time.time())

    def _stat_object(self, digest: str, now: float) -> StoredObject | None:
        try:
            st = self._path(object_key(digest)).stat()
        except FileNotFoundError:
            return None
        return StoredObject(digest=digest, size_bytes=st.st_size,
                            age_s=max(0.0, now - st.st_mtime), stamp=str(st.st_mtime_ns))

    def delete_object(self, digest: str) -> None:
        self._path(object_key(digest)).unlink(missing_ok=True)

    def sweep_leftovers(self, *, grace_s: float, dry_run: bool) -> int:
        staging_dir = self.root / STAGING_DIR
        if not staging_dir.is_dir():
            return 0
        cutoff = time.time() - grace_s
        swept = 0
        for entry in os.scandir(staging_dir):
            try:
                if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                    continue
                if not dry_run:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
            except FileNotFoundError:  # removed meanwhile (its writer finished)
                continue
            swept += 1
        return swept

    def staging_dir(self) -> Path:
        base = self.root / STAGING_DIR
        with naming_full_disk(self.root, what=f"creating a staging folder in {self.url}"):
            base.mkdir(exist_ok=True)
            return Path(tempfile.mkdtemp(dir=base))
