"""Storage backends of a catalog: a key/value view of a directory (or, later, an object store).

Keys are ``/``-separated paths relative to the catalog root. Data objects are immutable and named by
their sha256 (``objects/ab/abcdef…``); metadata snapshots are created exclusively (a second writer
of the same key loses and retries), so a crash never leaves a half-written file visible.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from rayform.catalog._hashcopy import copy_hashed
from rayform.catalog._listing import LocalListings
from rayform.errors import CatalogNotFoundError

OBJECTS_PREFIX = "objects"
STAGING_DIR = ".staging"


def object_key(digest: str) -> str:
    """The key of a content-addressed object."""
    return f"{OBJECTS_PREFIX}/{digest[:2]}/{digest}"


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

    @abstractmethod
    def object_path(self, digest: str) -> Path:
        """A local, read-only path of the object's bytes (fetched into the cache if remote)."""

    @abstractmethod
    def staging_dir(self) -> Path:
        """A fresh local folder for temporary files of one operation (caller removes it)."""


class LocalStore(Store):
    """A catalog that is a directory on a local or shared (NFS) filesystem."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.url = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

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
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
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
        except FileExistsError:
            return False
        finally:
            tmp.unlink()
        # Listing files let a static HTTPS server publish this directory as a catalog.
        LocalListings(self.root).refresh_above(key)
        return True

    def put_object(self, src: Path) -> tuple[str, int]:
        staging = self.root / STAGING_DIR
        staging.mkdir(exist_ok=True)
        tmp = staging / f"object.{uuid.uuid4().hex}.tmp"
        try:
            digest, size = copy_hashed(src, tmp)
            dest = self._path(object_key(digest))
            if not dest.exists():
                os.chmod(tmp, 0o444)
                try:
                    os.replace(tmp, dest)
                except FileNotFoundError:  # first object under this prefix
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(tmp, dest)
            return digest, size
        finally:
            tmp.unlink(missing_ok=True)

    def object_path(self, digest: str) -> Path:
        path = self._path(object_key(digest))
        if not path.exists():
            raise FileNotFoundError(f"object {digest} is missing from catalog {self.url}")
        return path

    def staging_dir(self) -> Path:
        base = self.root / STAGING_DIR
        base.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(dir=base))


def open_store(url: str | os.PathLike[str], *, create: bool = False) -> Store:
    """Open the store behind a catalog URL (a local path; remote schemes plug in here)."""
    text = os.fspath(url)
    if text.startswith(("s3://", "https://", "http://")):
        from rayform.catalog._remote import open_remote_store  # optional backends

        return open_remote_store(text)
    root = Path(text[len("file://"):] if text.startswith("file://") else text).expanduser()
    if create:
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        raise CatalogNotFoundError(
            f"no catalog at {text!r}: the directory does not exist; create one with "
            "Catalog.create(path) or `rayform init PATH`"
        )
    return LocalStore(root)
