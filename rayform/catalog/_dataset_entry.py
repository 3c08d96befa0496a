"""Dataset entries: a view of a dataset's newest snapshot plus registration and unregistration.

Registration converts and stores every source first, then commits one new snapshot (all or
nothing); see :mod:`rayform.catalog._registration`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from rayform._local_writes import naming_full_disk
from rayform.catalog._annotations import annotate as annotate_segment
from rayform.catalog._dataset import DatasetView, load_snapshot, snapshot_source
from rayform.catalog._handle import CatalogHandle
from rayform.catalog._lifecycle import (
    commit_dataset,
    dataset_state,
    delete_dataset,
    read_entry,
    rename_dataset,
    rename_landed,
)
from rayform.catalog._metadata import DatasetVersion, EntryMeta
from rayform.catalog._notes import annotations_table, findings_table
from rayform.catalog._prefix import RECORDING_SUFFIXES, recordings_under
from rayform.catalog._preparation import (
    convert_sources,
    refuse_registered,
    registered_sources,
    require_distinct,
    store_layers,
)
from rayform.catalog._registration import (
    OnDuplicate,
    PreparedLayer,
    apply_registration,
    registration_change,
    registration_request,
)
from rayform.catalog._schema import INDEX_TYPES
from rayform.catalog._snapshot import DatasetSnapshot, snapshot_of
from rayform.catalog._unregistration import (
    UnregistrationHandle,
    UnregistrationRequest,
    UnregistrationResult,
    plan_unregistration,
)
from rayform.catalog._versions import latest_version_number
from rayform.errors import (
    ConfigError,
    EntryNotFoundError,
)
from rayform.importers._options import NO_OPTIONS, ImportOptions
from rayform.recording._columns import DEFAULT_LAYER
from rayform.storage._fetch import SourceUri


@dataclass(frozen=True, slots=True)
class RegistrationResult:
    """What a registration did: the segment ids of the request in registration order, those
    registered (or replaced) and those ``on_duplicate='skip'`` kept, as Rerun lists them."""

    segment_ids: list[str]


@dataclass(frozen=True, slots=True)
class SegmentRegistrationResult:
    """One segment of a registration, as Rerun's ``iter_results`` yields it.

    Attributes:
        uri: the source as the caller gave it (one source may hold several segments).
        segment_id: the segment it became.
        error: always ``None``: rayform registers all or nothing and raises before returning a
            handle when anything fails.
    """

    uri: str
    segment_id: str
    error: str | None = None

    @property
    def is_success(self) -> bool:
        return self.error is None

    @property
    def is_error(self) -> bool:
        return self.error is not None


class RegistrationHandle:
    """Handle returned by ``register``; registration already ran, ``wait`` returns its result."""

    def __init__(self, results: Sequence[SegmentRegistrationResult]) -> None:
        self._results = list(results)

    @staticmethod
    def of(prepared: Sequence[PreparedLayer]) -> RegistrationHandle:
        return RegistrationHandle([
            SegmentRegistrationResult(uri=prep.request_uri or prep.layer.source_uri,
                                      segment_id=prep.segment_id) for prep in prepared])

    def wait(self, timeout_secs: float | None = None) -> RegistrationResult:
        return RegistrationResult(segment_ids=[r.segment_id for r in self._results])

    def iter_results(self, timeout_secs: float | None = None
                     ) -> Iterator[SegmentRegistrationResult]:
        """Each segment's result, in registration order (all have succeeded)."""
        return iter(self._results)


class DatasetEntry(DatasetView):
    """A dataset of the catalog: a view of its newest snapshot, plus registration."""

    def __init__(self, catalog: CatalogHandle, meta: EntryMeta) -> None:
        """Raises:
            EntryNotFoundError: the dataset was deleted or renamed.
        """
        state = dataset_state(catalog.store, meta.name)
        if not state.exists:
            raise EntryNotFoundError(state.gone_message())
        super().__init__(catalog, meta.name, self._snapshot_in(catalog, meta.name, state.header))
        self._meta = meta

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["meta"] = self._meta.model_dump()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._meta = EntryMeta.model_validate(state["meta"])

    @property
    def id(self) -> str:
        return self._meta.id

    @property
    def kind(self) -> str:
        return self._meta.kind

    @property
    def created_at_ns(self) -> int:
        return self._meta.created_at_ns

    def refresh(self) -> DatasetEntry:
        """Reload the newest committed snapshot (other processes may have registered)."""
        DatasetEntry.__init__(self, self._catalog, self._meta)
        return self

    def register(self, recording_uri: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 *,
                 layer_name: str | Sequence[str] = DEFAULT_LAYER,
                 on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
                 progress: bool | None = None,
                 import_options: ImportOptions | None = None) -> RegistrationHandle:
        """Register recordings (files or folders, any supported format) as segments.

        ``recording_uri`` is one source or a list of them, each a path, a ``file:///abs/path``
        URI (what ``Path.as_uri()`` gives, as Rerun scripts pass), or the URL of a remote file,
        ``s3://bucket/key.rrd`` or ``https://host/path.mcap``: remote files are streamed into the
        catalog's staging folder by the catalog transports (retried, hashed while written) and
        then registered like local ones (``source_uri`` keeps the URL).

        All sources are converted and validated first, then stored, then committed in one
        atomic step: either every segment lands or none does. Bad input is refused before anything
        is written; when nothing is left to register (no sources, or all skipped) no snapshot is
        committed.

        ``import_options`` (:class:`~rayform.importers.ImportOptions`) says what a source leaves
        out: its frame rate (``rate_hz``), its HDF5 layout (``hdf5_mapping``).

        Raises:
            SourceNotFoundError, UnknownFormatError, CorruptRecordingError: bad input.
            RemoteError, OfflineError: a remote source could not be fetched.
            InvalidNameError: a layer name or recording id with a path separator or ``..``.
            DuplicateSegmentError: an id+layer exists and ``on_duplicate='error'``.
            SchemaConflictError: a column type differs from the dataset's.
            ConfigError: an unknown ``on_duplicate`` or mismatched ``layer_name`` list, or an
                import option that none of the sources' formats reads.
            DiskFullError: the disk (or quota) of the catalog, cache or staging folder is full;
                the message names the folder.
        """
        paths, layers, policy = registration_request(recording_uri, layer_name, on_duplicate,
                                                      caller="register")
        self._catalog.require_writable()
        staging = self._catalog.store.staging_dir()
        try:
            with naming_full_disk(staging, what=f"converting sources for dataset {self._name!r}"):
                requested, prepared = self._prepare(paths, layers, staging, progress, policy,
                                                    import_options or NO_OPTIONS)
            if not prepared:  # nothing to register (or everything skipped): no new snapshot
                self.refresh()
                return RegistrationHandle(requested)
            snapshot, _ = self._commit_registration(prepared, policy)
        finally:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
        DatasetView.__init__(self, self._catalog, self._name, snapshot)
        return RegistrationHandle(requested)

    def register_prefix(self, recordings_prefix: str | os.PathLike[str],
                        layer_name: str | None = None,
                        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR, *,
                        progress: bool | None = None) -> RegistrationHandle:
        """Register every recording below a local folder or an ``s3://`` prefix (Rerun's
        ``register_prefix``), as one :meth:`register` of them all: all or nothing.

        Files are found by name at any depth (``.rrd``, ``.rfr``, ``.mcap``, ``.mp4``; hidden
        ones skipped); folder formats such as LeRobot datasets are registered by path.

        Raises:
            ConfigError: nothing to register below the prefix (Rerun: "no data sources to
                register"), or an ``https://`` prefix, which cannot be listed.
            SourceNotFoundError: a local prefix that is no folder.
            and everything :meth:`register` raises.
        """
        uris = recordings_under(recordings_prefix)
        if not uris:
            raise ConfigError(
                f"register_prefix: no data sources to register below {str(recordings_prefix)!r} "
                f"(no file ending in {', '.join(RECORDING_SUFFIXES)})"
            )
        return self.register(uris, layer_name=layer_name or DEFAULT_LAYER,
                             on_duplicate=on_duplicate, progress=progress)

    def _prepare(self, sources: list[SourceUri], layers: list[str], staging: Path,
                 progress: bool | None, policy: OnDuplicate = OnDuplicate.ERROR,
                 options: ImportOptions = NO_OPTIONS
                 ) -> tuple[list[SegmentRegistrationResult], list[PreparedLayer]]:
        """Convert, validate and store the sources; nothing is written before all validate.

        Returns a result per segment of the request, in its order (segments skipped before
        converting included, as Rerun lists them), and the stored layers, none when nothing is
        left to register.

        Bad input (a missing file, an unknown format, a damaged recording, a duplicate, a type
        conflict with the dataset's newest snapshot) is found before any object is stored.
        """
        show = progress if progress is not None else (len(sources) > 1 and sys.stderr.isatty())
        requested = list(sources)
        skipped: dict[str, tuple[str, ...]] = {}
        if policy is not OnDuplicate.REPLACE:  # duplicates found before converting, if possible
            newest = self._newest()
            found = [] if newest is None else registered_sources(sources, layers,
                                                                 newest.index.record)
            if policy is OnDuplicate.ERROR:
                refuse_registered(found)
            skipped = {f.uri: f.segment_ids for f in found}
            kept = [(s, la) for s, la in zip(sources, layers, strict=True) if s.uri not in skipped]
            sources, layers = [s for s, _ in kept], [la for _, la in kept]
        inspected = convert_sources(sources, layers, staging, desc=f"register {self._name}",
                                    show=show, options=options)
        converted = RegistrationHandle.of(inspected).iter_results()
        by_uri: dict[str, list[SegmentRegistrationResult]] = {}
        for result, prep in zip(converted, inspected, strict=True):
            by_uri.setdefault(prep.request_uri or "", []).append(result)
        results = [r for source in requested for r in (
            [SegmentRegistrationResult(uri=source.uri, segment_id=i) for i in skipped[source.uri]]
            if source.uri in skipped else by_uri.pop(source.uri, []))]
        results += [r for rest in by_uri.values() for r in rest]  # (none: every layer has its uri)
        if not registration_change(self._newest(), inspected, policy).touched:  # raises
            return results, []
        return results, store_layers(self._catalog.store, inspected, desc=f"store {self._name}",
                                     show=show)

    def _newest(self) -> DatasetSnapshot | None:
        """The newest committed snapshot (not necessarily the one this entry shows).

        Raises:
            EntryNotFoundError: the dataset was deleted or renamed.
        """
        state = dataset_state(self._catalog.store, self._name)
        if not state.exists:
            raise EntryNotFoundError(state.gone_message())
        return self._snapshot_of(state.header)

    def _commit_registration(self, prepared: list[PreparedLayer], policy: OnDuplicate
                             ) -> tuple[DatasetSnapshot, list[str]]:
        touched: list[str] = []

        def mutate(old: DatasetVersion | None, number: int) -> DatasetVersion:
            draft = apply_registration(self._snapshot_of(old), prepared, policy)
            touched[:] = draft.touched
            return draft.commit_as(self._catalog.store, number)

        header = commit_dataset(self._catalog.store, self._name, mutate)
        return self._snapshot_of_committed(header), touched

    def _snapshot_of(self, header: DatasetVersion | None) -> DatasetSnapshot | None:
        return self._snapshot_in(self._catalog, self._name, header)

    @staticmethod
    def _snapshot_in(catalog: CatalogHandle, name: str, header: DatasetVersion | None
                     ) -> DatasetSnapshot | None:
        if header is None:
            return None
        return snapshot_of(catalog.store, header, source=snapshot_source(catalog, name,
                                                                         header.version))

    def _snapshot_of_committed(self, header: DatasetVersion) -> DatasetSnapshot:
        snapshot = self._snapshot_of(header)
        assert snapshot is not None
        return snapshot

    def register_prepared(self, prepared: Sequence[PreparedLayer], *,
                          on_duplicate: OnDuplicate | str = OnDuplicate.ERROR
                          ) -> RegistrationHandle:
        """Commit layers already stored by ``prepare_layer`` (in any process) in one atomic step.

        The commit half of :meth:`register`, for registrations whose conversion ran elsewhere
        (``rayform.ray.register_many``). Nothing is committed when nothing is left to register.

        Raises:
            DuplicateSegmentError: an id+layer appears twice, or exists and ``on_duplicate='error'``.
            SchemaConflictError: a column type differs from the dataset's.
            ConfigError: a layer that was only inspected, not stored.
        """
        layers = list(prepared)
        try:
            policy = OnDuplicate(on_duplicate)
        except ValueError:
            raise ConfigError(
                f"register_prepared: on_duplicate={on_duplicate!r} is not one of "
                f"{[p.value for p in OnDuplicate]}"
            ) from None
        for prep in layers:
            if not prep.is_stored:
                raise ConfigError(
                    f"register_prepared: layer {prep.layer_name!r} of segment {prep.segment_id!r} "
                    "is not stored yet; prepare it with prepare_layer (or store_layer)"
                )
        require_distinct(layers)
        self._catalog.require_writable()
        if not registration_change(self._newest(), layers, policy).touched:  # raises
            self.refresh()
            return RegistrationHandle.of(layers)
        snapshot, _ = self._commit_registration(layers, policy)
        DatasetView.__init__(self, self._catalog, self._name, snapshot)
        return RegistrationHandle.of(layers)

    def unregister(self, *, segments_to_drop: str | Sequence[str] = (),
                   layers_to_drop: str | Sequence[str] | None = None) -> UnregistrationHandle:
        """Remove segments and layers in one atomic commit; ``wait()`` reports what went.

        As Rerun's, a product filter: the given segments (every segment when none) times the
        given layers (every layer when none). A segment that loses its last layer leaves the
        dataset. Nothing matching commits nothing. Earlier snapshots keep the removed data
        readable (``at_version``, slices) until ``gc`` finds no snapshot naming it.

        Raises:
            ConfigError: neither segments nor layers given.
            SegmentNotFoundError: a named segment is not in the dataset (Rerun ignores it).
            EntryNotFoundError: the dataset was deleted or renamed.
        """
        request = UnregistrationRequest.of(segments_to_drop, layers_to_drop)
        self._catalog.require_writable()
        plan_unregistration(self._newest(), request)  # raises before anything is written
        removed: list[UnregistrationResult] = []

        def mutate(old: DatasetVersion | None, number: int) -> DatasetVersion:
            plan = plan_unregistration(self._snapshot_of(old), request)
            if plan.draft is None:
                raise _NothingToRemoveError
            removed[:] = [UnregistrationResult(segment_ids=plan.dropped, layers=plan.layers,
                                               snapshot_version=number)]
            return plan.draft.commit_as(self._catalog.store, number)

        try:
            header = commit_dataset(self._catalog.store, self._name, mutate)
        except _NothingToRemoveError:
            self.refresh()
            return UnregistrationHandle(UnregistrationResult(segment_ids=[], layers={},
                                                             snapshot_version=None))
        DatasetView.__init__(self, self._catalog, self._name, self._snapshot_of_committed(header))
        return UnregistrationHandle(removed[0])

    def delete(self) -> None:
        """Delete this dataset from the catalog (Rerun's ``Entry.delete``), in one atomic commit.

        The dataset leaves ``dataset_names()`` and ``get_dataset`` no longer finds it; its name
        can be used again. Its snapshots stay on disk, so slices pinned to them keep reading,
        until ``gc`` reclaims what no live snapshot or slice names. This entry object keeps
        showing the snapshot it showed; writing through it fails.

        Raises:
            EntryNotFoundError: already deleted or renamed.
            ReadOnlyCatalogError: the catalog cannot be written.
        """
        self._catalog.require_writable()
        delete_dataset(self._catalog.store, self._name)

    def set_name(self, name: str) -> None:
        """Rename this dataset (Rerun's ``Entry.set_name``) in one atomic commit.

        Its segments, properties and id carry over without copying any data; slices made before
        keep reading the snapshots they pinned under the old name. This entry then shows the
        dataset under ``name``.

        Raises:
            EntryExistsError: ``name`` is a live dataset or a table.
            InvalidNameError: ``name`` is not a valid entry name.
            EntryNotFoundError: this dataset was deleted or renamed meanwhile.
        """
        self._catalog.require_writable()
        header = rename_dataset(self._catalog.store, self._name, name,
                                entry_of=lambda n: read_entry(self._catalog.store, n))
        self._meta = self._meta.model_copy(update={"name": name})
        DatasetView.__init__(self, self._catalog, name, self._snapshot_in(self._catalog, name,
                                                                           header))

    def at_version(self, version: int) -> DatasetView:
        """A read-only view of an older committed snapshot.

        Raises:
            EntryNotFoundError: the dataset has no snapshot ``version``.
        """
        return view_at_version(self._catalog, self._name, version)

    def annotate(self, segment: str, start: Any, end: Any, label: str, **attrs: Any) -> pa.Table:
        """Note that ``[start, end)`` of ``segment`` is ``label`` (a subtask, "gripper slipped").

        ``start``/``end`` are rows on the sequence timeline (ints) or times on the temporal one
        (``numpy.timedelta64`` / ``datetime64``); ``attrs`` are JSON values kept with the note.
        Committed atomically as catalog data; SQL: ``SELECT * FROM <dataset>.annotations``.

        Returns:
            the note as a one-row Arrow table.
        """
        return annotate_segment(self, segment, start, end, label, attrs)

    def annotations(self) -> pa.Table:
        """Every annotation of this dataset (Arrow; the ``<dataset>.annotations`` SQL table)."""
        return annotations_table(self._catalog, self._name)

    def findings(self) -> pa.Table:
        """The latest ``rayform curate`` findings (the ``<dataset>.findings`` SQL table)."""
        return findings_table(self._catalog, self._name)


class _NothingToRemoveError(Exception):
    """Raised inside an unregistration commit to abort it: nothing matched."""


def view_at_version(catalog: CatalogHandle, name: str, version: int) -> DatasetView:
    """A read-only view of dataset ``name`` at its committed snapshot ``version``, read without
    listing or loading newer snapshots (on a remote catalog: one immutable, cacheable file).

    Raises:
        EntryNotFoundError: the dataset has no snapshot ``version``.
    """
    try:
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FileNotFoundError(version)
        snapshot = load_snapshot(catalog, name, version)
    except FileNotFoundError:
        # Listed only to name the valid range: a remote listing is a round trip.
        newest = latest_version_number(catalog.store, name)
        raise EntryNotFoundError(
            f"dataset {name!r} has no snapshot {version!r}; committed snapshots are "
            f"1..{newest} (see snapshot_version)"
        ) from None
    if snapshot.header.renamed_from is not None and not rename_landed(catalog.store, name,
                                                                      snapshot.header):
        raise EntryNotFoundError(
            f"dataset {name!r}: snapshot {version} was written by a rename that never completed; "
            "it holds no data of this dataset"
        )
    return DatasetView(catalog, name, snapshot)

__all__ = ["INDEX_TYPES", "DatasetEntry", "DatasetView", "RegistrationHandle", "RegistrationResult",
           "SegmentRegistrationResult"]
