"""Dataset entries: a view of a dataset's newest snapshot plus registration and unregistration.

Registration converts and stores every source first, then commits one new snapshot (all or
nothing); see :mod:`rayform.catalog._registration`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayform._local_writes import naming_full_disk
from rayform.catalog._dataset import DatasetView, load_snapshot, snapshot_source
from rayform.catalog._handle import CatalogHandle
from rayform.catalog._metadata import DatasetVersion, EntryMeta
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
    apply_unregistration,
    registration_request,
)
from rayform.catalog._schema import INDEX_TYPES
from rayform.catalog._snapshot import DatasetSnapshot, snapshot_of
from rayform.catalog._versions import commit, latest_version_number
from rayform.errors import (
    ConfigError,
    EntryNotFoundError,
)
from rayform.recording._columns import DEFAULT_LAYER
from rayform.recording._names import validate_layer_name, validate_segment_id
from rayform.storage._fetch import SourceUri


@dataclass(frozen=True, slots=True)
class RegistrationResult:
    """What a registration did: the segment ids registered (or replaced)."""

    segment_ids: list[str]


class RegistrationHandle:
    """Handle returned by ``register``; registration already ran, ``wait`` returns its result."""

    def __init__(self, result: RegistrationResult) -> None:
        self._result = result

    def wait(self, timeout_secs: float | None = None) -> RegistrationResult:
        return self._result

    def iter_results(self) -> Iterable[str]:
        return iter(self._result.segment_ids)


class DatasetEntry(DatasetView):
    """A dataset of the catalog: a view of its newest snapshot, plus registration."""

    def __init__(self, catalog: CatalogHandle, meta: EntryMeta) -> None:
        number = latest_version_number(catalog.store, meta.name)
        snapshot = load_snapshot(catalog, meta.name, number) if number else None
        super().__init__(catalog, meta.name, snapshot)
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
                 progress: bool | None = None) -> RegistrationHandle:
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

        Raises:
            SourceNotFoundError, UnknownFormatError, CorruptRecordingError: bad input.
            RemoteError, OfflineError: a remote source could not be fetched.
            InvalidNameError: a layer name or recording id with a path separator or ``..``.
            DuplicateSegmentError: an id+layer exists and ``on_duplicate='error'``.
            SchemaConflictError: a column type differs from the dataset's.
            ConfigError: an unknown ``on_duplicate`` or mismatched ``layer_name`` list.
            DiskFullError: the disk (or quota) of the catalog, cache or staging folder is full;
                the message names the folder.
        """
        paths, layers, policy = registration_request(recording_uri, layer_name, on_duplicate,
                                                      caller="register")
        self._catalog.require_writable()
        staging = self._catalog.store.staging_dir()
        try:
            with naming_full_disk(staging, what=f"converting sources for dataset {self._name!r}"):
                prepared = self._prepare(paths, layers, staging, progress, policy)
            if not prepared:  # nothing to register (or everything skipped): no new snapshot
                self.refresh()
                return RegistrationHandle(RegistrationResult(segment_ids=[]))
            snapshot, touched = self._commit_registration(prepared, policy)
        finally:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
        DatasetView.__init__(self, self._catalog, self._name, snapshot)
        return RegistrationHandle(RegistrationResult(segment_ids=touched))

    def _prepare(self, sources: list[SourceUri], layers: list[str], staging: Path,
                 progress: bool | None, policy: OnDuplicate = OnDuplicate.ERROR
                 ) -> list[PreparedLayer]:
        """Convert, validate and store the sources; nothing is written before all validate.

        Bad input (a missing file, an unknown format, a damaged recording, a duplicate, a type
        conflict with the dataset's newest snapshot) is found before any object is stored.
        """
        show = progress if progress is not None else (len(sources) > 1 and sys.stderr.isatty())
        if policy is not OnDuplicate.REPLACE:  # duplicates found before converting, if possible
            newest = self._newest()
            found = [] if newest is None else registered_sources(sources, layers,
                                                                 newest.index.record)
            if policy is OnDuplicate.ERROR:
                refuse_registered(found)
            done = {f.uri for f in found}
            kept = [(s, la) for s, la in zip(sources, layers, strict=True) if s.uri not in done]
            sources, layers = [s for s, _ in kept], [la for _, la in kept]
        inspected = convert_sources(sources, layers, staging, desc=f"register {self._name}",
                                    show=show)
        if not apply_registration(self._newest(), inspected, policy).touched:  # raises
            return []
        return store_layers(self._catalog.store, inspected, desc=f"store {self._name}",
                            show=show)

    def _newest(self) -> DatasetSnapshot | None:
        """The newest committed snapshot (not necessarily the one this entry shows)."""
        number = latest_version_number(self._catalog.store, self._name)
        return load_snapshot(self._catalog, self._name, number) if number else None

    def _commit_registration(self, prepared: list[PreparedLayer], policy: OnDuplicate
                             ) -> tuple[DatasetSnapshot, list[str]]:
        touched: list[str] = []

        def mutate(old: DatasetVersion | None, number: int) -> DatasetVersion:
            draft = apply_registration(self._snapshot_of(old), prepared, policy)
            touched[:] = draft.touched
            return draft.commit_as(self._catalog.store, number)

        header = commit(self._catalog.store, self._name, DatasetVersion, mutate)
        return self._snapshot_of_committed(header), touched

    def _snapshot_of(self, header: DatasetVersion | None) -> DatasetSnapshot | None:
        if header is None:
            return None
        return snapshot_of(self._catalog.store, header, source=snapshot_source(
            self._catalog, self._name, header.version))

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
        if not apply_registration(self._newest(), layers, policy).touched:  # raises
            self.refresh()
            return RegistrationHandle(RegistrationResult(segment_ids=[]))
        snapshot, touched = self._commit_registration(layers, policy)
        DatasetView.__init__(self, self._catalog, self._name, snapshot)
        return RegistrationHandle(RegistrationResult(segment_ids=touched))

    def unregister(self, *, segments_to_drop: str | Sequence[str],
                   layers_to_drop: str | Sequence[str] | None = None) -> None:
        """Remove segments (all layers, or only the given layers) in one atomic commit."""
        segs = [segments_to_drop] if isinstance(segments_to_drop, str) else list(segments_to_drop)
        layers = [] if layers_to_drop is None else (
            [layers_to_drop] if isinstance(layers_to_drop, str) else list(layers_to_drop))
        for segment_id in segs:
            validate_segment_id(segment_id)
        for layer in layers:
            validate_layer_name(layer)
        self._catalog.require_writable()
        if not segs:
            return  # nothing to drop: no new snapshot

        def mutate(old: DatasetVersion | None, number: int) -> DatasetVersion:
            draft = apply_unregistration(self._snapshot_of(old), segs, layers)
            return draft.commit_as(self._catalog.store, number)

        header = commit(self._catalog.store, self._name, DatasetVersion, mutate)
        DatasetView.__init__(self, self._catalog, self._name, self._snapshot_of_committed(header))

    def at_version(self, version: int) -> DatasetView:
        """A read-only view of an older committed snapshot.

        Raises:
            EntryNotFoundError: the dataset has no snapshot ``version``.
        """
        return view_at_version(self._catalog, self._name, version)


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
    return DatasetView(catalog, name, snapshot)

__all__ = ["INDEX_TYPES", "DatasetEntry", "DatasetView", "RegistrationHandle", "RegistrationResult"]
