"""``gc_catalog``: remove what no snapshot or slice needs from a local catalog.

Removes ``.staging`` leftovers of killed writers and objects that no snapshot (of any version)
and no saved slice names, each only when older than a grace period, so that a registration in
progress — which stores its objects before it commits the snapshot naming them — keeps them. An
object that a writer reuses has its time renewed when the writer finds it
(:meth:`LocalStore.keep_object`), and is checked again just before it is removed. Nothing is
removed while any metadata file cannot be read: what it names is unknown.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from rayform.catalog._catalog import Catalog
from rayform.catalog._check import stored_objects
from rayform.catalog._references import catalog_references
from rayform.errors import ConfigError, CorruptMetadataError
from rayform.storage._local import LocalStore
from rayform.storage._store import STAGING_DIR, object_key

DEFAULT_GRACE_S = 24 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GcReport:
    """What :func:`gc_catalog` removed (or, with ``dry_run``, would remove).

    Attributes:
        url: the catalog.
        removed_objects / removed_bytes: unreferenced objects older than the grace period.
        removed_staging: staging leftovers older than the grace period.
        kept_recent: unreferenced objects kept because they are younger than the grace period.
        dry_run: nothing was removed.
    """

    url: str
    removed_objects: int
    removed_bytes: int
    removed_staging: int
    kept_recent: int
    dry_run: bool

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        return (f"{self.url}: {verb} {self.removed_objects} unreferenced object(s) "
                f"({self.removed_bytes / 1e6:.1f} MB) and {self.removed_staging} staging "
                f"leftover(s); kept {self.kept_recent} recent unreferenced object(s)")


def gc_catalog(url: str | os.PathLike[str] | Catalog, *, grace_s: float = DEFAULT_GRACE_S,
               dry_run: bool = False) -> GcReport:
    """Remove staging leftovers and unreferenced objects older than ``grace_s`` seconds.

    Args:
        url: a local catalog (a path or an opened :class:`Catalog`).
        grace_s: keep anything younger than this (default 24 h); it must exceed the longest
            registration that may be running, whose objects are not referenced until it commits.
        dry_run: only report what would be removed.

    Raises:
        ConfigError: a remote catalog, or a negative grace period.
        CorruptMetadataError: some metadata cannot be read (run ``check_catalog``); nothing is
            removed.
    """
    if not grace_s >= 0:
        raise ConfigError(f"gc_catalog: grace_s must be >= 0, got {grace_s!r}")
    catalog = url if isinstance(url, Catalog) else Catalog.open(url)
    store = catalog.store
    if not isinstance(store, LocalStore):
        raise ConfigError(f"gc_catalog: {catalog.url} is not a local catalog; gc runs on the "
                          "machine that holds the catalog directory")
    refs = catalog_references(catalog)
    if refs.problems:
        raise CorruptMetadataError(
            f"gc_catalog: {len(refs.problems)} metadata problem(s) in {catalog.url}, first: "
            f"{refs.problems[0]}; nothing was removed — run `rayform check` and repair first"
        )
    cutoff = time.time() - grace_s
    candidates = [d for d in stored_objects(store.root) if d not in refs.objects]
    if candidates:  # a commit may have landed meanwhile: what it names is not garbage
        candidates = [d for d in candidates if d not in catalog_references(catalog).objects]
    removed = kept = freed = 0
    for digest in candidates:
        path = store.root / object_key(digest)
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if st.st_mtime > cutoff:  # stored (or reused) recently: a commit may be on its way
            kept += 1
            continue
        if not dry_run:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
        removed += 1
        freed += st.st_size
    staging = 0
    staging_dir = store.root / STAGING_DIR
    if staging_dir.is_dir():
        for entry in os.scandir(staging_dir):
            if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                continue
            if not dry_run:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            staging += 1
    return GcReport(url=catalog.url, removed_objects=removed, removed_bytes=freed,
                    removed_staging=staging, kept_recent=kept, dry_run=dry_run)
