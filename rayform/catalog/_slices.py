"""Slices: saved, immutable selections of a dataset, pinned to segment versions, with a stable id.

A slice records the dataset snapshot it was made from, each selected segment's version and the
content hashes of its files, and an optional time range. It is stored once, as
``slices/<id>.json`` (created exclusively, never rewritten). Re-registering a segment commits a
new dataset snapshot and a new segment version; a slice keeps reading the snapshot it recorded,
so its data never changes. The id is ``slc_`` plus the start of a sha256 over the slice's content
(dataset, segments and versions, time range, name), so the same selection made twice — here or
in a copy of the catalog — gets the same id.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, StringConstraints

from rayform._digest import Digest
from rayform.catalog._catalog import CATALOG_FILE, Catalog
from rayform.catalog._dataset import DatasetView
from rayform.catalog._dataset_entry import DatasetEntry, view_at_version
from rayform.catalog._metadata import (
    EntryId,
    EntryName,
    SegmentId,
    SegmentRecord,
    SegmentVersionId,
    block_lists,
)
from rayform.catalog._query import read_only_options
from rayform.catalog._query_errors import translate_errors
from rayform.catalog._query_limits import check_query_size, new_session_context
from rayform.catalog._query_values import check_built_values
from rayform.catalog._segment_data import time_value_ns
from rayform.catalog._tables import entity_ranges
from rayform.catalog._versions import entry_key, version_key
from rayform.errors import (
    ConfigError,
    CorruptMetadataError,
    EntryNotFoundError,
    InvalidNameError,
    SegmentNotFoundError,
)
from rayform.recording._columns import SEGMENT_ID, TimelineKind
from rayform.recording._names import validate_entry_name
from rayform.storage import Store, open_store
from rayform.storage._documents import FORMAT_VERSION, dump_model, parse_model

SLICES_PREFIX = "slices"
SLICE_ID_PREFIX = "slc_"
SLICE_ID_HEX = 8  # the guide's ids (slc_7c1e04aa); lengthened only on a hash-prefix collision
_SLICE_ID_RE = re.compile(r"^slc_[0-9a-f]{8,64}$")


def slice_key(slice_id: str) -> str:
    return f"{SLICES_PREFIX}/{slice_id}.json"


def validate_slice_id(slice_id: str) -> str:
    """Check the shape of a slice id (``slc_`` and 8 to 64 lowercase hex digits)."""
    if not isinstance(slice_id, str) or not _SLICE_ID_RE.match(slice_id):
        raise InvalidNameError(
            f"slice id {slice_id!r} is not a slice id; expected 'slc_' followed by 8 or more "
            "lowercase hex digits, e.g. 'slc_7c1e04aa' (see client.slices.list())"
        )
    return slice_id


# ------------------------------------------------------------------------- value objects
@dataclass(frozen=True, slots=True, kw_only=True)
class TimeRange:
    """An inclusive range ``[start, end]`` on one timeline (ns on temporal timelines).

    ``start``/``end`` may be given as ints, ``numpy.datetime64``/``timedelta64`` or
    ``datetime``/``timedelta`` and are stored as int64.
    """

    timeline: str
    start: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _to_int64(self.start, "start"))
        object.__setattr__(self, "end", _to_int64(self.end, "end"))
        if not self.timeline:
            raise ConfigError("TimeRange.timeline must name a timeline, got ''")
        if self.start > self.end:
            raise ConfigError(
                f"TimeRange on {self.timeline!r}: start {self.start} is after end {self.end}"
            )

    def overlaps(self, start: int, end: int) -> bool:
        return self.start <= end and start <= self.end


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcludedRange:
    """An inclusive range ``[start, end]`` of one segment on one timeline that no sample's
    window may touch (an idle head, a NaN burst: what ``rayform curate --write-slice`` drops)."""

    segment_id: str
    timeline: str
    start: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _to_int64(self.start, "start"))
        object.__setattr__(self, "end", _to_int64(self.end, "end"))
        if self.start > self.end:
            raise ConfigError(f"ExcludedRange of {self.segment_id!r} on {self.timeline!r}: "
                              f"start {self.start} is after end {self.end}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceSegment:
    """One pinned segment: its id, its version, and the content hashes of its files."""

    segment_id: str
    version: str
    objects: tuple[str, ...]
    block_hashes: tuple[tuple[str, str], ...] = ()  # (object, its block-hash object)


@dataclass(frozen=True, slots=True, kw_only=True)
class Slice:
    """A saved, immutable selection of a dataset (see the module docstring).

    Attributes:
        id: ``slc_…``, derived from the content.
        name: optional human name.
        dataset: the dataset's name; ``dataset_id`` its entry id.
        dataset_version: the dataset snapshot the slice was made from (and reads).
        segments: the pinned segments, sorted by id.
        time_range: optional range every sample must fall in.
        where: the SQL predicate used to select the segments (for the record).
        created_at_ns: creation time.
        catalog_url: the catalog the slice was read from (not part of its content).
        excluded: ranges of its segments that no sample may touch.
        store: the open store the slice was read from (:meth:`open_store` reuses it: one
            ``catalog.json`` request per open, not two); not compared, not pickled.
    """

    id: str
    name: str | None
    dataset: str
    dataset_id: str
    dataset_version: int
    segments: tuple[SliceSegment, ...]
    time_range: TimeRange | None
    where: str | None
    created_at_ns: int
    catalog_url: str
    excluded: tuple[ExcludedRange, ...] = ()
    store: Store | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickles without its open store (a process that unpickles it opens its own)."""
        return (_unpickled_slice, ({f.name: getattr(self, f.name) for f in fields(self)
                                    if f.name != "store"},))

    @property
    def segment_ids(self) -> list[str]:
        return [s.segment_id for s in self.segments]

    @property
    def segment_versions(self) -> dict[str, str]:
        return {s.segment_id: s.version for s in self.segments}

    def objects(self) -> list[str]:
        """The content hashes of every file the slice reads (recordings and assets), sorted."""
        return sorted({o for s in self.segments for o in s.objects})

    def block_lists(self) -> dict[str, str]:
        """Each object of the slice that has block hashes -> its block-hash object (empty for
        slices made before block hashes existed)."""
        return {o: b for s in self.segments for o, b in s.block_hashes}

    def __len__(self) -> int:
        return len(self.segments)

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        return (f"Slice({self.id!r}{name}, dataset={self.dataset!r}@{self.dataset_version}, "
                f"segments={len(self.segments)})")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description (for ``rayform slices show --json`` and run logs)."""
        tr = self.time_range
        return {
            "id": self.id,
            "name": self.name,
            "dataset": self.dataset,
            "dataset_version": self.dataset_version,
            "where": self.where,
            "time_range": None if tr is None else {"timeline": tr.timeline, "start": tr.start,
                                                   "end": tr.end},
            "segments": {s.segment_id: s.version for s in self.segments},
            "created_at_ns": self.created_at_ns,
            "catalog": self.catalog_url,
            "excluded": [{"segment": e.segment_id, "timeline": e.timeline, "start": e.start,
                          "end": e.end} for e in self.excluded],
        }

    def describe(self) -> str:
        """A few human-readable lines (``rayform slices show``)."""
        created = _dt.datetime.fromtimestamp(self.created_at_ns / 1e9, tz=_dt.timezone.utc)
        lines = [
            f"slice      {self.id}" + (f"  ({self.name})" if self.name else ""),
            f"dataset    {self.dataset} @ snapshot {self.dataset_version}",
            f"created    {created.isoformat(timespec='seconds')}",
            f"segments   {len(self.segments)}",
        ]
        if self.where:
            lines.append(f"where      {self.where}")
        if self.time_range:
            tr = self.time_range
            lines.append(f"time range {tr.timeline} [{tr.start}, {tr.end}]")
        if self.excluded:
            lines.append(f"excluded   {len(self.excluded)} range(s)")
        lines += [f"  {s.segment_id}  {s.version}" for s in self.segments]
        return "\n".join(lines)

    def metadata_keys(self) -> list[str]:
        """The catalog files :meth:`view` reads, in order: ``catalog.json``, the dataset's entry
        and the pinned snapshot (a remote store given them by ``Store.prefetch_metadata``
        requests them at once: one round trip instead of three in a row)."""
        validate_entry_name(self.dataset)
        keys = [CATALOG_FILE, entry_key(self.dataset)]
        if self.dataset_version >= 1:
            keys.append(version_key(self.dataset, self.dataset_version))
        return keys

    def open_store(self) -> Store:
        """The store of the slice's catalog (the one it was read from, else opened afresh), the
        files :meth:`view` reads already requested
        (:meth:`metadata_keys`; a local store ignores the hint)."""
        store = self.store if self.store is not None else open_store(self.catalog_url)
        store.prefetch_metadata(self.metadata_keys())
        store.note_block_hashes(self.block_lists())
        return store

    def view(self, catalog: Catalog | None = None) -> DatasetView:
        """A :class:`DatasetView` of exactly the slice's segments at their pinned versions.

        Args:
            catalog: the catalog to read from (default: reopen ``catalog_url``).

        Raises:
            CorruptMetadataError: the catalog's snapshot disagrees with the slice (the dataset
                was recreated, or the metadata was edited by hand).
        """
        if catalog is None:
            catalog = Catalog(self.open_store())
        entry = catalog.dataset_meta(self.dataset)  # the pinned snapshot only: no listing
        if entry.id != self.dataset_id:
            raise CorruptMetadataError(
                f"slice {self.id}: dataset {self.dataset!r} of {catalog.url} is not the one the "
                f"slice was made from (entry id {entry.id}, slice has {self.dataset_id}); the "
                "dataset was deleted and recreated — make a new slice"
            )
        snapshot = view_at_version(catalog, self.dataset, self.dataset_version)
        missing = sorted(set(self.segment_ids) - set(snapshot.segment_ids()))
        if missing:
            raise CorruptMetadataError(
                f"slice {self.id}: snapshot {self.dataset_version} of dataset {self.dataset!r} "
                f"has no segment(s) {missing} the slice pins"
            )
        view = snapshot.filter_segments(self.segment_ids)
        found = {r.segment_id: r.version for r in view.segment_records()}
        if found != self.segment_versions:
            raise CorruptMetadataError(
                f"slice {self.id}: snapshot {self.dataset_version} of dataset {self.dataset!r} "
                f"holds segment versions {found}, not the slice's {self.segment_versions}"
            )
        return view

    def dataset_view(self, catalog: Catalog | None = None) -> DatasetView:
        """Alias of :meth:`view`."""
        return self.view(catalog)


# ----------------------------------------------------------------------------- on disk
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SliceSegmentRecord(_Strict):
    segment_id: SegmentId
    version: SegmentVersionId
    objects: list[Digest]
    # object -> its block-hash object, for the objects that have one (from the segment records;
    # absent in older slices, not part of the slice's id)
    block_hashes: dict[Digest, Digest] = {}


class TimeRangeRecord(_Strict):
    timeline: str
    kind: TimelineKind
    start: int
    end: int


class ExcludedRangeRecord(_Strict):
    segment_id: SegmentId
    timeline: str
    start: int
    end: int


class SliceRecord(_Strict):
    """``slices/<id>.json``."""

    format: Literal["rayform-slice"]
    format_version: Literal[1]
    id: Annotated[str, StringConstraints(pattern=r"^(slc_[0-9a-f]{8,64})?$")]  # "" while unsaved
    name: str | None
    dataset: EntryName
    dataset_id: EntryId
    dataset_version: int
    where: str | None
    time_range: TimeRangeRecord | None
    segments: list[SliceSegmentRecord]
    created_at_ns: int
    excluded: list[ExcludedRangeRecord] = []


def content_digest(record: SliceRecord) -> str:
    """sha256 of what identifies a slice: dataset, pinned segments, time range, name."""
    tr = record.time_range
    content: dict[str, Any] = {
        "dataset": record.dataset,
        "segments": [[s.segment_id, s.version] for s in record.segments],
        "time_range": None if tr is None else [tr.timeline, tr.start, tr.end],
        "name": record.name,
    }
    if record.excluded:  # absent from older slices' content, so their ids stay the same
        content["excluded"] = [[e.segment_id, e.timeline, e.start, e.end] for e in record.excluded]
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _unpickled_slice(values: dict[str, Any]) -> Slice:
    return Slice(**values)


def slice_from_record(record: SliceRecord, catalog_url: str, *,
                      store: Store | None = None) -> Slice:
    tr = record.time_range
    return Slice(
        id=record.id,
        name=record.name,
        dataset=record.dataset,
        dataset_id=record.dataset_id,
        dataset_version=record.dataset_version,
        segments=tuple(SliceSegment(segment_id=s.segment_id, version=s.version,
                                    objects=tuple(s.objects),
                                    block_hashes=tuple(sorted(s.block_hashes.items())))
                       for s in record.segments),
        time_range=None if tr is None else TimeRange(timeline=tr.timeline, start=tr.start,
                                                     end=tr.end),
        where=record.where,
        created_at_ns=record.created_at_ns,
        catalog_url=catalog_url,
        store=store,
        excluded=tuple(ExcludedRange(segment_id=e.segment_id, timeline=e.timeline, start=e.start,
                                     end=e.end) for e in record.excluded),
    )


# --------------------------------------------------------------------------- operations
def load_slice(catalog: Catalog, slice_id: str) -> Slice:
    """Read a stored slice.

    Raises:
        InvalidNameError: not a slice id.
        EntryNotFoundError: no such slice in the catalog.
        CorruptMetadataError: the file is damaged, or does not hash to its id.
    """
    validate_slice_id(slice_id)
    key = slice_key(slice_id)
    try:
        raw = catalog.store.read_bytes(key)
    except FileNotFoundError:
        raise EntryNotFoundError(
            f"catalog {catalog.url} has no slice {slice_id!r}; see client.slices.list() or "
            "`rayform slices list`"
        ) from None
    record = parse_model(SliceRecord, raw, source=f"{catalog.url}/{key}")
    if record.id != slice_id or not content_digest(record).startswith(slice_id[4:]):
        raise CorruptMetadataError(
            f"{catalog.url}/{key}: the slice's content does not match its id {slice_id!r} "
            "(edited or damaged file)"
        )
    return slice_from_record(record, catalog.url, store=catalog.store)


def list_slices(catalog: Catalog) -> list[Slice]:
    """Every slice of the catalog, oldest first."""
    ids = [n[:-5] for n in catalog.store.list_names(SLICES_PREFIX)
           if n.endswith(".json") and _SLICE_ID_RE.match(n[:-5])]
    slices = [load_slice(catalog, i) for i in ids]
    return sorted(slices, key=lambda s: (s.created_at_ns, s.id))


def create_slice(catalog: Catalog, dataset: str | DatasetView, *,
                 segments: Sequence[str] | None = None, where: str | None = None,
                 params: Mapping[str, Any] | None = None,
                 time_range: TimeRange | tuple[Any, Any] | None = None,
                 name: str | None = None,
                 exclude: Sequence[ExcludedRange] = ()) -> Slice:
    """Resolve a selection to pinned segment versions and store it as a slice.

    Args:
        dataset: a dataset name, or a view (its snapshot and segment filter are used).
        segments: segment ids to keep (all by default); unknown ids are an error.
        where: a SQL predicate over the dataset's segment table, e.g.
            ``'"property:success" AND "property:site" = $site'``, evaluated with DataFusion.
        params: values of the ``$name`` placeholders in ``where`` (never format values into it).
        time_range: ``TimeRange`` or ``(start, end)`` on the dataset's only timeline of the
            values' kind; segments outside it are dropped and samples are confined to it.
        name: a human name (part of the slice's content, so of its id).
        exclude: ranges of the selected segments that no sample may touch (ranges of segments
            left out of the selection are dropped).

    Raises:
        SegmentNotFoundError: an id in ``segments`` is not in the dataset.
        QueryError: DataFusion rejected ``where``.
        ConfigError: the selection is empty, or the time range's timeline is ambiguous.
    """
    view = catalog.get_dataset(dataset) if isinstance(dataset, str) else dataset
    entry = view if isinstance(view, DatasetEntry) else catalog.get_dataset(view.name)
    # Filter on ids first: validating a record costs ~0.2 ms, too much for 100k segments.
    chosen = view.segment_ids()
    if segments is not None:
        if isinstance(segments, str):
            segments = [segments]
        known = set(chosen)
        missing = [s for s in segments if s not in known]
        if missing:
            raise SegmentNotFoundError(
                f"slices.create: dataset {view.name!r} (snapshot {view.snapshot_version}) has no "
                f"segment(s) {missing}; known: {chosen[:10]}"
            )
        wanted = set(segments)
        chosen = [s for s in chosen if s in wanted]
    if where is not None:
        selected = _where_segment_ids(view, where, params)
        chosen = [s for s in chosen if s in selected]
    elif params:
        raise ConfigError("slices.create: params given without a where predicate to use them")
    resolved = None if time_range is None else resolve_time_range(view, time_range)
    records = {s: view.segment_record(s) for s in chosen}
    if resolved is not None:
        chosen = [s for s in chosen if _overlaps(records[s], resolved)]
    if not chosen:
        raise ConfigError(
            f"slices.create: the selection of dataset {view.name!r} is empty "
            f"(segments={segments!r}, where={where!r}, time_range={time_range!r}); "
            "a slice needs at least one segment"
        )
    kinds = view.timelines
    excluded = _excluded_records(view, exclude, set(chosen))
    record = SliceRecord(
        format="rayform-slice",
        format_version=FORMAT_VERSION,
        id="",
        name=name,
        dataset=view.name,
        dataset_id=entry.id,
        dataset_version=view.snapshot_version,
        where=where,
        time_range=None if resolved is None else TimeRangeRecord(
            timeline=resolved.timeline, kind=kinds[resolved.timeline],  # type: ignore[arg-type]
            start=resolved.start, end=resolved.end),
        segments=[SliceSegmentRecord(segment_id=s, version=records[s].version,
                                     objects=_objects_of(records[s]),
                                     block_hashes=block_lists(records[s])) for s in chosen],
        created_at_ns=time.time_ns(),
        excluded=excluded,
    )
    return _store_slice(catalog, record)


def _excluded_records(view: DatasetView, exclude: Sequence[ExcludedRange], chosen: set[str]
                      ) -> list[ExcludedRangeRecord]:
    out = []
    for e in exclude:
        if not isinstance(e, ExcludedRange):
            raise ConfigError(f"slices.create: exclude must hold ExcludedRange values, got {e!r}")
        if e.timeline not in view.timelines:
            raise ConfigError(f"slices.create: excluded range of {e.segment_id!r} is on unknown "
                              f"timeline {e.timeline!r}; timelines: {sorted(view.timelines)}")
        if e.segment_id in chosen:
            out.append(ExcludedRangeRecord(segment_id=e.segment_id, timeline=e.timeline,
                                           start=e.start, end=e.end))
    return sorted(out, key=lambda r: (r.segment_id, r.timeline, r.start, r.end))


def _store_slice(catalog: Catalog, record: SliceRecord) -> Slice:
    catalog.require_writable()
    digest = content_digest(record)
    for length in range(SLICE_ID_HEX, len(digest) + 1, 4):
        slice_id = SLICE_ID_PREFIX + digest[:length]
        stamped = record.model_copy(update={"id": slice_id})
        if catalog.store.create_exclusive(slice_key(slice_id), dump_model(stamped)):
            return slice_from_record(stamped, catalog.url)
        existing = load_slice_record(catalog, slice_id)
        if existing is not None and content_digest(existing) == digest:
            return slice_from_record(existing, catalog.url)  # the same selection, made before
    raise CorruptMetadataError(f"slices.create: every id for content {digest} is taken")


def load_slice_record(catalog: Catalog, slice_id: str) -> SliceRecord | None:
    key = slice_key(slice_id)
    try:
        raw = catalog.store.read_bytes(key)
    except FileNotFoundError:
        return None
    return parse_model(SliceRecord, raw, source=f"{catalog.url}/{key}")


def _objects_of(record: SegmentRecord) -> list[str]:
    out: set[str] = set()
    for layer in record.layers.values():
        out.add(layer.object)
        out.update(layer.assets)
    return sorted(out)


def _overlaps(record: SegmentRecord, tr: TimeRange) -> bool:
    span = entity_ranges(record, None).get(tr.timeline)
    return span is not None and tr.overlaps(*span)


def _where_segment_ids(view: DatasetView, where: str, params: Mapping[str, Any] | None
                       ) -> set[str]:
    """Segment ids whose segment-table row satisfies ``where`` (DataFusion, parameterised)."""
    what = f"slices.create where={where!r}"
    check_query_size(where, what=what)
    check_built_values(where, what=what)
    table = view.segment_table_arrow()
    ctx = new_session_context()
    options = read_only_options()
    with translate_errors(what):
        ctx.register_record_batches("segments", [table.to_batches()])
        query = f"SELECT {SEGMENT_ID} FROM segments WHERE ({where})"  # values go in params
        df = ctx.sql(query, options=options, param_values=dict(params) if params else None)
        result = df.to_arrow_table()
    return set(result.column(SEGMENT_ID).to_pylist())


def resolve_time_range(view: DatasetView, given: TimeRange | tuple[Any, Any]) -> TimeRange:
    """A :class:`TimeRange` on a timeline of ``view``.

    Raises:
        ConfigError: unknown timeline, or ``(start, end)`` whose kind matches zero or several
            timelines.
    """
    timelines = view.timelines
    if isinstance(given, TimeRange):
        if given.timeline not in timelines:
            raise ConfigError(
                f"time_range: dataset {view.name!r} has no timeline {given.timeline!r}; "
                f"timelines: {sorted(timelines)}"
            )
        return given
    if not isinstance(given, tuple) or len(given) != 2:
        raise ConfigError(
            f"time_range must be TimeRange(timeline=…, start=…, end=…) or (start, end), "
            f"got {given!r}"
        )
    kind = _value_kind(given[0])
    matches = sorted(t for t, k in timelines.items() if k == kind)
    if len(matches) != 1:
        raise ConfigError(
            f"time_range {given!r}: {len(matches)} {kind} timelines in dataset {view.name!r} "
            f"({matches}); name one with TimeRange(timeline=…, start=…, end=…)"
        )
    return TimeRange(timeline=matches[0], start=given[0], end=given[1])


def _value_kind(value: Any) -> TimelineKind:
    if isinstance(value, np.datetime64 | _dt.datetime):
        return "timestamp"
    if isinstance(value, np.timedelta64 | _dt.timedelta):
        return "duration"
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return "sequence"
    raise ConfigError(
        f"time_range value {value!r} is not an int (sequence), datetime64 / datetime "
        "(timestamp) or timedelta64 / timedelta (duration)"
    )


def _to_int64(value: Any, what: str) -> int:
    ns = time_value_ns(value)
    if ns is not None:
        return ns
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    raise ConfigError(f"TimeRange.{what} must be an int, datetime64 or timedelta64, got {value!r}")
