"""``gc_catalog``: remove what no snapshot or slice needs from a local or ``s3://`` catalog.

Removes the leftovers of killed writers (a local catalog's ``.staging`` entries, an S3 catalog's
probe keys) and objects that no snapshot (of any version) and no saved slice names, each only
when older than a grace period, so that a registration in progress — which stores its objects
before it commits the snapshot naming them — keeps them. An object that a writer reuses has its
time renewed when the writer finds it (:meth:`Store.keep_object`: a local file's time is
touched, an old S3 object is stored again), and is looked up again just before it is removed:
one renewed since the listing is kept. Ages on S3 are by the server's clock. Nothing is removed
while any metadata file cannot be read: what it names is unknown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rayform.catalog._catalog import Catalog
from rayform.catalog._references import catalog_references
from rayform.errors import ConfigError, CorruptMetadataError, ReadOnlyCatalogError

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
        url: a local or ``s3://`` catalog (a path, a URL or an opened :class:`Catalog`).
        grace_s: keep anything younger than this (default 24 h); it must exceed the longest
            registration that may be running, whose objects are not referenced until it commits.
        dry_run: only report what would be removed.

    Raises:
        ConfigError: a negative grace period.
        ReadOnlyCatalogError: a catalog this process cannot write (HTTPS, offline).
        CorruptMetadataError: some metadata cannot be read (run ``check_catalog``); nothing is
            removed.
    """
    if not grace_s >= 0:
        raise ConfigError(f"gc_catalog: grace_s must be >= 0, got {grace_s!r}")
    catalog = url if isinstance(url, Catalog) else Catalog.open(url)
    store = catalog.store
    if store.read_only:
        raise ReadOnlyCatalogError(
            f"gc_catalog: catalog {catalog.url} is read-only here; run gc on the machine that "
            "holds the catalog directory, or on its s3:// URL"
        )
    refs = catalog_references(catalog)
    if refs.problems:
        raise CorruptMetadataError(
            f"gc_catalog: {len(refs.problems)} metadata problem(s) in {catalog.url}, first: "
            f"{refs.problems[0]}; nothing was removed — run `rayform check` and repair first"
        )
    candidates = [o for o in store.stored_objects() if o.digest not in refs.objects]
    if candidates:  # a commit may have landed meanwhile: what it names is not garbage
        again = catalog_references(catalog)
        candidates = [o for o in candidates if o.digest not in again.objects]
    removed = kept = freed = 0
    for listed in candidates:
        if listed.age_s < grace_s:  # stored (or reused) recently: a commit may be on its way
            kept += 1
            continue
        now = store.stored_object(listed.digest)
        if now is None:
            continue
        if now.stamp != listed.stamp:  # renewed since it was listed: a writer reuses it
            kept += 1
            continue
        if not dry_run:
            store.delete_object(listed.digest)
        removed += 1
        freed += listed.size_bytes
    staging = store.sweep_leftovers(grace_s=grace_s, dry_run=dry_run)
    return GcReport(url=catalog.url, removed_objects=removed, removed_bytes=freed,
                    removed_staging=staging, kept_recent=kept, dry_run=dry_run)
