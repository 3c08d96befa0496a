"""``check_catalog``: verify a catalog end to end and report what is damaged.

Checks that every metadata file parses (catalog, entries, every snapshot of every entry, segment
indexes and their records, slices), that every object they name exists and hashes to its name,
and, for a local catalog, that every listing file names exactly what its folder holds. Nothing is
written. Also counts, on a catalog it could write (local or ``s3://``), what ``gc_catalog`` would
find to collect (unreferenced objects, leftovers of killed writers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rayform.catalog._catalog import Catalog
from rayform.catalog._references import Problem, catalog_references
from rayform.errors import RayformError
from rayform.storage._block_hashes import BlockHashes, hash_blocks
from rayform.storage._listing import LocalListings
from rayform.storage._local import LocalStore
from rayform.storage._remote import RemoteStore
from rayform.storage._store import Store, object_key, sha256_file


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    """What :func:`check_catalog` found.

    Attributes:
        url: the catalog checked.
        problems: everything damaged (empty when the catalog is sound).
        metadata_files: metadata files read.
        objects_checked: referenced objects found and hashed.
        listings_checked: whether listing files were compared with their folders (local only).
        unreferenced_objects / staging_entries: what ``gc_catalog`` could remove (0 for a
            catalog this process cannot write).
    """

    url: str
    problems: tuple[Problem, ...]
    metadata_files: int
    objects_checked: int
    listings_checked: bool
    unreferenced_objects: int
    staging_entries: int

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = (f"{self.url}: {'OK' if self.ok else f'{len(self.problems)} problem(s)'} — "
                f"{self.metadata_files} metadata files, {self.objects_checked} objects verified"
                + ("" if self.listings_checked else ", listings not checked (remote catalog)"))
        lines = [head, *(f"  {p}" for p in self.problems)]
        if self.unreferenced_objects or self.staging_entries:
            lines.append(f"  {self.unreferenced_objects} unreferenced object(s) and "
                         f"{self.staging_entries} staging leftover(s): `rayform gc` removes them")
        if any("listing" in p.where for p in self.problems):
            lines.append("  stale listings: `rayform index` rewrites them")
        return "\n".join(lines)


def check_catalog(url: str | os.PathLike[str] | Catalog) -> CheckReport:
    """Verify the catalog at ``url`` (see the module docstring); writes nothing.

    Raises:
        CatalogNotFoundError: no catalog at ``url``.
        CorruptMetadataError: its ``catalog.json`` is damaged (nothing else can be checked).
    """
    catalog = url if isinstance(url, Catalog) else Catalog.open(url)
    refs = catalog_references(catalog)
    problems = list(refs.problems)
    checked = 0
    sound: dict[str, Path] = {}
    for digest, named_by in sorted(refs.objects.items()):
        where = f"{catalog.url}/{object_key(digest)}"
        held = refs.held(digest)
        if held:
            named_by = f"{named_by}; it holds {held}"
        try:
            path = catalog.store.object_path(digest)
            actual = sha256_file(path)
        except (RayformError, OSError) as err:
            problems.append(Problem(where=where, message=f"missing or unreadable (named by "
                                                         f"{named_by}): {err}"))
            continue
        if actual != digest:
            problems.append(Problem(where=where, message=f"damaged: its content hashes to "
                                                         f"{actual} (named by {named_by})"))
            continue
        checked += 1
        sound[digest] = path
    for digest, blocks in sorted(refs.block_lists.items()):
        if digest in sound and blocks in sound:
            problem = _block_list_problem(sound[digest], sound[blocks], where=f"{catalog.url}/"
                                          f"{object_key(blocks)}")
            if problem is not None:
                problems.append(Problem(where=f"{catalog.url}/{object_key(blocks)}",
                                        message=f"{problem} (block hashes of object {digest})"))
    store = catalog.store
    local = isinstance(store, LocalStore)
    if local:
        assert isinstance(store, LocalStore)
        for key, message in LocalListings(store.root).stale():
            problems.append(Problem(where=f"{catalog.url}/{key}", message=message))
    unreferenced = staging = 0
    if not store.read_only and not _offline(store):
        unreferenced = sum(1 for stored in store.stored_objects()
                           if stored.digest not in refs.objects)
        staging = store.sweep_leftovers(grace_s=0.0, dry_run=True)
    return CheckReport(url=catalog.url, problems=tuple(problems),
                       metadata_files=refs.metadata_files, objects_checked=checked,
                       listings_checked=local, unreferenced_objects=unreferenced,
                       staging_entries=staging)


def _offline(store: Store) -> bool:
    return isinstance(store, RemoteStore) and store.is_offline()


def _block_list_problem(data: Path, blocks: Path, *, where: str) -> str | None:
    """What is wrong with the block-hash object ``blocks`` of the object ``data``, or None."""
    try:
        listed = BlockHashes.from_bytes(blocks.read_bytes(), source=where)
    except RayformError as err:
        return str(err)
    actual = hash_blocks(data, block_bytes=listed.block_bytes)
    if actual != listed:
        return ("damaged: its block hashes do not match the object's content (a remote read "
                "would refuse the object)")
    return None

