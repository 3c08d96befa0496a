"""Every object a catalog's metadata names, and every metadata file that could not be read.

Walks the whole history, not only the newest snapshots: every snapshot of every entry stays
readable (``dataset.at_version(n)``), and every saved slice pins the objects it reads. The
snapshots before a tombstone (the dataset was deleted, or renamed: its content lives on in the
new name's snapshot) are reachable only through slices, so only those a slice pins count (see
``catalog/_lifecycle.py``); pending rename snapshots count once they landed. What this finds is what
``check_catalog`` verifies and what ``gc_catalog`` must never remove.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rayform.catalog._catalog import Catalog
from rayform.catalog._digest_fields import named_digests
from rayform.catalog._lifecycle import rename_landed
from rayform.catalog._metadata import DatasetVersion, TableVersion
from rayform.catalog._notes import NotesVersion, notes_entry
from rayform.catalog._slices import SLICES_PREFIX, load_slice
from rayform.catalog._snapshot import read_index
from rayform.catalog._versions import entry_key, entry_prefix, load_version, version_key
from rayform.errors import RayformError
from rayform.storage._store import object_key

_VERSION_FILE = re.compile(r"([0-9]{1,18})\.json")
_SLICE_FILE = re.compile(r"(slc_[0-9a-f]{8,64})\.json")


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a catalog: where (a file or key) and what."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(slots=True)
class References:
    """What the metadata names: ``objects`` maps each digest to one file that names it, and
    ``holders`` each recording or asset to the (dataset, segment, layer)s it holds."""

    objects: dict[str, str] = field(default_factory=dict)
    metadata_files: int = 0
    problems: list[Problem] = field(default_factory=list)
    holders: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)
    # recording object -> its block-hash object, for the layers that have one
    block_lists: dict[str, str] = field(default_factory=dict)

    def add(self, digest: str, named_by: str) -> None:
        self.objects.setdefault(digest, named_by)

    def add_holder(self, digest: str, *, dataset: str, segment_id: str, layer: str) -> None:
        self.holders.setdefault(digest, set()).add((dataset, segment_id, layer))

    def held(self, digest: str) -> str:
        """``"dataset 'g1': segment 'ep_1' (layer 'base')"`` for an object; ``""`` for metadata."""
        found = sorted(self.holders.get(digest, ()))
        by_dataset: dict[str, list[str]] = {}
        for dataset, segment_id, layer in found:
            by_dataset.setdefault(dataset, []).append(f"{segment_id!r} (layer {layer!r})")
        return "; ".join(f"dataset {d!r}: segment{'s' if len(s) > 1 else ''} {', '.join(s)}"
                         for d, s in by_dataset.items())


def catalog_references(catalog: Catalog) -> References:
    """Read every metadata file of ``catalog`` (collecting problems instead of stopping)."""
    refs = References(metadata_files=1)  # catalog.json, read when the catalog was opened
    try:
        names = catalog.entry_names()
    except RayformError as err:
        refs.problems.append(Problem(where=f"{catalog.url}/entries", message=str(err)))
        names = []
    pinned = _slice_references(catalog, refs)
    for name in names:
        _entry_references(catalog, name, refs, pinned)
    return refs


def _entry_references(catalog: Catalog, name: str, refs: References,
                      pinned: set[tuple[str, int]]) -> None:
    store = catalog.store
    where = f"{catalog.url}/{entry_key(name)}"
    try:
        meta = catalog._entry_meta(name)
    except RayformError as err:
        refs.problems.append(Problem(where=where, message=str(err)))
        return
    numbers = sorted(int(m.group(1)) for m in map(_VERSION_FILE.fullmatch, store.list_names(
        f"{entry_prefix(name)}/versions")) if m is not None)
    kind = meta.kind if meta is not None else "dataset"
    if meta is None and not numbers:
        refs.problems.append(Problem(where=where, message="missing: the folder holds no entry file"))
        return
    refs.metadata_files += meta is not None
    headers: dict[int, DatasetVersion] = {}
    for number in numbers:
        source = f"{catalog.url}/{version_key(name, number)}"
        try:
            if kind == "table":
                table = load_version(store, name, number, TableVersion)
                for digest in table.objects:
                    refs.add(digest, source)
            else:
                headers[number] = load_version(store, name, number, DatasetVersion)
        except RayformError as err:
            refs.problems.append(Problem(where=source, message=str(err)))
            continue
        refs.metadata_files += 1
    if meta is None and any(rename_landed(store, name, h) for h in headers.values()):
        refs.problems.append(Problem(where=where, message="missing: the folder holds no entry file"))
    _dataset_references(catalog, name, headers, refs, pinned)
    if kind == "dataset":
        _notes_references(catalog, name, refs)


def _dataset_references(catalog: Catalog, name: str, headers: dict[int, DatasetVersion],
                        refs: References, pinned: set[tuple[str, int]]) -> None:
    """The objects of the reachable snapshots: not those before the newest tombstone (of those,
    a pinned one keeps only its segment index), nor pending renames that never landed."""
    retired = max((n for n, h in headers.items() if h.retired is not None), default=0)
    seen_indexes: set[str] = set()
    for number, header in sorted(headers.items()):
        source = f"{catalog.url}/{version_key(name, number)}"
        if number < retired:  # a slice reads its index and its own segments' objects only
            if (name, number) in pinned:
                refs.add(header.segment_index, source)
            continue
        try:
            if not rename_landed(catalog.store, name, header):
                continue
            refs.add(header.segment_index, source)
            if header.segment_index not in seen_indexes:
                seen_indexes.add(header.segment_index)
                _index_references(catalog, name, header, source, refs)
        except RayformError as err:
            refs.problems.append(Problem(where=source, message=str(err)))


def _notes_references(catalog: Catalog, name: str, refs: References) -> None:
    """The annotation and findings objects of every notes snapshot of dataset ``name``."""
    entry = notes_entry(name)
    for listed in catalog.store.list_names(f"{entry_prefix(entry)}/versions"):
        match = _VERSION_FILE.fullmatch(listed)
        if match is None:
            continue
        source = f"{catalog.url}/{version_key(entry, int(match.group(1)))}"
        try:
            notes = load_version(catalog.store, entry, int(match.group(1)), NotesVersion)
        except RayformError as err:
            refs.problems.append(Problem(where=source, message=str(err)))
            continue
        refs.metadata_files += 1
        for digest in [*notes.annotations, *([notes.findings] if notes.findings else [])]:
            refs.add(digest, source)


def _index_references(catalog: Catalog, dataset: str, header: DatasetVersion, source: str,
                      refs: References) -> None:
    index = read_index(catalog.store, header.segment_index, expected_rows=header.num_segments,
                       source=source)
    named_by = f"{catalog.url}/{object_key(header.segment_index)} (segment index of {source})"
    for record in index.records(index.segment_ids()):
        for layer_name, layer in record.layers.items():
            for digest in named_digests(layer):
                refs.add(digest, named_by)
                refs.add_holder(digest, dataset=dataset, segment_id=record.segment_id,
                                layer=layer_name)
            if layer.block_hashes is not None:
                refs.block_lists[layer.object] = layer.block_hashes


def _slice_references(catalog: Catalog, refs: References) -> set[tuple[str, int]]:
    """Add what the slices read; returns the (dataset, snapshot) pairs they pin."""
    pinned: set[tuple[str, int]] = set()
    for listed in catalog.store.list_names(SLICES_PREFIX):
        match = _SLICE_FILE.fullmatch(listed)
        if match is None:
            continue
        source = f"{catalog.url}/{SLICES_PREFIX}/{listed}"
        try:
            slice_ = load_slice(catalog, match.group(1))
        except RayformError as err:
            refs.problems.append(Problem(where=source, message=str(err)))
            continue
        refs.metadata_files += 1
        for digest in slice_.objects():
            refs.add(digest, source)
        pinned.add((slice_.dataset, slice_.dataset_version))
    return pinned
