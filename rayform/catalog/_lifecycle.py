"""A dataset's lifecycle: deleting, renaming and recreating it, each as one atomic commit.

Every change of a dataset is the exclusive creation of its next snapshot file
``entries/<name>/versions/<n>.json`` (:mod:`rayform.catalog._versions`); a lifecycle change is one
too, so it races safely with registrations and a process killed at any point leaves the catalog as
before or as after:

- **delete**: the next snapshot is a *tombstone* (``retired.kind == "deleted"``, no segments). The
  dataset leaves ``dataset_names()``; its earlier snapshots stay on disk, so slices pinned to them
  keep reading, until ``gc`` reclaims what no live snapshot or slice needs.
- **rename** ``a`` → ``b``: first ``b``'s next snapshot is written as a copy of ``a``'s newest
  with ``renamed_from = (a, k)``, where ``k`` is ``a``'s next number; it is *pending*: valid only
  once ``a``'s snapshot ``k`` exists and retires ``a`` as renamed to exactly that snapshot of ``b``.
  Then that tombstone is created — the rename's one commit point. Until then ``b`` reads as it was
  (absent); after it, ``a`` is gone and ``b`` holds its segments (the objects are shared, nothing is
  copied). ``a``'s history stays readable by the slices pinned to it.
- **recreate**: creating a dataset whose name is retired commits an empty live snapshot after the
  tombstone (the folder, its id and its history are kept; slices of the old dataset still read the
  snapshots they pinned).

A pending snapshot whose commit point does not exist yet is *undecided*: readers skip it; a writer
settles it first by occupying the source's slot ``k`` with a copy of the source's state, which
voids the rename for good (a renamer still alive then loses its race and starts over).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from rayform.catalog._metadata import DatasetVersion, EntryMeta, RenameSource, Retirement
from rayform.catalog._registration import SnapshotDraft, schema_to_text
from rayform.catalog._snapshot import SegmentIndex
from rayform.catalog._versions import (
    MAX_COMMIT_ATTEMPTS,
    entry_key,
    latest_version_number,
    load_version,
    version_key,
)
from rayform.errors import CommitConflictError, EntryExistsError, EntryNotFoundError
from rayform.recording._names import validate_entry_name
from rayform.storage._documents import dump_model, parse_model
from rayform.storage._store import Store


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetState:
    """Where a dataset's snapshot sequence stands.

    Attributes:
        number: its newest valid snapshot (0: none).
        header: that snapshot's header (None when ``number`` is 0).
        next_number: where the next commit goes (after every file, valid or not).
        exists: the dataset is live: it has no snapshot yet, or its newest valid one is no
            tombstone.
    """

    name: str
    number: int
    header: DatasetVersion | None
    next_number: int
    exists: bool

    @property
    def retired(self) -> Retirement | None:
        return self.header.retired if self.header is not None else None

    def gone_message(self) -> str:
        """Why the dataset is not there, for an ``EntryNotFoundError``."""
        retired = self.retired
        if retired is not None and retired.kind == "renamed":
            return (f"dataset {self.name!r} was renamed to {retired.renamed_to!r} (snapshot "
                    f"{self.number}); open it by its new name")
        if retired is not None:
            return (f"dataset {self.name!r} was deleted (snapshot {self.number}); create it again "
                    "with create_dataset, or read a slice pinned to an earlier snapshot")
        return f"dataset {self.name!r} does not exist (a rename into it never completed)"


def rename_landed(store: Store, name: str, header: DatasetVersion) -> bool | None:
    """Whether the pending snapshot ``header`` of ``name`` is valid (None: undecided yet)."""
    source = header.renamed_from
    if source is None:
        return True
    try:
        point = load_version(store, source.name, source.version, DatasetVersion)
    except FileNotFoundError:
        return None
    retired = point.retired
    return (retired is not None and retired.kind == "renamed" and retired.renamed_to == name
            and retired.renamed_to_version == header.version)


def dataset_state(store: Store, name: str, *, settle: bool = False) -> DatasetState:
    """The state of dataset ``name`` (see :class:`DatasetState`).

    With ``settle`` (writers), an undecided pending snapshot is voided first, so that nothing
    committed afterwards can be overtaken by a late rename.
    """
    for _ in range(MAX_COMMIT_ATTEMPTS):
        latest = latest_version_number(store, name)
        number, undecided = latest, None
        while number > 0:
            header = load_version(store, name, number, DatasetVersion)
            landed = rename_landed(store, name, header)
            if landed:
                return DatasetState(name=name, number=number, header=header,
                                    next_number=latest + 1, exists=header.retired is None)
            if landed is None and undecided is None:
                undecided = header.renamed_from
            number -= 1
        if undecided is not None and settle:
            _void(store, undecided)
            continue
        return DatasetState(name=name, number=0, header=None, next_number=latest + 1,
                            exists=latest == 0)
    raise CommitConflictError(f"dataset {name!r}: its renames did not settle; retry")


def _void(store: Store, source: RenameSource) -> None:
    """Occupy the commit point of an undecided rename with the source's state, unchanged."""
    state = dataset_state(store, source.name)
    if state.header is not None:
        copy = state.header.model_copy(update={"version": source.version,
                                               "committed_at_ns": time.time_ns(),
                                               "renamed_from": None})
    elif state.exists:
        copy = empty_snapshot(store, source.version)
    else:
        copy = empty_snapshot(store, source.version, retired=Retirement(kind="deleted"))
    store.create_exclusive(version_key(source.name, source.version), dump_model(copy))


def empty_snapshot(store: Store, number: int, *,
                   retired: Retirement | None = None) -> DatasetVersion:
    """Snapshot ``number`` of no segments (a tombstone with ``retired``)."""
    draft = SnapshotDraft(timelines={}, schema_ipc=schema_to_text(pa.schema([])),
                          index=SegmentIndex.from_records([]), touched=[])
    header = draft.commit_as(store, number)
    return header if retired is None else header.model_copy(update={"retired": retired})


def commit_dataset(store: Store, name: str,
                   mutate: Callable[[DatasetVersion | None, int], DatasetVersion]
                   ) -> DatasetVersion:
    """Commit ``mutate(newest_valid_or_None, next_number)`` as the next snapshot of a live dataset.

    ``mutate`` may raise to abort (nothing is written) and is called again after a lost race.

    Raises:
        EntryNotFoundError: the dataset was deleted or renamed (perhaps meanwhile).
        CommitConflictError: too many concurrent commits.
    """
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        state = dataset_state(store, name, settle=True)
        if not state.exists:
            raise EntryNotFoundError(state.gone_message())
        new = mutate(state.header, state.next_number)
        if store.create_exclusive(version_key(name, state.next_number), dump_model(new)):
            return new
        time.sleep(random.uniform(0, 0.002 * (1 + attempt)))
    raise CommitConflictError(
        f"dataset {name!r}: gave up after {MAX_COMMIT_ATTEMPTS} concurrent commit attempts; retry"
    )


def delete_dataset(store: Store, name: str) -> DatasetVersion:
    """Commit the tombstone of dataset ``name``; returns it.

    Raises:
        EntryNotFoundError: no live dataset ``name``.
    """
    return commit_dataset(store, name, lambda _old, number: empty_snapshot(
        store, number, retired=Retirement(kind="deleted")))


def revive_dataset(store: Store, name: str) -> bool:
    """Make a retired (or never landed) dataset ``name`` live and empty; False if it is live."""
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        state = dataset_state(store, name, settle=True)
        if state.exists:
            return False
        if store.create_exclusive(version_key(name, state.next_number),
                                  dump_model(empty_snapshot(store, state.next_number))):
            return True
        time.sleep(random.uniform(0, 0.002 * (1 + attempt)))
    raise CommitConflictError(f"dataset {name!r}: gave up recreating it after concurrent commits")


def rename_dataset(store: Store, old: str, new: str, *,
                   entry_of: Callable[[str], EntryMeta | None]) -> DatasetVersion:
    """Rename dataset ``old`` to ``new`` (see the module docstring); returns ``new``'s snapshot.

    Args:
        entry_of: the entry file of a name, None when absent (the catalog's validated reader).

    Raises:
        EntryNotFoundError: no live dataset ``old``.
        EntryExistsError: ``new`` is a live dataset or a table.
        InvalidNameError: ``new`` is not a valid entry name.
    """
    validate_entry_name(new)
    if new == old:
        raise EntryExistsError(f"rename: dataset {old!r} already has that name")
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        source = dataset_state(store, old, settle=True)
        if not source.exists:
            raise EntryNotFoundError(source.gone_message())
        meta = entry_of(old)
        assert meta is not None
        target_meta = entry_of(new)
        if target_meta is not None and target_meta.kind != "dataset":
            raise EntryExistsError(f"rename: {new!r} already exists as a {target_meta.kind}")
        target = dataset_state(store, new, settle=True)
        if target_meta is not None and target.exists:
            raise EntryExistsError(
                f"rename: dataset {new!r} already exists; delete it first or pick another name"
            )
        pending = (source.header if source.header is not None
                   else empty_snapshot(store, target.next_number)).model_copy(update={
                       "version": target.next_number, "committed_at_ns": time.time_ns(),
                       "renamed_from": RenameSource(name=old, version=source.next_number)})
        if store.create_exclusive(version_key(new, target.next_number), dump_model(pending)):
            if target_meta is None:  # the same dataset under another name: its id carries over
                store.create_exclusive(entry_key(new), dump_model(
                    meta.model_copy(update={"name": new})))
            tombstone = empty_snapshot(store, source.next_number, retired=Retirement(
                kind="renamed", renamed_to=new, renamed_to_version=target.next_number))
            if store.create_exclusive(version_key(old, source.next_number),
                                      dump_model(tombstone)):
                return pending
        time.sleep(random.uniform(0, 0.002 * (1 + attempt)))
    raise CommitConflictError(f"rename {old!r} → {new!r}: gave up after concurrent commits; retry")


def read_entry(store: Store, name: str) -> EntryMeta | None:
    """The entry file of ``name`` as stored (None when absent), without the folder check."""
    try:
        raw = store.read_bytes(entry_key(name))
    except FileNotFoundError:
        return None
    return parse_model(EntryMeta, raw, source=f"{store.url}/{entry_key(name)}")


__all__ = ["DatasetState", "commit_dataset", "dataset_state", "delete_dataset", "empty_snapshot",
           "read_entry", "rename_dataset", "rename_landed", "revive_dataset"]
