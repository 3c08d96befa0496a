"""Dataset entries and views: the Rerun ``DatasetEntry`` / ``DatasetView`` surface, embedded.

A view is pinned to one committed snapshot of the dataset (so a sample index, a slice or a worker
sees exactly the segments it was built from) plus optional segment and content filters. It pickles
as configuration only (catalog URL, dataset name, snapshot number, filters) and reopens its storage
lazily in the process that uses it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog._columns import DEFAULT_LAYER, SEGMENT_ID
from rayform.catalog._importers import find_importer
from rayform.catalog._metadata import DatasetVersion, EntryMeta, SegmentRecord
from rayform.catalog._names import validate_layer_name, validate_segment_id
from rayform.catalog._registration import (
    OnDuplicate,
    PreparedLayer,
    apply_registration,
    apply_unregistration,
    inspect_layer,
    registration_request,
    schema_from_text,
    store_layer,
)
from rayform.catalog._schema import INDEX_TYPES, ContentFilter, Schema
from rayform.catalog._segment_data import SegmentData
from rayform.catalog._snapshot import DatasetSnapshot, snapshot_of
from rayform.catalog._store import object_key
from rayform.catalog._tables import (
    aligned_table,
    index_ranges_from_index,
    segment_table_from_index,
)
from rayform.catalog._versions import commit, latest_version_number, load_version, version_key
from rayform.errors import (
    ColumnNotFoundError,
    ConfigError,
    DuplicateSegmentError,
    EntryNotFoundError,
    SegmentNotFoundError,
)

if TYPE_CHECKING:
    import datafusion

    from rayform.catalog._catalog import Catalog


STORE_THREADS = 2


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


class DatasetView:
    """A read-only view of a dataset snapshot, optionally filtered by segments and contents."""

    def __init__(self, catalog: Catalog, name: str, snapshot: DatasetSnapshot | None, *,
                 segments: tuple[str, ...] | None = None,
                 contents: ContentFilter | None = None) -> None:
        self._catalog = catalog
        self._name = name
        self._snapshot = snapshot
        self._segment_filter = segments
        self._contents = contents
        self._opened: dict[str, SegmentData] = {}
        self._schema: Schema | None = None

    # --------------------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        return {
            "catalog_url": self._catalog.url,
            "name": self._name,
            "version": self.snapshot_version,
            "segments": self._segment_filter,
            "contents": self._contents,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from rayform.catalog._catalog import Catalog

        catalog = Catalog.open(state["catalog_url"])
        version = state["version"]
        snapshot = load_snapshot(catalog, state["name"], version) if version else None
        DatasetView.__init__(self, catalog, state["name"], snapshot, segments=state["segments"],
                             contents=state["contents"])

    # ------------------------------------------------------------------------- properties
    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @property
    def name(self) -> str:
        return self._name

    @property
    def snapshot_version(self) -> int:
        """The number of the committed snapshot this view reads (0 for an empty dataset)."""
        return self._snapshot.version if self._snapshot else 0

    @property
    def timelines(self) -> dict[str, str]:
        return dict(self._snapshot.timelines) if self._snapshot else {}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._name!r}, version={self.snapshot_version}, "
                f"segments={len(self.segment_ids())})")

    # --------------------------------------------------------------------------- segments
    def segment_records(self) -> list[SegmentRecord]:
        """The metadata records of the segments in view (sorted by segment id).

        Records are validated on first use; for many segments prefer :meth:`segment_ids`,
        :meth:`segment_table` or :meth:`get_index_ranges`, which read the columnar index only.
        """
        if self._snapshot is None:
            return []
        return self._snapshot.index.records(self.segment_ids())

    def segment_record(self, segment_id: str) -> SegmentRecord:
        """One segment's record.

        Raises:
            SegmentNotFoundError: not in this view.
        """
        record = self._snapshot.index.record(segment_id) if self._snapshot else None
        if record is None or (self._segment_filter is not None
                              and segment_id not in self._segment_filter):
            raise SegmentNotFoundError(
                f"dataset {self._name!r} has no segment {segment_id!r}; see segment_ids()"
            )
        return record

    def segment_ids(self) -> list[str]:
        """The ids of the segments in view, sorted."""
        if self._snapshot is None:
            return []
        ids = self._snapshot.index.segment_ids()
        if self._segment_filter is None:
            return ids
        wanted = set(self._segment_filter)
        return [sid for sid in ids if sid in wanted]

    def _index_rows(self) -> pa.Table | None:
        """The segment index rows of the segments in view (None for an empty dataset)."""
        if self._snapshot is None:
            return None
        return self._snapshot.index.rows(self._segment_filter)

    def filter_segments(self, segment_ids: str | Sequence[str] | datafusion.DataFrame | pa.Table
                        ) -> DatasetView:
        """A view restricted to these segments (unknown ids are ignored, as in Rerun)."""
        if isinstance(segment_ids, str):
            ids: list[str] = [segment_ids]
        elif isinstance(segment_ids, pa.Table):
            ids = segment_ids.column(SEGMENT_ID).to_pylist()
        elif hasattr(segment_ids, "to_arrow_table"):
            table = segment_ids.to_arrow_table()
            if SEGMENT_ID not in table.column_names:
                raise ColumnNotFoundError(
                    f"filter_segments: the DataFrame needs a {SEGMENT_ID!r} column, "
                    f"got {table.column_names}"
                )
            ids = table.column(SEGMENT_ID).to_pylist()
        else:
            ids = list(segment_ids)
        if self._segment_filter is not None:
            keep = set(self._segment_filter)
            ids = [i for i in ids if i in keep]
        return DatasetView(self._catalog, self._name, self._snapshot, segments=tuple(ids),
                           contents=self._contents)

    def filter_contents(self, exprs: str | Sequence[str]) -> DatasetView:
        """A view keeping only matching entities: ``["/cam0/**", "-/debug/**"]``."""
        contents = ContentFilter.parse(exprs)
        return DatasetView(self._catalog, self._name, self._snapshot,
                           segments=self._segment_filter, contents=contents)

    # ----------------------------------------------------------------------------- schema
    def schema(self) -> Schema:
        """Index and component columns of the segments' union schema (content-filtered)."""
        if self._schema is None:
            if self._snapshot is None:
                self._schema = Schema(arrow=pa.schema([]), timelines={})
            else:
                full = schema_from_text(self._snapshot.schema_ipc)
                timelines = dict(self._snapshot.timelines)
                fields = [f for f in full if f.name in timelines or self._keeps(f.name)]
                self._schema = Schema(arrow=pa.schema(fields), timelines=timelines)
        return self._schema

    def arrow_schema(self) -> pa.Schema:
        return self.schema().arrow

    def _keeps(self, column: str) -> bool:
        entity = column.partition(":")[0]
        if self._contents is None:
            return not entity.startswith("/__properties")
        return self._contents.matches(entity)

    # ------------------------------------------------------------------------- dataframes
    def segment_table(self, join_meta: datafusion.DataFrame | pa.Table | None = None,
                      join_key: str = SEGMENT_ID) -> datafusion.DataFrame:
        """The segment table as a DataFusion DataFrame (optionally joined with ``join_meta``)."""
        table = self.segment_table_arrow()
        df = self._catalog.from_arrow(table)
        if join_meta is not None:
            meta = self._catalog.from_arrow(join_meta) if isinstance(join_meta, pa.Table) \
                else join_meta
            df = df.join(meta, left_on=join_key, right_on=join_key, how="left")
        return df

    def segment_table_arrow(self) -> pa.Table:
        timelines = self._snapshot.timelines if self._snapshot else {}
        return segment_table_from_index(self._index_rows(), timelines, self._contents,
                                        self._object_url)

    def _object_url(self, digest: str) -> str:
        return f"{self._catalog.url}/{object_key(digest)}"

    def get_index_ranges(self) -> datafusion.DataFrame:
        """``rerun_segment_id, <tl>:start, <tl>:end`` per segment, from metadata (no data scan)."""
        return self._catalog.from_arrow(self.index_ranges_arrow())

    def index_ranges_arrow(self) -> pa.Table:
        timelines = self._snapshot.timelines if self._snapshot else {}
        return index_ranges_from_index(self._index_rows(), timelines, self._contents)

    def reader(self, index: str, *, fill_latest_at: bool = False,
               using_index_values: Mapping[str, Any] | npt.ArrayLike | pa.Table | None = None,
               ) -> datafusion.DataFrame:
        """Align the view's component columns on timeline ``index``.

        One row per (segment, index value): the distinct values at which any column has data, or
        ``using_index_values`` (a ``{segment_id: values}`` dict, a table with ``rerun_segment_id``
        and ``index`` columns, or one array applied to every segment within its range). With
        ``fill_latest_at`` each column holds its latest value at or before the row's index value
        within the same segment (never across segments); otherwise only exact matches.
        """
        return self._catalog.from_arrow(
            self.reader_arrow(index, fill_latest_at=fill_latest_at,
                              using_index_values=using_index_values))

    def reader_arrow(self, index: str, *, fill_latest_at: bool = False,
                     using_index_values: Mapping[str, Any] | npt.ArrayLike | pa.Table | None = None,
                     ) -> pa.Table:
        """Like :meth:`reader` but returns the ``pyarrow.Table`` directly."""
        schema = self.schema()
        kind = schema.timeline_kind(index)
        columns = [(c, schema.field(c).type) for c in schema.component_columns()]
        values = self._index_values(index, using_index_values)
        segments = [self.open_segment(sid) for sid in self.segment_ids()
                    if values is None or sid in values]
        return aligned_table(segments, columns, index, kind, fill_latest_at=fill_latest_at,
                             index_values=values)

    def _index_values(self, index: str, given: Any) -> dict[str, npt.NDArray[np.int64]] | None:
        if given is None:
            return None
        if isinstance(given, pa.Table) or hasattr(given, "to_arrow_table"):
            table = given if isinstance(given, pa.Table) else given.to_arrow_table()
            for col in (SEGMENT_ID, index):
                if col not in table.column_names:
                    raise ColumnNotFoundError(f"using_index_values table needs a {col!r} column")
            out: dict[str, list[int]] = {}
            segs = table.column(SEGMENT_ID).to_pylist()
            vals = _as_int64(table.column(index).combine_chunks())
            for s, v in zip(segs, vals, strict=True):
                out.setdefault(s, []).append(int(v))
            return {s: np.asarray(v, np.int64) for s, v in out.items()}
        if isinstance(given, Mapping):
            return {s: _as_int64(v) for s, v in given.items()}
        arr = _as_int64(given)
        ranges = self.index_ranges_arrow()
        result: dict[str, npt.NDArray[np.int64]] = {}
        starts = ranges.column(index + ":start").combine_chunks()
        ends = ranges.column(index + ":end").combine_chunks()
        for i, sid in enumerate(ranges.column(SEGMENT_ID).to_pylist()):
            if not starts[i].is_valid:
                continue
            lo = _as_int64(starts.slice(i, 1))[0]
            hi = _as_int64(ends.slice(i, 1))[0]
            result[sid] = arr[(arr >= lo) & (arr <= hi)]
        return result

    # ------------------------------------------------------------------------ data plane
    def open_segment(self, segment_id: str) -> SegmentData:
        """Memory-mapped access to one segment's columns (cached in this view)."""
        data = self._opened.get(segment_id)
        if data is None:
            data = SegmentData(self.segment_record(segment_id), self._catalog.store.object_path)
            self._opened[segment_id] = data
        return data


def _as_int64(values: Any) -> npt.NDArray[np.int64]:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_timestamp(values.type):
            values = values.cast(pa.timestamp("ns")).view(pa.int64())
        elif pa.types.is_duration(values.type):
            values = values.cast(pa.duration("ns")).view(pa.int64())
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    arr = np.asarray(values)
    if arr.dtype.kind == "M":
        return arr.astype("datetime64[ns]").astype(np.int64)
    if arr.dtype.kind == "m":
        return arr.astype("timedelta64[ns]").astype(np.int64)
    return arr.astype(np.int64)


def load_snapshot(catalog: Catalog, name: str, number: int) -> DatasetSnapshot:
    """Committed snapshot ``number`` of dataset ``name`` (its segment index is read lazily).

    Raises:
        FileNotFoundError: no such snapshot.
        CorruptMetadataError: the snapshot header is damaged or foreign.
    """
    header = load_version(catalog.store, name, number, DatasetVersion)
    return snapshot_of(catalog.store, header, source=_snapshot_source(catalog, name, number))


def _snapshot_source(catalog: Catalog, name: str, number: int) -> str:
    return f"{catalog.url}/{version_key(name, number)}"


def require_distinct(layers: Sequence[PreparedLayer]) -> None:
    """Refuse a registration that holds the same segment id and layer twice."""
    seen: set[tuple[str, str]] = set()
    for prep in layers:
        key = (prep.segment_id, prep.layer_name)
        if key in seen:
            raise DuplicateSegmentError(
                f"segment {prep.segment_id!r} layer {prep.layer_name!r} appears twice in this "
                "registration; give each recording a distinct recording id"
            )
        seen.add(key)


class DatasetEntry(DatasetView):
    """A dataset of the catalog: a view of its newest snapshot, plus registration."""

    def __init__(self, catalog: Catalog, meta: EntryMeta) -> None:
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

    def register(self, uris: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 layer_name: str | Sequence[str] = DEFAULT_LAYER,
                 on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
                 progress: bool | None = None) -> RegistrationHandle:
        """Register recordings (files or folders, any supported format) as segments.

        All sources are converted and validated first, then stored, then committed in one
        atomic step: either every segment lands or none does. Bad input is refused before anything
        is written; when nothing is left to register (no sources, or all skipped) no snapshot is
        committed.

        Raises:
            SourceNotFoundError, UnknownFormatError, CorruptRecordingError: bad input.
            InvalidNameError: a layer name or recording id with a path separator or ``..``.
            DuplicateSegmentError: an id+layer exists and ``on_duplicate='error'``.
            SchemaConflictError: a column type differs from the dataset's.
            ConfigError: an unknown ``on_duplicate`` or mismatched ``layer_name`` list.
        """
        paths, layers, policy = registration_request(uris, layer_name, on_duplicate,
                                                      caller="register")
        self._catalog.require_writable()
        staging = self._catalog.store.staging_dir()
        try:
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

    def _prepare(self, paths: list[Path], layers: list[str], staging: Path,
                 progress: bool | None, policy: OnDuplicate = OnDuplicate.ERROR
                 ) -> list[PreparedLayer]:
        """Convert, validate and store the sources; nothing is written before all validate.

        Bad input (a missing file, an unknown format, a damaged recording, a duplicate, a type
        conflict with the dataset's newest snapshot) is found before any object is stored.
        """
        from tqdm import tqdm

        importers = [find_importer(path) for path in paths]
        show = progress if progress is not None else (len(paths) > 1 and sys.stderr.isatty())
        inspected: list[PreparedLayer] = []
        for i, (path, layer, importer) in enumerate(tqdm(
                list(zip(paths, layers, importers, strict=True)), desc=f"register {self._name}",
                unit="file", disable=not show)):
            out = staging / f"{i:06d}"
            out.mkdir()
            for recording in importer.convert(path, out):
                inspected.append(inspect_layer(recording, source_uri=str(path.resolve()),
                                               layer_name=layer))
        require_distinct(inspected)
        store = self._catalog.store
        if not apply_registration(self._newest(), inspected, policy).touched:  # raises
            return []
        if len(inspected) == 1:
            return [store_layer(store, inspected[0])]
        # Hashing is the bottleneck of storing; files hash in parallel (hashlib frees the GIL).
        workers = min(len(inspected), STORE_THREADS)
        total = sum(prep.layer.size_bytes for prep in inspected)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rayform-store") as pool, \
                tqdm(total=total, desc=f"store {self._name}", unit="B", unit_scale=True,
                     disable=not show) as bar:
            def store_one(prep: PreparedLayer) -> PreparedLayer:
                stored = store_layer(store, prep)
                bar.update(prep.layer.size_bytes)
                return stored

            return list(pool.map(store_one, inspected))

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
        return snapshot_of(self._catalog.store, header, source=_snapshot_source(
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
        newest = latest_version_number(self._catalog.store, self._name)
        try:
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise FileNotFoundError(version)
            snapshot = load_snapshot(self._catalog, self._name, version)
        except FileNotFoundError:
            raise EntryNotFoundError(
                f"dataset {self._name!r} has no snapshot {version!r}; committed snapshots are "
                f"1..{newest} (see snapshot_version)"
            ) from None
        return DatasetView(self._catalog, self._name, snapshot)


__all__ = ["INDEX_TYPES", "DatasetEntry", "DatasetView", "RegistrationHandle", "RegistrationResult"]
