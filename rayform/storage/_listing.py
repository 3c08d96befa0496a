"""Listing files: what a folder of a catalog holds, for servers that cannot list (plain HTTPS).

A local catalog keeps ``<folder>/.listing.json`` up to date in every folder above a metadata file it
creates (``entries/``, ``entries/<name>/``, ``entries/<name>/versions/``, ``slices/`` and the root),
so the directory can be published as-is by any static file server and opened as an ``https://``
catalog. Data objects are never listed, so ``objects/`` has none.

Concurrent writers stay correct without locks: each writer lists the folder, replaces the listing
atomically when it differs, and lists again after its own write until the two agree. The writer
whose replacement lands last has therefore listed the folder after it, so the final listing holds
every name created before that — and any name created later is followed by its creator's own write.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rayform._atomic import write_atomic
from rayform._paths import KeyComponent, path_under
from rayform.errors import CorruptMetadataError
from rayform.storage._documents import FORMAT_VERSION, dump_model, parse_model

LISTING_NAME = ".listing.json"
STAGING_DIR = ".staging"  # same folder as LocalStore's temporaries
MAX_REFRESH_ROUNDS = 50


class Listing(BaseModel):
    """``<folder>/.listing.json``: the names directly below a folder (files and folders)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    format: Literal["rayform-listing"]
    format_version: Literal[1]
    names: list[KeyComponent]


def listing_key(prefix: str) -> str:
    """The key of a folder's listing file (``prefix`` ``""`` is the catalog root)."""
    return f"{prefix}/{LISTING_NAME}" if prefix else LISTING_NAME


def encode_listing(names: list[str]) -> bytes:
    return dump_model(Listing(format="rayform-listing", format_version=FORMAT_VERSION,
                              names=sorted(names)))


def decode_listing(raw: bytes, *, source: str) -> list[str]:
    """The names of a listing file.

    Raises:
        CorruptMetadataError: not a valid listing file.
    """
    return parse_model(Listing, raw, source=source).names


def is_listed(name: str) -> bool:
    """Names that belong in a listing: not hidden (temporaries, staging, the listing itself)."""
    return not name.startswith(".")


def ancestors(key: str) -> list[str]:
    """The folders above ``key``, innermost first, the root (``""``) last."""
    parts = key.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def refresh_listing(prefix: str, *, list_names: Callable[[str], list[str]],
                    read: Callable[[str], bytes | None], write: Callable[[str, bytes], None]
                    ) -> None:
    """Bring ``prefix``'s listing file up to date (see the module docstring for why this is safe)."""
    key = listing_key(prefix)
    for _ in range(MAX_REFRESH_ROUNDS):
        wanted = encode_listing([n for n in list_names(prefix) if is_listed(n)])
        if read(key) == wanted:
            return
        write(key, wanted)


class LocalListings:
    """Listing maintenance for a catalog directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return path_under(self.root, key, what=f"catalog {self.root}")

    def _list(self, prefix: str) -> list[str]:
        try:
            return os.listdir(self._path(prefix))
        except FileNotFoundError:
            return []

    def _read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def _write(self, key: str, data: bytes) -> None:
        staging = self.root / STAGING_DIR  # a killed writer leaves no stray file in the folder
        staging.mkdir(exist_ok=True)
        write_atomic(self._path(key), data, tmp_dir=staging, durable=True)

    def refresh_above(self, key: str) -> None:
        """Update the listing of every folder above a newly created ``key``."""
        for prefix in ancestors(key):
            refresh_listing(prefix, list_names=self._list, read=self._read, write=self._write)

    def metadata_folders(self) -> Iterator[str]:
        """The prefix of every folder that has a listing (all but ``objects/`` and hidden ones)."""
        for dirpath, dirnames, _ in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            prefix = "" if rel == "." else rel.replace(os.sep, "/")
            if prefix.split("/")[0] == "objects" or any(p.startswith(".") for p in prefix.split("/")
                                                        if p):
                dirnames[:] = []
                continue
            yield prefix

    def refresh_all(self) -> int:
        """Write listings for every metadata folder of the catalog (for catalogs made before
        listings existed, or copied without them). Returns the number of folders indexed."""
        count = 0
        for prefix in self.metadata_folders():
            refresh_listing(prefix, list_names=self._list, read=self._read, write=self._write)
            count += 1
        return count

    def stale(self) -> list[tuple[str, str]]:
        """``(listing key, what is wrong)`` for every listing that is missing, unreadable or does
        not name exactly what its folder holds (nothing is written)."""
        out: list[tuple[str, str]] = []
        for prefix in self.metadata_folders():
            key = listing_key(prefix)
            raw = self._read(key)
            wanted = sorted(n for n in self._list(prefix) if is_listed(n))
            if raw is None:
                out.append((key, "missing"))
                continue
            try:
                listed = decode_listing(raw, source=key)
            except CorruptMetadataError as err:
                out.append((key, str(err)))
                continue
            if listed != wanted:
                missing = sorted(set(wanted) - set(listed))
                extra = sorted(set(listed) - set(wanted))
                out.append((key, f"stale: lacks {missing}, names absent {extra}"))
        return out


def index_catalog(path: str | os.PathLike[str]) -> int:
    """Write the listing files a static HTTPS server needs into the local catalog at ``path``.

    New catalogs keep them up to date by themselves; run this on a catalog written by an older
    rayform, or one whose listing files were lost, before publishing it. Returns the number of
    folders indexed.
    """
    return LocalListings(Path(path).expanduser().resolve()).refresh_all()
