"""Dataset snapshots: a small validated JSON header plus a columnar segment index object.

A snapshot ``entries/<name>/versions/<n>.json`` (:class:`DatasetVersion`) holds the timelines and
the union schema and names a content-addressed Arrow IPC object, the *segment index*: one row per
segment (sorted by id) with the columns the segment table and index ranges are computed from, and
each segment's full :class:`SegmentRecord` as JSON, validated only when that segment is used.
Opening a dataset of 10,000 segments reads a few hundred bytes of JSON and one compressed object
instead of validating 10,000 nested records, and a commit carries unchanged segments over as-is.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import feather
from pydantic import ValidationError

from rayform._digest import DIGEST_PATTERN
from rayform.catalog._metadata import DatasetVersion, SegmentRecord
from rayform.errors import CorruptMetadataError, InvalidNameError, ObjectMissingError
from rayform.recording._columns import TimelineKind
from rayform.recording._names import validate_layer_name, validate_segment_id
from rayform.storage._staged import store_staged
from rayform.storage._store import Store, object_key

INDEX_FORMAT: Final = b"rayform-segment-index"
INDEX_FORMAT_VERSION: Final = b"1"
_FORMAT_KEY = b"rayform:format"
_VERSION_KEY = b"rayform:format_version"

RANGE_TYPE: Final = pa.struct([("entity", pa.string()), ("timeline", pa.string()),
                               ("start", pa.int64()), ("end", pa.int64())])
INDEX_SCHEMA: Final = pa.schema([
    ("segment_id", pa.string()),
    ("version", pa.string()),
    ("num_rows", pa.int64()),
    ("size_bytes", pa.int64()),
    ("last_updated_at_ns", pa.int64()),
    ("layer_names", pa.list_(pa.string())),
    ("objects", pa.list_(pa.string())),  # the layers' recording objects, in layer-name order
    ("properties", pa.string()),  # JSON object
    ("ranges", pa.list_(RANGE_TYPE)),  # one entry per (entity, timeline) with data
    ("record", pa.string()),  # the SegmentRecord as JSON
], metadata={_FORMAT_KEY: INDEX_FORMAT, _VERSION_KEY: INDEX_FORMAT_VERSION})

RECORD: Final = "record"
_CACHE_ENTRIES = 4


def index_table(records: Sequence[SegmentRecord]) -> pa.Table:
    """The segment index rows of ``records`` (in the given order)."""
    ranges = [[{"entity": entity, "timeline": tl, "start": r.start, "end": r.end}
               for entity, idx in rec.entities.items() for tl, r in idx.ranges.items()]
              for rec in records]
    columns = [
        [r.segment_id for r in records],
        [r.version for r in records],
        [r.num_rows for r in records],
        [r.size_bytes for r in records],
        [r.last_updated_at_ns for r in records],
        [list(r.layers) for r in records],
        [[layer.object for layer in r.layers.values()] for r in records],
        [json.dumps(r.properties) for r in records],
        ranges,
        [r.model_dump_json() for r in records],
    ]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, INDEX_SCHEMA,
                                                                      strict=True)],
                                schema=INDEX_SCHEMA)


def _check_names(table: pa.Table, *, source: str) -> None:
    """Every segment id, layer name and object digest of an index is well formed (the index is
    read from an untrusted catalog; its records are validated again when used).

    Raises:
        CorruptMetadataError: naming the first bad value.
    """
    objects = pc.list_flatten(table.column("objects"))
    bad = pc.invert(pc.match_substring_regex(objects, DIGEST_PATTERN)).fill_null(True)
    if pc.any(bad).as_py():
        shown = objects.filter(bad)[0].as_py()
        raise CorruptMetadataError(
            f"{source}: object {str(shown)[:80]!r} is not a content digest (64 lowercase hex "
            "characters); the segment index is damaged or crafted"
        )
    checks = ((validate_segment_id, table.column("segment_id").to_pylist()),
              (validate_layer_name, pc.list_flatten(table.column("layer_names")).to_pylist()))
    for validate, values in checks:
        for value in values:
            try:
                validate(value)
            except InvalidNameError as err:
                raise CorruptMetadataError(f"{source}: {err}; the segment index is damaged or "
                                           "crafted") from None


class SegmentIndex:
    """The segments of one snapshot: an immutable Arrow table, records validated on demand.

    Read from a file, the ``record`` column (the full JSON records, nine tenths of the bytes) is
    decompressed only when a record is first asked for: opening 100k segments reads the other
    columns alone.
    """

    def __init__(self, table: pa.Table, *, source: str,
                 records: dict[str, SegmentRecord] | None = None,
                 record_file: Path | None = None) -> None:
        if record_file is None and RECORD not in table.column_names:
            raise ValueError("SegmentIndex: a table without its record column needs record_file")
        self._table = table
        self._record_file = record_file
        self._reopen: Callable[[], Path] | None = None
        self.source = source
        self._records: dict[str, SegmentRecord] = dict(records or {})
        self._ids: list[str] | None = None
        self._rows: dict[str, int] | None = None
        self._lock = threading.Lock()

    @property
    def table(self) -> pa.Table:
        """Every column of the index (reads the record column when it was left on disk)."""
        if RECORD not in self._table.column_names:
            with self._lock:
                if RECORD not in self._table.column_names:
                    self._table = self._table.append_column(RECORD, self._read_records())
        return self._table

    def refetch_with(self, reopen: Callable[[], Path]) -> None:
        """How to get the index file again if it vanishes before its records are read (a cache
        cleaned under a live process): ``reopen()`` fetches it and returns its path."""
        self._reopen = reopen

    def _read_records(self) -> pa.ChunkedArray:
        assert self._record_file is not None
        try:
            return self._read_record_column(self._record_file)
        except FileNotFoundError as err:
            reopen = self._reopen
            if reopen is None:
                raise ObjectMissingError(f"{self.source}: the segment index file vanished "
                                         f"before its records were read: {err}") from err
        self._record_file = reopen()
        try:
            return self._read_record_column(self._record_file)
        except FileNotFoundError as err:
            raise ObjectMissingError(
                f"{self.source}: the segment index file vanished while being read, twice (it "
                f"was fetched again in between): {err}; something is deleting the cache or the "
                "catalog's objects — stop it and retry") from err

    def _read_record_column(self, path: Path) -> pa.ChunkedArray:
        try:
            column = feather.read_table(str(path), columns=[RECORD],
                                        memory_map=True).column(RECORD)
        except FileNotFoundError:
            raise  # gone, not damaged: fetched again by _read_records
        except (pa.ArrowException, OSError) as err:
            raise CorruptMetadataError(
                f"{self.source}: the segment records are not readable (damaged or truncated): "
                f"{err}"
            ) from err
        if len(column) != self._table.num_rows:
            raise CorruptMetadataError(f"{self.source}: {len(column)} segment records for "
                                       f"{self._table.num_rows} segments")
        return column

    @classmethod
    def from_records(cls, records: Sequence[SegmentRecord]) -> SegmentIndex:
        ordered = sorted(records, key=lambda r: r.segment_id)
        return cls(index_table(ordered), source="<new segment index>",
                   records={r.segment_id: r for r in ordered})

    @classmethod
    def read(cls, path: Path, *, source: str) -> SegmentIndex:
        """Read and check a segment index object (all columns but the records, see the class).

        Raises:
            FileNotFoundError: ``path`` does not exist.
            CorruptMetadataError: not readable, or not a segment index of this format version.
        """
        try:
            with pa.memory_map(str(path), "r") as mm:
                schema = pa.ipc.open_file(mm).schema
            meta = schema.metadata or {}
            if meta.get(_FORMAT_KEY) == INDEX_FORMAT and RECORD in schema.names:
                columns = [n for n in schema.names if n != RECORD]
                table = feather.read_table(str(path), columns=columns, memory_map=True)
        except FileNotFoundError:
            raise  # gone, not damaged: the caller may fetch it again
        except (pa.ArrowException, OSError) as err:
            raise CorruptMetadataError(
                f"{source}: segment index is not a readable Arrow IPC file (damaged or "
                f"truncated): {err}"
            ) from err
        if meta.get(_FORMAT_KEY) != INDEX_FORMAT:
            raise CorruptMetadataError(
                f"{source}: not a rayform segment index (format={meta.get(_FORMAT_KEY)!r})"
            )
        if meta.get(_VERSION_KEY) != INDEX_FORMAT_VERSION:
            raise CorruptMetadataError(
                f"{source}: segment index format_version {meta.get(_VERSION_KEY)!r} is not "
                f"supported (this rayform reads {INDEX_FORMAT_VERSION.decode()}); upgrade rayform"
            )
        if not schema.remove_metadata().equals(INDEX_SCHEMA.remove_metadata()):
            raise CorruptMetadataError(
                f"{source}: segment index columns {schema.names} do not match format "
                f"version {INDEX_FORMAT_VERSION.decode()} ({INDEX_SCHEMA.names})"
            )
        _check_names(table, source=source)
        return cls(table, source=source, record_file=path)

    def write(self, path: Path) -> None:
        """Write the index as a zstd-compressed Arrow IPC file."""
        options = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.OSFile(str(path), "wb") as sink, \
                pa.ipc.new_file(sink, INDEX_SCHEMA, options=options) as writer:
            writer.write_table(self.table)

    def __len__(self) -> int:
        return int(self._table.num_rows)

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._row_of()

    def segment_ids(self) -> list[str]:
        """All segment ids, sorted."""
        if self._ids is None:
            self._ids = self._table.column("segment_id").to_pylist()
        return list(self._ids)

    def _row_of(self) -> dict[str, int]:
        if self._rows is None:
            ids = self._ids if self._ids is not None else self.segment_ids()
            self._rows = {sid: i for i, sid in enumerate(ids)}
        return self._rows

    def covers(self, segment_ids: Collection[str]) -> bool:
        """``segment_ids`` name every segment of the index (unknown ids aside)."""
        rows = self._row_of()
        return len(segment_ids) >= len(rows) and len(rows.keys() & set(segment_ids)) == len(rows)

    def rows(self, segment_ids: Collection[str] | None) -> pa.Table:
        """The index rows of these segments (all rows for None), in index order, without the
        record column."""
        table = self._table.drop_columns([RECORD]) if RECORD in self._table.column_names \
            else self._table
        if segment_ids is None:
            return table
        mask = pc.is_in(table.column("segment_id"),
                        value_set=pa.array(list(set(segment_ids)), pa.string()))
        if pc.all(mask).as_py():  # every row (a view pinned to all segments)
            return table
        return table.filter(mask)

    def record(self, segment_id: str) -> SegmentRecord | None:
        """The validated record of one segment (None when absent).

        Raises:
            CorruptMetadataError: the stored record does not validate.
        """
        cached = self._records.get(segment_id)
        if cached is not None:
            return cached
        row = self._row_of().get(segment_id)
        if row is None:
            return None
        raw = self.table.column(RECORD)[row].as_py()
        try:
            record = SegmentRecord.model_validate_json(raw)
        except ValidationError as err:
            problems = "; ".join(f"key {'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                                 for e in err.errors()[:5])
            raise CorruptMetadataError(
                f"{self.source}: segment {segment_id!r}: invalid segment record: {problems}"
            ) from err
        if record.segment_id != segment_id:
            raise CorruptMetadataError(
                f"{self.source}: row of segment {segment_id!r} holds the record of "
                f"{record.segment_id!r}"
            )
        with self._lock:
            self._records[segment_id] = record
        return record

    def records(self, segment_ids: Sequence[str]) -> list[SegmentRecord]:
        out = []
        for sid in segment_ids:
            record = self.record(sid)
            if record is not None:
                out.append(record)
        return out

    def replaced(self, updated: Sequence[SegmentRecord], dropped: Collection[str] = ()
                 ) -> SegmentIndex:
        """A new index with ``updated`` records added or replacing, and ``dropped`` removed."""
        gone = {r.segment_id for r in updated} | set(dropped)
        table = self.table
        if gone and len(table):
            keep = pc.invert(pc.is_in(table.column("segment_id"),
                                      value_set=pa.array(sorted(gone), pa.string())))
            table = table.filter(keep)
        if updated:
            table = pa.concat_tables([table, index_table(list(updated))])
            table = table.take(pc.sort_indices(table, sort_keys=[("segment_id", "ascending")]))
        table = table.combine_chunks()
        records = {k: v for k, v in self._records.items() if k not in gone}
        records.update({r.segment_id: r for r in updated})
        return SegmentIndex(table, source="<new segment index>", records=records)


class DatasetSnapshot:
    """One committed snapshot of a dataset: its header and its (lazily read) segment index."""

    def __init__(self, header: DatasetVersion,
                 index: SegmentIndex | Callable[[], SegmentIndex]) -> None:
        self.header = header
        self._index = index if isinstance(index, SegmentIndex) else None
        self._load = None if isinstance(index, SegmentIndex) else index

    @property
    def version(self) -> int:
        return self.header.version

    @property
    def timelines(self) -> dict[str, TimelineKind]:
        return self.header.timelines

    @property
    def schema_ipc(self) -> str:
        return self.header.schema_ipc

    @property
    def index(self) -> SegmentIndex:
        if self._index is None:
            assert self._load is not None
            self._index = self._load()
        return self._index


_cache: OrderedDict[tuple[str, str], SegmentIndex] = OrderedDict()
_cache_lock = threading.Lock()


def _remember(store: Store, digest: str, index: SegmentIndex) -> None:
    with _cache_lock:
        _cache[(store.url, digest)] = index
        _cache.move_to_end((store.url, digest))
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)


def clear_cache() -> None:
    """Forget the segment indexes read in this process (they are re-read when next used)."""
    with _cache_lock:
        _cache.clear()


def read_index(store: Store, digest: str, *, expected_rows: int, source: str) -> SegmentIndex:
    """The segment index object ``digest`` (cached per process: objects never change).

    Raises:
        CorruptMetadataError: the object is missing, damaged, or disagrees with its snapshot.
    """
    with _cache_lock:
        cached = _cache.get((store.url, digest))
    if cached is not None:
        return cached
    try:
        index = store.read_object(digest, lambda path: SegmentIndex.read(
            path, source=f"{source} (segment index {path})"))
    except FileNotFoundError as err:
        raise CorruptMetadataError(
            f"{source}: its segment index object {digest} is missing from the catalog ({err})"
        ) from err
    index.refetch_with(lambda: store.read_object(digest, lambda path: path))
    if len(index) != expected_rows:
        raise CorruptMetadataError(
            f"{source}: names {expected_rows} segments but its segment index "
            f"{object_key(digest)} holds {len(index)}"
        )
    _remember(store, digest, index)
    return index


def snapshot_of(store: Store, header: DatasetVersion, *, source: str) -> DatasetSnapshot:
    """The snapshot of a validated header; its index is read when first needed."""
    return DatasetSnapshot(header, lambda: read_index(store, header.segment_index,
                                                      expected_rows=header.num_segments,
                                                      source=source))


def store_index(store: Store, index: SegmentIndex) -> str:
    """Write ``index`` as a content-addressed object; returns its digest."""
    digest = store_staged(store, "segment-index.arrow", index.write,
                          what=f"writing a segment index for catalog {store.url}")
    index.source = f"segment index {store.url}/{object_key(digest)}"
    _remember(store, digest, index)
    return digest


__all__ = ["DatasetSnapshot", "SegmentIndex", "clear_cache", "index_table", "read_index",
           "snapshot_of", "store_index"]
