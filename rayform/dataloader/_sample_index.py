"""SampleIndex: the sample space of a dataset on one timeline, computed from index ranges alone.

Samples are numbered segment after segment (in the order of the dataset's index-range table) and
ascending within a segment. On a sequence timeline every integer of the (trimmed) range is a
sample; on timestamp and duration timelines a :class:`FixedRateSampling` grid is anchored at the
(trimmed) start of each segment. With ``edge="trim"`` (Rerun) each segment's range is shrunk so
that every window offset stays inside the segment; with ``edge="pad"`` nothing is trimmed.

Building reads only ``dataset.filter_segments(ids).index_ranges_arrow()`` (per-segment metadata),
never the data.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog import DatasetView, ExcludedRange, TimeRange
from rayform.dataloader._config import DataSource, EdgeMode, Field, check_edge
from rayform.decoders import IndexValue
from rayform.decoders._requests import index_value_of
from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.recording._columns import RANGE_END_SUFFIX, RANGE_START_SUFFIX, SEGMENT_ID

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class FixedRateSampling:
    """A sampling grid for timestamp and duration timelines: one sample every ``1 / rate_hz`` s.

    Attributes:
        rate_hz: samples per second (> 0); the step is ``round(1e9 / rate_hz)`` ns.
        tolerance_s: a rayform option (keyword-only; Rerun has none). ``0`` (the default) is
            Rerun's rule: an instant reads the latest row at or before it. ``> 0``: rows stored up
            to ``tolerance_s`` *after* an instant count as at it, and a segment's last grid
            instant may lie up to ``tolerance_s`` past its last row. Stored timestamps that are
            the grid instant up to float rounding (LeRobot's float32 seconds: ``1/30`` s is
            stored as ``33333335`` ns, the grid has ``33333333`` ns) then read the row meant
            instead of the one before it. Must be under half the grid step.
    """

    rate_hz: float
    _: KW_ONLY
    tolerance_s: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.rate_hz, bool) or not isinstance(self.rate_hz, int | float) \
                or not math.isfinite(self.rate_hz) or self.rate_hz <= 0:
            raise ConfigError(f"FixedRateSampling.rate_hz must be > 0 and finite, got {self.rate_hz!r}")
        if round(NS_PER_S / self.rate_hz) < 1:
            raise ConfigError(
                f"FixedRateSampling.rate_hz={self.rate_hz!r} gives a step under 1 ns; use <= 1e9"
            )
        tol = self.tolerance_s
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not math.isfinite(tol) \
                or tol < 0 or 2 * round(tol * NS_PER_S) >= self.ns_per_sample:
            raise ConfigError(
                f"FixedRateSampling.tolerance_s must be >= 0 and under half the grid step "
                f"({self.ns_per_sample / 2e9:g} s at rate_hz={self.rate_hz!r}), got {tol!r}; "
                "LeRobot data needs 1e-4"
            )

    @property
    def ns_per_sample(self) -> int:
        return round(NS_PER_S / self.rate_hz)

    @property
    def tolerance_ns(self) -> int:
        return round(self.tolerance_s * NS_PER_S)


@dataclass(frozen=True, slots=True)
class SegmentMetadata:
    """One segment of the sample space.

    Attributes:
        segment_id: the segment.
        index_start: the first sample's index value (ns on temporal timelines).
        index_end: the last sample's index value.
        num_samples: samples in this segment.
        range_start: the segment's own first index value (before trimming); ``None`` if unknown.
        range_end: the segment's own last index value; ``None`` if unknown.
    """

    segment_id: str
    index_start: int
    index_end: int
    num_samples: int
    _: KW_ONLY
    range_start: int | None = None
    range_end: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentArrays:
    """The segments of a :class:`SampleIndex` as columns (one entry per segment, global order).

    Building 100k :class:`SegmentMetadata` objects costs about a second; the index keeps these
    arrays and makes the objects only when asked for them.
    """

    segment_ids: list[str]
    index_start: npt.NDArray[np.int64]
    index_end: npt.NDArray[np.int64]
    num_samples: npt.NDArray[np.int64]
    range_start: npt.NDArray[np.int64]
    range_end: npt.NDArray[np.int64]
    has_range: npt.NDArray[np.bool_]

    def __post_init__(self) -> None:
        n = len(self.segment_ids)
        sizes = {len(a) for a in (self.index_start, self.index_end, self.num_samples,
                                  self.range_start, self.range_end, self.has_range)}
        if sizes - {n}:
            raise ConfigError(f"SegmentArrays: every column needs {n} entries, got sizes "
                              f"{sorted(sizes)}")

    @classmethod
    def from_metadata(cls, segments: Sequence[SegmentMetadata]) -> SegmentArrays:
        def column(values: Iterable[int | None]) -> npt.NDArray[np.int64]:
            return np.array([0 if v is None else v for v in values], dtype=np.int64)

        return cls(segment_ids=[s.segment_id for s in segments],
                   index_start=column(s.index_start for s in segments),
                   index_end=column(s.index_end for s in segments),
                   num_samples=column(s.num_samples for s in segments),
                   range_start=column(s.range_start for s in segments),
                   range_end=column(s.range_end for s in segments),
                   has_range=np.array([s.range_start is not None and s.range_end is not None
                                       for s in segments], dtype=np.bool_))


class SampleIndex:
    """The global sample space: ``total_samples`` samples over a list of segments.

    Args:
        segments: the segments, in global order.
        ns_per_sample: the grid step on temporal timelines (``None`` on sequence timelines).
        ns_dtype: ``"datetime64[ns]"``, ``"timedelta64[ns]"`` or ``None`` (sequence timeline).
        edge: how the index was built (``"trim"`` or ``"pad"``); informational.
        tolerance_ns: rows up to this many ns after an instant are read at it
            (:attr:`FixedRateSampling.tolerance_s`; 0: exact latest-at).
    """

    def __init__(self, segments: Sequence[SegmentMetadata] | SegmentArrays, *,
                 ns_per_sample: int | None = None, ns_dtype: str | None = None,
                 edge: EdgeMode = "trim", tolerance_ns: int = 0) -> None:
        if ns_dtype not in (None, "datetime64[ns]", "timedelta64[ns]"):
            raise ConfigError(
                f"SampleIndex.ns_dtype must be 'datetime64[ns]', 'timedelta64[ns]' or None, "
                f"got {ns_dtype!r}"
            )
        if (ns_dtype is None) != (ns_per_sample is None):
            raise ConfigError("SampleIndex: give ns_per_sample and ns_dtype together (temporal "
                              "timelines) or neither (sequence timelines)")
        arrays = segments if isinstance(segments, SegmentArrays) \
            else SegmentArrays.from_metadata(segments)
        self._arrays = arrays
        # The objects given are the ones handed back (as Rerun's); from arrays, built on first use.
        self._segments: list[SegmentMetadata] | None = None if isinstance(
            segments, SegmentArrays) else list(segments)
        self._made: dict[int, SegmentMetadata] = {}
        self._ns_per_sample = ns_per_sample
        self._ns_dtype = ns_dtype
        self._edge = edge
        if tolerance_ns < 0 or (tolerance_ns and ns_per_sample is None):
            raise ConfigError(f"SampleIndex.tolerance_ns must be >= 0 and only on temporal "
                              f"timelines, got {tolerance_ns!r}")
        self._tolerance_ns = int(tolerance_ns)
        self._step = 1 if ns_per_sample is None else int(ns_per_sample)
        self._starts = arrays.index_start
        self._offsets = np.zeros(len(arrays.num_samples) + 1, dtype=np.int64)
        np.cumsum(arrays.num_samples, out=self._offsets[1:])
        self._range_starts = np.where(arrays.has_range, arrays.range_start, arrays.index_start)
        self._range_ends = np.where(arrays.has_range, arrays.range_end, arrays.index_end)

    # ------------------------------------------------------------------------ properties
    @property
    def segments(self) -> list[SegmentMetadata]:
        if self._segments is None:
            self._segments = [self._segment(i) for i in range(len(self._arrays.segment_ids))]
        return list(self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._arrays.segment_ids)

    def segment_id(self, position: int) -> str:
        """The id of the segment at ``position`` (global order)."""
        return self._arrays.segment_ids[position]

    def _segment(self, i: int) -> SegmentMetadata:
        if self._segments is not None:
            return self._segments[i]
        made = self._made.get(i)
        if made is None:
            made = self._made[i] = self._make_segment(i)
        return made

    def _make_segment(self, i: int) -> SegmentMetadata:
        a = self._arrays
        known = bool(a.has_range[i])
        return SegmentMetadata(a.segment_ids[i], int(a.index_start[i]), int(a.index_end[i]),
                               int(a.num_samples[i]),
                               range_start=int(a.range_start[i]) if known else None,
                               range_end=int(a.range_end[i]) if known else None)

    @property
    def ns_dtype(self) -> str | None:
        return self._ns_dtype

    @property
    def is_timestamp(self) -> bool:
        return self._ns_dtype == "datetime64[ns]"

    @property
    def is_duration(self) -> bool:
        return self._ns_dtype == "timedelta64[ns]"

    @property
    def ns_per_sample(self) -> int | None:
        return self._ns_per_sample

    @property
    def edge(self) -> EdgeMode:
        return self._edge

    @property
    def tolerance_ns(self) -> int:
        """Rows up to this many index units after an instant are read at it (0: exact)."""
        return self._tolerance_ns

    @property
    def total_samples(self) -> int:
        return int(self._offsets[-1])

    @property
    def segment_offsets(self) -> npt.NDArray[np.int64]:
        """``[0, n0, n0+n1, …]``: the global index of each segment's first sample, then the total."""
        return self._offsets.copy()

    @property
    def step(self) -> int:
        """Grid step in index units (1 on sequence timelines, ``ns_per_sample`` otherwise)."""
        return self._step

    def __len__(self) -> int:
        return self.total_samples

    def __repr__(self) -> str:
        kind = self._ns_dtype or "sequence"
        return (f"SampleIndex({self.total_samples} samples, {self.num_segments} segments, "
                f"{kind}, edge={self._edge!r})")

    # ------------------------------------------------------------------------ lookups
    def global_to_local(self, idx: int) -> tuple[SegmentMetadata, IndexValue]:
        """The segment and index value of global sample ``idx``.

        Raises:
            IndexError: ``idx`` is negative or ``>= total_samples``.
        """
        idx = operator.index(idx)
        if not 0 <= idx < self.total_samples:
            raise IndexError(f"sample index {idx} out of range for {self.total_samples} samples")
        seg, value = self.locate(np.array([idx], dtype=np.int64))
        return self._segment(int(seg[0])), index_value_of(int(value[0]), self._ns_dtype)

    def locate(self, indices: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Vectorised :meth:`global_to_local`: ``(segment positions, int64 index values)``.

        Raises:
            IndexError: an index is negative or ``>= total_samples``.
        """
        try:
            idx = np.asarray(indices, dtype=np.int64)
        except OverflowError as err:
            raise IndexError(f"sample index out of range for {self.total_samples} samples: "
                             f"{err}") from err
        total = self.total_samples
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= total):
            bad = idx[(idx < 0) | (idx >= total)][0]
            raise IndexError(f"sample index {int(bad)} out of range for {total} samples")
        seg = np.searchsorted(self._offsets, idx, side="right").astype(np.int64) - 1
        values = self._starts[seg] + (idx - self._offsets[seg]) * self._step
        return seg, values

    def segments_in_first_use(self, chunks: Iterable[npt.ArrayLike]) -> Iterator[str]:
        """Segment ids in the order the samples of ``chunks`` (global indices, read in this
        order) first touch them, each once; lazy, and done once every segment has come."""
        seen: set[int] = set()
        ids: set[str] = set()  # a segment with excluded ranges has several positions
        for chunk in chunks:
            positions, _ = self.locate(chunk)
            for position in dict.fromkeys(positions.tolist()):
                if position not in seen:
                    seen.add(position)
                    sid = self.segment_id(position)
                    if sid not in ids:
                        ids.add(sid)
                        yield sid
            if len(seen) == self.num_segments:
                return

    def segment_bounds(self, segment_positions: npt.NDArray[np.int64]
                       ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Each segment's own (untrimmed) first and last index value."""
        return self._range_starts[segment_positions], self._range_ends[segment_positions]

    def resolve_local_index(self, seg: SegmentMetadata, pos: int) -> IndexValue:
        """The index value of the ``pos``-th sample of segment ``seg`` (Rerun's names)."""
        if not 0 <= pos < seg.num_samples:
            raise IndexError(
                f"position {pos} out of range for segment {seg.segment_id!r} with "
                f"{seg.num_samples} samples"
            )
        return index_value_of(seg.index_start + pos * self._step, self._ns_dtype)

    def offset_index(self, index_value: IndexValue, offset: int | float) -> IndexValue:
        """``index_value`` moved by one window offset (seconds on temporal timelines)."""
        native = native_offsets((offset,), self._ns_dtype is not None, "offset")[0]
        return index_value_of(_as_int(index_value) + int(native), self._ns_dtype)

    def output_index_values(self, index_value: IndexValue, field: Field) -> tuple[IndexValue, ...]:
        """The index values a field reads for a sample: one per window offset, or the sample's."""
        if field.window is None:
            return (index_value,)
        return tuple(self.offset_index(index_value, o) for o in field.window)

    # ------------------------------------------------------------------------ building
    @staticmethod
    def build(source: DataSource, index: str, fields: Mapping[str, Field], *,
              timeline_sampling: FixedRateSampling | None = None,
              edge: EdgeMode = "trim") -> SampleIndex:
        """The sample space of ``source`` on timeline ``index``, from index-range metadata.

        Raises:
            ColumnNotFoundError: ``index`` is not a timeline of the dataset.
            TypeError: a temporal timeline without ``timeline_sampling``.
            ConfigError: a non-integral window offset on a sequence timeline.
        """
        edge = check_edge(edge)
        view = resolve_view(source)
        if not view.segment_ids():
            return SampleIndex([], edge=edge)
        kind = timeline_kind(view, index)
        temporal = kind != "sequence"
        if temporal and timeline_sampling is None:
            raise TypeError(
                f"Index {index!r} is a {kind} timeline; you must pass "
                "timeline_sampling=FixedRateSampling(rate_hz=…)"
            )
        if not temporal and timeline_sampling is not None:
            warnings.warn(
                f"timeline_sampling={timeline_sampling!r} is ignored: index {index!r} is not a "
                "timestamp or duration timeline",
                UserWarning,
                stacklevel=2,
            )
        lo_off, hi_off = window_extent(fields, index, temporal=temporal)
        ranges = view.index_ranges_arrow()
        if source.time_range is not None and source.time_range.timeline != index:
            tr = source.time_range
            raise ConfigError(
                f"the source's time range is on timeline {tr.timeline!r} but samples are drawn "
                f"on {index!r}; sample on {tr.timeline!r} or make the slice's TimeRange on "
                f"{index!r}"
            )
        sampling = timeline_sampling if temporal else None
        return _from_ranges(ranges, index, kind, None if sampling is None else sampling.ns_per_sample,
                            (lo_off, hi_off) if edge == "trim" else (0, 0), edge,
                            tolerance_ns=0 if sampling is None else sampling.tolerance_ns,
                            time_range=source.time_range,
                            excluded=_excluded_on(source.excluded, index),
                            window=(lo_off, hi_off))


def resolve_view(source: DataSource) -> DatasetView:
    """The source's dataset restricted to its segments, pinned to the current snapshot."""
    dataset = source.dataset
    ids = dataset.segment_ids()
    if source.segments is not None:
        wanted = set(source.segments)
        ids = [i for i in ids if i in wanted]
    return dataset.filter_segments(ids)


def timeline_kind(view: DatasetView, index: str) -> str:
    """The kind of timeline ``index`` ("sequence", "timestamp" or "duration").

    Raises:
        ColumnNotFoundError: no such timeline.
    """
    timelines: dict[str, str] = dict(view.timelines)
    kind = timelines.get(index)
    if kind is None:
        raise ColumnNotFoundError(
            f"unknown index timeline {index!r}; the dataset has timelines {sorted(timelines)}"
        )
    return kind


def native_offsets(offsets: Iterable[int | float], temporal: bool, what: str
                   ) -> npt.NDArray[np.int64]:
    """Window offsets in index units: ns (``round(s * 1e9)``) on temporal timelines.

    Raises:
        ConfigError: a non-integral offset on a sequence timeline.
    """
    values = list(offsets)
    if temporal:
        return np.array([round(float(o) * NS_PER_S) for o in values], dtype=np.int64)
    bad = [o for o in values if float(o) != math.floor(float(o))]
    if bad:
        raise ConfigError(
            f"{what}: integer timelines require integral window offsets, got {tuple(bad)!r} in "
            f"{tuple(values)!r}; use integers (steps) on sequence timelines"
        )
    return np.array([int(o) for o in values], dtype=np.int64)


def field_offsets(key: str, field: Field, index: str, *, temporal: bool) -> npt.NDArray[np.int64]:
    """A field's window offsets in index units (``[0]`` without a window).

    Raises:
        ConfigError: non-integral offsets or ``max_staleness`` on a sequence timeline.
    """
    if not temporal and field.max_staleness is not None \
            and float(field.max_staleness) != math.floor(float(field.max_staleness)):
        raise ConfigError(
            f"Field {key!r}: sequence timeline {index!r} requires an integral max_staleness, "
            f"got {field.max_staleness!r}"
        )
    if field.window is None:
        return np.zeros(1, dtype=np.int64)
    return native_offsets(field.window, temporal,
                          f"Field {key!r} on sequence timeline {index!r}")


def window_extent(fields: Mapping[str, Field], index: str, *, temporal: bool) -> tuple[int, int]:
    """``(min(0, smallest offset), max(0, largest offset))`` over all fields, in index units."""
    lo, hi = 0, 0
    for key, field in fields.items():
        offsets = field_offsets(key, field, index, temporal=temporal)
        lo = min(lo, int(offsets.min()))
        hi = max(hi, int(offsets.max()))
    return lo, hi


def column_int64(ranges: pa.Table, name: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    col = ranges.column(name).combine_chunks()
    valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
    if not pa.types.is_int64(col.type):
        col = col.view(pa.int64()) if col.type.bit_width == 64 else col.cast(pa.int64())
    values = np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return values, valid


def _excluded_on(excluded: Sequence[ExcludedRange], index: str
                 ) -> dict[str, list[tuple[int, int]]]:
    """``{segment: [(start, end), …]}`` of the excluded ranges on timeline ``index``."""
    out: dict[str, list[tuple[int, int]]] = {}
    for e in excluded:
        if e.timeline == index:
            out.setdefault(e.segment_id, []).append((e.start, e.end))
    return out


def _allowed_pieces(lo: int, count: int, step: int, window: tuple[int, int],
                    ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(first sample, sample count)`` runs of the grid ``lo + k * step`` (``k < count``) whose
    window ``[v + window[0], v + window[1]]`` touches none of the inclusive ``ranges``."""
    blocked = []
    for start, end in ranges:
        k0 = -((lo - (start - window[1])) // step)  # ceil((start - hi - lo) / step)
        k1 = (end - window[0] - lo) // step
        k0, k1 = max(k0, 0), min(k1, count - 1)
        if k0 <= k1:
            blocked.append((k0, k1))
    pieces = []
    k = 0
    for k0, k1 in sorted(blocked):
        if k0 > k:
            pieces.append((k, k0 - k))
        k = max(k, k1 + 1)
    if k < count:
        pieces.append((k, count - k))
    return pieces


def _from_ranges(ranges: pa.Table, index: str, kind: str, ns_per_sample: int | None,
                 extent: tuple[int, int], edge: EdgeMode, *, tolerance_ns: int = 0,
                 time_range: TimeRange | None = None,
                 excluded: Mapping[str, list[tuple[int, int]]] | None = None,
                 window: tuple[int, int] = (0, 0)) -> SampleIndex:
    start_col, end_col = index + RANGE_START_SUFFIX, index + RANGE_END_SUFFIX
    if start_col not in ranges.column_names or end_col not in ranges.column_names:
        raise ColumnNotFoundError(
            f"the index ranges have no {start_col!r}/{end_col!r} columns; columns: "
            f"{ranges.column_names}"
        )
    starts, start_ok = column_int64(ranges, start_col)
    ends, end_ok = column_int64(ranges, end_col)
    step = 1 if ns_per_sample is None else ns_per_sample
    lo = starts - extent[0]
    hi = ends + tolerance_ns - extent[1]
    if time_range is not None:  # the grid points of the whole segment that lie in the range
        lo = np.where(lo < time_range.start, lo + -((lo - time_range.start) // step) * step, lo)
        hi = np.minimum(hi, time_range.end)
    keep = start_ok & end_ok & (hi >= lo)
    counts = np.where(keep, (hi - lo) // step + 1, 0)
    ids = ranges.column(SEGMENT_ID).to_pylist()
    kept = np.flatnonzero(keep)
    counts = counts[kept].astype(np.int64)
    firsts = lo[kept].astype(np.int64)
    kept_ids = [ids[i] for i in kept.tolist()]
    if excluded:  # a segment with excluded ranges becomes one entry per allowed run
        rows, seg_ids, new_firsts, new_counts = [], [], [], []
        for j, sid in enumerate(kept_ids):
            pieces = [(0, int(counts[j]))] if sid not in excluded else _allowed_pieces(
                int(firsts[j]), int(counts[j]), step, window, excluded[sid])
            for k, n in pieces:
                rows.append(j)
                seg_ids.append(sid)
                new_firsts.append(int(firsts[j]) + k * step)
                new_counts.append(n)
        at = np.array(rows, dtype=np.int64)
        kept, kept_ids = kept[at], seg_ids
        firsts = np.array(new_firsts, dtype=np.int64)
        counts = np.array(new_counts, dtype=np.int64)
    segments = SegmentArrays(
        segment_ids=kept_ids,
        index_start=firsts,
        index_end=(firsts + (counts - 1) * step).astype(np.int64),
        num_samples=counts,
        range_start=starts[kept], range_end=ends[kept],
        has_range=np.ones(len(kept), dtype=np.bool_))
    ns_dtype = None if kind == "sequence" else (
        "datetime64[ns]" if kind == "timestamp" else "timedelta64[ns]")
    return SampleIndex(segments, ns_per_sample=ns_per_sample, ns_dtype=ns_dtype, edge=edge,
                       tolerance_ns=tolerance_ns)


def _as_int(value: IndexValue) -> int:
    if isinstance(value, np.datetime64):
        return int(value.astype("datetime64[ns]").astype(np.int64))
    if isinstance(value, np.timedelta64):
        return int(value.astype("timedelta64[ns]").astype(np.int64))
    return int(value)
