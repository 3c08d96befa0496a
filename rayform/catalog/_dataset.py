"""Dataset views: the read side of Rerun's ``DatasetEntry`` / ``DatasetView`` surface, embedded.

A view is pinned to one committed snapshot of the dataset (so a sample index, a slice or a worker
sees exactly the segments it was built from) plus optional segment and content filters. It pickles
as configuration only (catalog URL, dataset name, snapshot number, filters) and reopens its storage
lazily in the process that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog._handle import CatalogHandle
from rayform.catalog._metadata import DatasetVersion, SegmentRecord, block_lists
from rayform.catalog._property_types import property_types_from_metadata
from rayform.catalog._registration import (
    schema_from_text,
)
from rayform.catalog._schema import ContentFilter, Schema
from rayform.catalog._segment_data import SegmentData
from rayform.catalog._snapshot import DatasetSnapshot, snapshot_of
from rayform.catalog._tables import (
    aligned_table,
    index_ranges_from_index,
    segment_table_from_index,
)
from rayform.catalog._versions import load_version, version_key
from rayform.errors import (
    ColumnNotFoundError,
    SegmentNotFoundError,
)
from rayform.recording._columns import SEGMENT_ID
from rayform.storage._store import object_key

if TYPE_CHECKING:
    import datafusion


class DatasetView:
    """A read-only view of a dataset snapshot, optionally filtered by segments and contents."""

    def __init__(self, catalog: CatalogHandle, name: str, snapshot: DatasetSnapshot | None, *,
                 segments: tuple[str, ...] | None = None,
                 contents: ContentFilter | None = None) -> None:
        self._catalog = catalog
        self._name = name
        self._snapshot = snapshot
        self._segment_filter = segments
        self._segment_set: frozenset[str] | None = None  # the filter, for membership tests
        self._contents = contents
        self._opened: dict[str, SegmentData] = {}
        self._schema: Schema | None = None
        self._full_schema: pa.Schema | None = None

    # --------------------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        return {
            "catalog": self._catalog,  # a CatalogHandle pickles as its URL
            "name": self._name,
            "version": self.snapshot_version,
            "segments": self._segment_filter,
            "contents": self._contents,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        catalog = state["catalog"]
        version = state["version"]
        snapshot = load_snapshot(catalog, state["name"], version) if version else None
        DatasetView.__init__(self, catalog, state["name"], snapshot, segments=state["segments"],
                             contents=state["contents"])

    # ------------------------------------------------------------------------- properties
    @property
    def catalog(self) -> CatalogHandle:
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
        if record is None or not self._in_filter(segment_id):
            raise SegmentNotFoundError(
                f"dataset {self._name!r} has no segment {segment_id!r}; see segment_ids()"
            )
        return record

    def _in_filter(self, segment_id: str) -> bool:
        if self._segment_filter is None:
            return True
        if self._segment_set is None:
            self._segment_set = frozenset(self._segment_filter)
        return segment_id in self._segment_set

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
        """A view restricted to these segments (those outside this view are left out).

        Raises:
            SegmentNotFoundError: an id is not a segment of the dataset's snapshot (a typo would
                otherwise train on fewer segments without a word).
        """
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
        known = set(self._snapshot.index.segment_ids()) if self._snapshot is not None else set()
        unknown = sorted({str(i) for i in ids} - known)
        if unknown:
            raise SegmentNotFoundError(
                f"filter_segments: dataset {self._name!r} (snapshot {self.snapshot_version}) has "
                f"no segment(s) {unknown[:10]}{' …' if len(unknown) > 10 else ''}; see "
                "segment_ids()"
            )
        if self._segment_filter is not None:
            keep = set(self._segment_filter)
            ids = [i for i in ids if i in keep]
        elif self._snapshot is not None and self._snapshot.index.covers(ids):
            # Every segment: no filter to carry (100k ids cost milliseconds in every later call).
            return DatasetView(self._catalog, self._name, self._snapshot, segments=None,
                               contents=self._contents)
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
                full = self._merged_schema()
                timelines = dict(self._snapshot.timelines)
                fields = [f for f in full if f.name in timelines or self._keeps(f.name)]
                self._schema = Schema(arrow=pa.schema(fields), timelines=timelines)
        return self._schema

    def _merged_schema(self) -> pa.Schema:
        """The snapshot's whole merged schema (every column, properties included)."""
        if self._full_schema is None:
            self._full_schema = schema_from_text(self._snapshot.schema_ipc) if self._snapshot \
                else pa.schema([])
        return self._full_schema

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
                                        self._object_url,
                                        property_types_from_metadata(self._merged_schema()))

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

        Columns: ``rerun_segment_id``, ``index``, the dataset's other timelines, then the
        component columns. One row per (segment, index value): the distinct values at which any
        column has data, or ``using_index_values`` (a ``{segment_id: values}`` dict, a table with
        ``rerun_segment_id`` and ``index`` columns, or one array applied to every segment within
        its range). With ``fill_latest_at`` each column holds its latest value at or before the
        row's index value within the same segment (never across segments); otherwise only exact
        matches. An other timeline's column holds the largest value on it of the rows the row's
        cells come from (null when none has one), as in Rerun.
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
        others = {tl: k for tl, k in schema.timelines.items() if tl != index}
        return aligned_table(segments, columns, index, kind, fill_latest_at=fill_latest_at,
                             index_values=values, other_timelines=others)

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
    def prefetch(self, segment_ids: Iterable[str]) -> None:
        """Hint that these segments will be read soon, in this order: a remote catalog starts
        downloading their recording files into the verified cache in the background (bounded,
        consuming ``segment_ids`` lazily: see ``docs/pytorch.md``); a local catalog does nothing.
        A hint only: an id not in this view ends the read-ahead, it raises nothing."""
        def objects() -> Iterator[str]:
            for segment_id in segment_ids:
                if segment_id not in self._opened:
                    record = self.segment_record(segment_id)
                    self._catalog.store.note_block_hashes(block_lists(record))
                    for layer in record.layers.values():
                        yield layer.object

        self._catalog.store.prefetch(objects())

    def open_segment(self, segment_id: str) -> SegmentData:
        """Memory-mapped access to one segment's columns (cached in this view)."""
        data = self._opened.get(segment_id)
        if data is None:
            data = SegmentData(self.segment_record(segment_id), self._catalog.store,
                               schema=self._merged_schema())
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


def load_snapshot(catalog: CatalogHandle, name: str, number: int) -> DatasetSnapshot:
    """Committed snapshot ``number`` of dataset ``name`` (its segment index is read lazily).

    Raises:
        FileNotFoundError: no such snapshot.
        CorruptMetadataError: the snapshot header is damaged or foreign.
    """
    header = load_version(catalog.store, name, number, DatasetVersion)
    return snapshot_of(catalog.store, header, source=snapshot_source(catalog, name, number))


def snapshot_source(catalog: CatalogHandle, name: str, number: int) -> str:
    return f"{catalog.url}/{version_key(name, number)}"
