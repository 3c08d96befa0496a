"""The sample pipeline: global indices in, decoded sample dicts out (one pipeline for all datasets).

For a block (iterable) or batch (map) of global indices:

1. locate each sample (segment, index value) with vectorised arithmetic on the SampleIndex;
2. order the samples by segment, then index value;
3. per field: compute every output position (sample value + window offsets, clamped to the segment
   with ``edge="pad"``), resolve it to the latest row at or before it (or at most
   ``FixedRateSampling.tolerance_s`` after it, when set) with ``numpy.searchsorted``
   on the segment's memory-mapped column (data plane; no DataFusion), and gather the rows each
   segment needs into one Arrow column (a zero-copy slice when they are dense; dense numeric
   rows go straight from the numpy gather to ``NumericDecoder``'s stacked result);
4. for decoders with a keyframe column (video): find each request's latest keyframe at or before
   its earliest output, and decode from that keyframe row to its last output row;
5. decode every field once for the whole block (:class:`~rayform.decoders.FieldBatch` plus
   :class:`~rayform.decoders.RequestArrays`), fields concurrently and image requests split across
   the decode threads (writing into one block-ordered buffer,
   :class:`~rayform.decoders._output_arena.OutputArena`);
6. hold the results by field (:class:`~rayform.dataloader._block_columns.BlockColumns`, block
   order), from which come per-sample dicts (:meth:`SamplePipeline.process`) or whole batches
   (``RerunIterableDataset(batch_size=…)``).

A sample value is ``None`` where the data is missing (no row at or before an output position, no
prior keyframe, a null row). Data that is there but cannot be decoded is reported by its decoder
and handled by the pipeline's ``decode_errors`` policy (:mod:`rayform.dataloader._decode_policy`).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import torch

from rayform._tracing import tracing_enabled, tracing_scope
from rayform.catalog import DatasetView, SegmentData
from rayform.dataloader._allocator import tune_allocator_if_asked
from rayform.dataloader._block_columns import (
    BlockColumns,
    Column,
    ListColumn,
    Sample,
    StackedColumn,
    field_column,
)
from rayform.dataloader._config import EdgeMode, Field
from rayform.dataloader._decode_policy import (
    DecodeErrorPolicy,
    FailureLog,
    apply_decode_policy,
    check_decode_policy,
)
from rayform.dataloader._field_columns import check_field_column
from rayform.dataloader._field_extent import FieldExtent, field_extent
from rayform.dataloader._gather import (
    GatheredBlobs,
    dense_column,
    dense_values,
    gather_arrow,
    gather_blob_views,
)
from rayform.dataloader._keyframes import KeyframeIndex
from rayform.dataloader._row_tables import RowTable, output_positions
from rayform.dataloader._sample_batch import DeferredSamples, SampleBatch
from rayform.dataloader._sample_index import SampleIndex, field_offsets
from rayform.dataloader._segment_columns import SegmentColumn, SegmentColumns
from rayform.decoders import FieldBatch, NumericDecoder, RequestArrays, TensorRows
from rayform.decoders._output_arena import OutputArena
from rayform.decoders._requests import CodedIds
from rayform.decoders._thread_pool import ThreadPool
from rayform.errors import ConfigError

META_KEY = "meta"
"""Key of the per-sample metadata dict when ``sample_metadata=True``."""
IS_PAD_SUFFIX = "_is_pad"
"""Suffix of the bool mask ``[T]`` of a windowed field with ``edge="pad"``."""
MIN_REQUESTS_PER_THREAD = 4
TASKS_PER_THREAD = 4


@dataclass(frozen=True, slots=True)
class FieldPlan:
    """A field prepared for the pipeline: native window offsets and its keyframe column."""

    key: str
    field: Field
    offsets: npt.NDArray[np.int64]
    keyframe_path: str | None
    column_type: pa.DataType

    @property
    def is_windowed(self) -> bool:
        return self.field.window is not None


@dataclass(slots=True)
class FieldJob:
    """One field's resolved block: its rows, its requests, and which samples had no data."""

    plan: FieldPlan
    batch: FieldBatch | None
    requests: RequestArrays
    missing: npt.NDArray[np.bool_]  # [B] in input order
    extent: FieldExtent | None = None
    decoded: TensorRows | None = None  # NumericDecoder's results, taken from the dense gather


@dataclass(slots=True)
class ResolvedBlock:
    """A block after row resolution, before decoding."""

    indices: npt.NDArray[np.int64]
    segment_ids: CodedIds  # per sample, input order
    values: npt.NDArray[np.int64]  # per sample, input order
    jobs: list[FieldJob]
    pad_masks: dict[str, npt.NDArray[np.bool_]]  # key -> [B, T], input order
    failures: FailureLog  # what the jobs' decoders report (their FieldBatch.on_failure)


class SamplePipeline:
    """Resolves and decodes samples of one dataset view on one timeline.

    Args:
        view: the pinned dataset view (pickles as configuration).
        index: the index timeline.
        fields: sample key -> :class:`Field`.
        sample_index: the sample space.
        decode_threads: decode threads per process (``None``: one per CPU, up to 8; in a
            DataLoader worker, the CPUs divided among the workers).
        edge: ``"trim"`` or ``"pad"`` (``<key>_is_pad`` masks for windowed fields).
        sample_metadata: add ``sample["meta"]`` (segment id and version, index value, index).

    Raises:
        ColumnNotFoundError: a field's column is not in the dataset.
        ConfigError: a decoder's keyframe column is missing, or sample keys collide.
    """

    def __init__(self, view: DatasetView, index: str, fields: Mapping[str, Field],
                 sample_index: SampleIndex, *, decode_threads: int | None, edge: EdgeMode,
                 sample_metadata: bool) -> None:
        if not fields:
            raise ConfigError("fields must name at least one Field, e.g. "
                              "{'state': Field('/joints:Scalars:scalars', NumericDecoder())}")
        tune_allocator_if_asked()
        # Resolved here, in the process that builds the dataset: forked DataLoader workers then
        # inherit the tracer instead of each importing OpenTelemetry again, every epoch.
        tracing_enabled()
        self._view = view
        self._index = index
        self._sample_index = sample_index
        self._edge = edge
        self._sample_metadata = sample_metadata
        self._decode_errors: DecodeErrorPolicy = "raise"
        self._concurrent_blocks = 1
        self._warned: set[str] = set()
        temporal = sample_index.ns_dtype is not None
        schema = view.schema()
        plans: list[FieldPlan] = []
        for key, field in fields.items():
            if not isinstance(key, str) or not key:
                raise ConfigError(f"field keys must be non-empty strings, got {key!r}")
            check_field_column(key, field, schema)
            column_type = schema.field(field.path).type
            keyframe_path = field.prior_keyframe_path
            if keyframe_path is not None and keyframe_path not in schema.component_columns():
                raise ConfigError(
                    f"Field {key!r}: {type(field.decode).__name__} needs the keyframe column "
                    f"{keyframe_path!r}, which the dataset does not have; write it with the "
                    "recording (RecordingWriter.log_video_stream(is_keyframe=…))"
                )
            plans.append(FieldPlan(key=key, field=field,
                                   offsets=field_offsets(key, field, index, temporal=temporal),
                                   keyframe_path=keyframe_path, column_type=column_type))
        self._plans = plans
        self._check_keys()
        # ``decode_threads`` threads, started as work needs them: one block at a time, the
        # caller decodes beside ``threads - 1`` of them; blocks prepared at once decode on all
        # of them (their fetch threads wait), never on more threads than asked.
        self._pool = ThreadPool(decode_threads, name="rayform-decode", background=True)
        self._columns = SegmentColumns(view, index)
        self._keyframe_index = KeyframeIndex(self._columns)
        self._row_tables: dict[str, RowTable | None] = {}

    def _check_keys(self) -> None:
        keys = {p.key for p in self._plans}
        extra: list[str] = []
        if self._edge == "pad":
            extra += [p.key + IS_PAD_SUFFIX for p in self._plans if p.is_windowed]
        if self._sample_metadata:
            extra.append(META_KEY)
        clash = sorted(keys.intersection(extra))
        if clash:
            raise ConfigError(
                f"field keys {clash} collide with keys the loader adds (padding masks "
                f"'<key>{IS_PAD_SUFFIX}', metadata {META_KEY!r}); rename those fields"
            )

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in (
            "_view", "_index", "_sample_index", "_edge", "_sample_metadata", "_plans", "_pool",
            "_decode_errors", "_concurrent_blocks")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._warned = set()
        self._columns = SegmentColumns(self._view, self._index)
        self._keyframe_index = KeyframeIndex(self._columns)
        self._row_tables = {}

    # ---------------------------------------------------------------------------- access
    @property
    def sample_index(self) -> SampleIndex:
        return self._sample_index

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self._plans]

    @property
    def view(self) -> DatasetView:
        return self._view

    @property
    def decode_errors(self) -> DecodeErrorPolicy:
        """What a decode failure does: ``"raise"`` (default), ``"skip"`` or ``"none"`` (see
        :mod:`rayform.dataloader._decode_policy`)."""
        return self._decode_errors

    @decode_errors.setter
    def decode_errors(self, policy: DecodeErrorPolicy) -> None:
        self._decode_errors = check_decode_policy(policy)

    @property
    def concurrent_blocks(self) -> int:
        """Blocks the caller decodes at once (its prefetch threads); whole-field decoders
        (video) are told to use their share of the decode threads per block
        (:attr:`FieldBatch.decode_threads`), so that the blocks do not oversubscribe the CPUs."""
        return self._concurrent_blocks

    @concurrent_blocks.setter
    def concurrent_blocks(self, blocks: int) -> None:
        if not isinstance(blocks, int) or blocks < 1:
            raise ConfigError(f"concurrent_blocks must be an integer >= 1, got {blocks!r}")
        self._concurrent_blocks = blocks

    def open_segment(self, segment_id: str) -> SegmentData:
        """The data-plane handle of a segment (handed to decoders through ``FieldBatch``)."""
        return self._view.open_segment(segment_id)

    # ---------------------------------------------------------------------------- running
    def process(self, indices: Sequence[int] | npt.NDArray[np.int64], *,
                decode_errors: DecodeErrorPolicy | None = None) -> SampleBatch:
        """Decode the samples at ``indices`` (global); one dict per index, in the same order
        (a :class:`SampleBatch`: also the batch collated without a stack).

        Images are decoded channels-last (:attr:`FieldBatch.channels_last`), each at its
        sample's row of the field's one buffer: a sample's image is a ``[C, H, W]`` view of
        ``[H, W, C]`` memory (as torchvision's ``pil_to_tensor`` gives it) and the collated
        batch a ``torch.channels_last`` ``[N, C, H, W]`` view of the whole buffer.
        ``decode_errors`` overrides :attr:`decode_errors` for this call.

        Raises:
            IndexError: an index is out of range.
            DecodeError: data failed to decode and the policy is ``"raise"``.
        """
        columns = self._process_columns(indices, decode_errors=decode_errors)
        return _sample_batch(columns)

    def process_dropping_failures(self, indices: Sequence[int] | npt.NDArray[np.int64]
                                  ) -> list[Sample]:
        """Like :meth:`process`, leaving out the samples that failed to decode (``"skip"``);
        a :class:`SampleBatch` (collated without a stack) when none failed."""
        columns = self._process_columns(indices, decode_errors=None)
        if not columns.failed:
            return _sample_batch(columns)
        return [s for i, s in enumerate(columns.samples()) if i not in columns.failed]

    def _process_columns(self, indices: Sequence[int] | npt.NDArray[np.int64], *,
                         decode_errors: DecodeErrorPolicy | None) -> BlockColumns:
        """The block of :meth:`process`, held by field (images channels-last)."""
        # With decode threads, a field's decoding (images, video) starts as soon as its rows are
        # resolved, before the inline (numeric) fields' are. This thread takes the first image
        # task itself at once: the pool's threads, woken by the tasks, need the GIL to reach
        # their own first decode, and this thread's Python (resolving the numeric fields) would
        # hold it; its decode releases it. The numeric fields are resolved after that task,
        # while the threads decode.
        run = self._task_run(None) if self._pool.threads > 1 else None
        n = len(indices)

        def start(job: FieldJob) -> None:
            assert run is not None
            concurrency = job.plan.field.decode.decode_concurrency
            if concurrency != "inline":
                tasks = self._job_tasks(job, n, run, {}, channels_last=True)
                run.add(tasks)
                if concurrency == "requests" and len(tasks) > 1 and not run.pooled:
                    run.take_one()  # decoding here lets the woken threads take the GIL

        try:
            with tracing_scope("rayform.fetch", attributes={"rayform.num_samples": n}):
                block = self.resolve(indices, gather=True, on_job=None if run is None else start)
        except BaseException:
            if run is not None:
                run.cancel()
            raise
        with tracing_scope("rayform.decode", attributes={"rayform.num_samples": n}):
            return self.decode_columns(block, decode_errors=decode_errors, started=run,
                                       channels_last=True)

    def missing_fields(self, indices: Sequence[int] | npt.NDArray[np.int64]
                       ) -> dict[str, npt.NDArray[np.bool_]]:
        """Per field, which samples have no data (checked on the index alone, nothing decoded)."""
        block = self.resolve(indices, gather=False)
        return {job.plan.key: job.missing for job in block.jobs}

    def extents(self, indices: Sequence[int] | npt.NDArray[np.int64]) -> dict[str, FieldExtent]:
        """Per field, what each sample reads and whether it has data (index alone, no decode)."""
        block = self.resolve(indices, gather=False, extents=True)
        return {job.plan.key: job.extent for job in block.jobs if job.extent is not None}

    def resolve(self, indices: Sequence[int] | npt.NDArray[np.int64], *, gather: bool,
                extents: bool = False,
                on_job: Callable[[FieldJob], None] | None = None) -> ResolvedBlock:
        """Resolve every field's rows for ``indices`` (gather them when ``gather``; compute each
        field's :class:`FieldExtent` when ``extents``). With ``on_job``, the fields decoded on
        the decode threads are resolved first, each handed to ``on_job`` as soon as it is, then
        the fields decoded inline (numeric; the block's jobs stay in field order)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        seg_pos, values = self._sample_index.locate(idx)
        order = np.lexsort((values, seg_pos)).astype(np.int64)
        sorted_seg = seg_pos[order]
        sorted_values = values[order]
        n = len(idx)
        breaks = np.flatnonzero(np.diff(sorted_seg)) + 1
        run_starts = np.concatenate([[0], breaks]).astype(np.int64) if n else np.zeros(0, np.int64)
        run_stops = np.concatenate([breaks, [n]]).astype(np.int64) if n else np.zeros(0, np.int64)
        segment_id = self._sample_index.segment_id
        run_ids = [segment_id(int(sorted_seg[a])) for a in run_starts.tolist()]
        run_codes = np.repeat(np.arange(len(run_ids), dtype=np.int64), run_stops - run_starts)
        sorted_ids = CodedIds(run_codes, run_ids)
        self._columns.open_segments(run_ids)
        range_lo, range_hi = self._sample_index.segment_bounds(sorted_seg)
        runs = list(zip(run_ids, run_starts.tolist(), run_stops.tolist(), strict=True))
        jobs: list[FieldJob] = []
        pad_masks: dict[str, npt.NDArray[np.bool_]] = {}
        failures = FailureLog()
        tolerance = self._sample_index.tolerance_ns
        plans = self._plans if on_job is None else sorted(
            self._plans, key=lambda p: p.field.decode.decode_concurrency == "inline")
        pad = self._edge == "pad"
        sorted_idx = idx[order]
        run_positions = sorted_seg[run_starts]
        for plan in plans:
            positions, moved = output_positions(sorted_values, plan.offsets,
                                                range_lo if pad else None,
                                                range_hi if pad else None, tolerance)
            if moved is not None and plan.is_windowed:
                mask = np.empty_like(moved)
                mask[order] = moved
                pad_masks[plan.key] = mask
            cached = self._table_rows(plan, sorted_idx, run_positions)
            jobs.append(self._resolve_field(plan, positions, runs, order, sorted_ids,
                                            sorted_values, gather=gather, extents=extents,
                                            failures=failures, cached_rows=cached))
            if on_job is not None:
                on_job(jobs[-1])
        if on_job is not None:
            rank = {plan.key: i for i, plan in enumerate(self._plans)}
            jobs.sort(key=lambda job: rank[job.plan.key])
        codes_in_order = np.empty(n, dtype=np.int64)
        codes_in_order[order] = run_codes
        return ResolvedBlock(indices=idx, segment_ids=CodedIds(codes_in_order, run_ids),
                             values=values, jobs=jobs, pad_masks=pad_masks, failures=failures)

    def _resolve_field(self, plan: FieldPlan, positions: npt.NDArray[np.int64],
                       runs: list[tuple[str, int, int]], order: npt.NDArray[np.int64],
                       sorted_ids: CodedIds, sorted_values: npt.NDArray[np.int64], *,
                       gather: bool, extents: bool, failures: FailureLog,
                       cached_rows: npt.NDArray[np.int64] | None = None) -> FieldJob:
        """One field's rows, gathered when ``gather``; ``cached_rows`` are its rows from the
        field's :class:`RowTable` (sorted order) when it has one."""
        n, width = positions.shape
        rows_all = np.full((n, width), -1, dtype=np.int64) if cached_rows is None \
            else cached_rows
        path = plan.field.path
        cols: list[SegmentColumn | None] = []
        starts_all = stops_all = None
        # Numeric rows are gathered with numpy as they are resolved (None: use Arrow instead).
        dense: list[npt.NDArray[Any]] | None = None
        dense_type: pa.DataType | None = None
        ok: npt.NDArray[np.bool_] | None
        if plan.keyframe_path is not None:
            starts_all, stops_all, ok = self._resolve_video(plan.keyframe_path, path, positions,
                                                            runs, rows_all, cols)
        else:
            dense = [] if gather else None
            for segment_id, a, b in runs:
                col = self._columns.get(segment_id, path)
                cols.append(col)
                if col is None:
                    dense = None
                    continue
                if cached_rows is not None:
                    rows = cached_rows[a:b].reshape(-1)
                else:
                    query = positions[a:b].reshape(-1)
                    rows = np.zeros(len(query), dtype=np.int64) if col.is_static \
                        else col.index.searchsorted(query, side="right") - 1
                    rows_all[a:b] = rows.reshape(b - a, width)
                if dense is not None:
                    values = col.dense
                    if values is None or (dense_type is not None and (
                            col.values.type != dense_type or values.shape[1] != dense[0].shape[1]
                            or values.dtype != dense[0].dtype)):
                        dense = None
                    else:
                        dense.append(values[rows])
                        dense_type = col.values.type
            ok = _complete(rows_all)  # None: every sample is complete
        if ok is None:  # every sample has its rows (the common case): no masks to apply
            ok = np.ones(n, dtype=np.bool_)
            missing = np.zeros(n, dtype=np.bool_)
            keep = np.arange(n, dtype=np.int64)
            out_rows = rows_all
        else:
            missing = np.empty(n, dtype=np.bool_)
            missing[order] = ~ok
            keep = np.flatnonzero(ok)
            out_rows = rows_all[keep]
        batch = None
        dec_start = dec_stop = None
        decoded = None
        if gather and len(keep):
            if dense and dense_type is not None and plan.field.select is None \
                    and isinstance(plan.field.decode, NumericDecoder):
                gathered = dense_values(dense, keep, n, width)
                in_order = len(keep) == n and not bool(np.all(order[1:] > order[:-1]))
                if in_order:  # every sample: held in block order (a batch is then a view)
                    block_order = np.empty_like(gathered)
                    block_order[order] = gathered
                    gathered = block_order
                decoded = plan.field.decode.decode_dense(gathered, windowed=plan.is_windowed)
                if decoded is not None and in_order:  # request i (sorted) is row order[i]
                    decoded = TensorRows(decoded.tensor, order)
            if decoded is None:  # the decoder reads the rows from one Arrow column
                blobs: GatheredBlobs | None = None
                column: pa.Array | None = None
                if dense and dense_type is not None:
                    column = dense_column(dense, dense_type, keep, n, width)
                    out_rows = np.arange(len(keep) * width, dtype=np.int64).reshape(-1, width)
                else:
                    found = None if starts_all is not None else gather_blob_views(
                        plan.column_type, runs, cols, rows_all, ok)
                    if found is not None:
                        # The column is joined only if a decoder asks (ImageDecoder reads the
                        # blobs where they lie).
                        blobs, all_rows = found
                        dec_all_start = dec_all_stop = None
                    else:
                        column, all_rows, dec_all_start, dec_all_stop = gather_arrow(
                            plan.column_type, runs, cols, rows_all, ok, starts_all, stops_all)
                    out_rows = all_rows[keep]
                    dec_start = None if dec_all_start is None else dec_all_start[keep]
                    dec_stop = None if dec_all_stop is None else dec_all_stop[keep]
                options: dict[str, Any] = {"column": column} if blobs is None else {
                    "make_column": blobs.column, "blobs": blobs.views}
                batch = FieldBatch(select=plan.field.select, is_windowed=plan.is_windowed,
                                   open_segment=self.open_segment, path=path,
                                   on_failure=failures.listener(plan.key, path), **options)
        requests = RequestArrays(
            sample_positions=order[keep],
            segment_ids=CodedIds(sorted_ids.codes[keep], sorted_ids.names),
            index_values=sorted_values[keep],
            output_rows=out_rows,
            decode_starts=dec_start,
            decode_stops=dec_stop,
            starts_at_keyframe=plan.keyframe_path is not None,
            ns_dtype=self._sample_index.ns_dtype,
        )
        extent = field_extent(positions, runs, cols, rows_all, starts_all, ok, order) if extents \
            else None
        return FieldJob(plan=plan, batch=batch, requests=requests, missing=missing, extent=extent,
                        decoded=decoded)

    def _table_rows(self, plan: FieldPlan, sorted_idx: npt.NDArray[np.int64],
                    run_positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
        """The rows of the samples ``sorted_idx`` from the field's :class:`RowTable` (made on
        first use); ``None`` for a keyframe field or one whose table does not fit."""
        try:
            table = self._row_tables[plan.key]
        except KeyError:
            fits = plan.keyframe_path is None \
                and RowTable.fits(self._sample_index, len(plan.offsets))
            table = RowTable(self._sample_index, plan.offsets, pad=self._edge == "pad") \
                if fits else None
            self._row_tables[plan.key] = table
        if table is None:
            return None
        path = plan.field.path
        segment_id = self._sample_index.segment_id
        rows = table.rows(sorted_idx, run_positions,
                          lambda p: self._columns.get(segment_id(p), path))
        if rows is None:
            self._row_tables[plan.key] = None
        return rows

    def _resolve_video(self, keyframe_path: str, path: str, positions: npt.NDArray[np.int64],
                       runs: list[tuple[str, int, int]], rows_all: npt.NDArray[np.int64],
                       cols: list[SegmentColumn | None]
                       ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                  npt.NDArray[np.bool_]]:
        """Rows, keyframe-to-last-output decode ranges and completeness of a keyframe field."""
        n, width = positions.shape
        ok = np.zeros(n, dtype=np.bool_)
        starts_all = np.zeros(n, dtype=np.int64)
        stops_all = np.zeros(n, dtype=np.int64)
        for segment_id, a, b in runs:
            col = self._columns.get(segment_id, path)
            cols.append(col)
            if col is None:
                continue
            rows = col.latest_at(positions[a:b].reshape(-1)).reshape(b - a, width)
            starts, stops, kf_ok = self._keyframe_index.decode_ranges(segment_id, keyframe_path, col.index,
                                                         positions[a:b], rows)
            rows_all[a:b] = rows
            ok[a:b] = (rows.min(axis=1) >= 0) & kf_ok
            starts_all[a:b] = starts
            stops_all[a:b] = stops
        return starts_all, stops_all, ok

    def decode(self, block: ResolvedBlock) -> list[Sample]:
        """Decode a resolved block into sample dicts (input order).

        Raises:
            DecodeError: data failed to decode and the policy is ``"raise"``.
        """
        return self.decode_reporting(block)[0]

    def decode_reporting(self, block: ResolvedBlock, *,
                         decode_errors: DecodeErrorPolicy | None = None
                         ) -> tuple[list[Sample], set[int]]:
        """Decode a resolved block into sample dicts; also the positions of the samples that
        failed to decode."""
        columns = self.decode_columns(block, decode_errors=decode_errors)
        return columns.samples(), columns.failed

    def process_columns(self, indices: Sequence[int] | npt.NDArray[np.int64], *,
                        channels_last: bool = False) -> BlockColumns:
        """Like :meth:`process`, the block held by field (:class:`BlockColumns`); with
        ``channels_last`` image columns may be ``[C, H, W]`` views of ``[H, W, C]`` memory
        (:attr:`FieldBatch.channels_last`), for a caller that cuts batches from the columns."""
        with tracing_scope("rayform.fetch", attributes={"rayform.num_samples": len(indices)}):
            block = self.resolve(indices, gather=True)
        with tracing_scope("rayform.decode", attributes={"rayform.num_samples": len(indices)}):
            return self.decode_columns(block, channels_last=channels_last)

    def decode_columns(self, block: ResolvedBlock, *,
                       decode_errors: DecodeErrorPolicy | None = None,
                       channels_last: bool = False,
                       started: TaskRun | None = None) -> BlockColumns:
        """Decode a resolved block field by field (:class:`BlockColumns`, block order).

        Cheap ("inline") fields are decoded first in the calling thread; the rest are cut into
        tasks (whole fields, or chunks of requests for "requests" decoders) that the calling
        thread and the decode threads take from one queue until it is empty, so that a thread
        slowed down by the machine's other work does not hold up the block. Decode failures are
        handled by the policy (:attr:`decode_errors`) once every field is decoded. ``started``:
        the run :meth:`process` began while it resolved the block (the jobs it already holds
        are not cut into tasks again).
        """
        n = len(block.indices)
        run = started if started is not None else self._task_run(block)
        parts: dict[str, list[tuple[npt.NDArray[np.int64], Sequence[Any]]]] = {}
        for job in block.jobs:
            parts[job.plan.key] = []
            if job.decoded is not None:  # decoded as it was gathered (dense numeric rows)
                parts[job.plan.key].append((job.requests.sample_positions, job.decoded))
            elif job.plan.key not in run.keys:
                run.add(self._job_tasks(job, n, run, parts, channels_last=channels_last))
        # This thread's share of the tasks; while the pool's threads finish their last ones, the
        # columns that need no task (numeric fields, masks, metadata) are made here.
        run.take_all()
        made: dict[str, Column] = {key: field_column(n, key_parts)
                                   for key, key_parts in parts.items() if key not in run.keys}
        extra: dict[str, Column] = {}
        for key, mask in block.pad_masks.items():
            extra[key + IS_PAD_SUFFIX] = StackedColumn(torch.from_numpy(mask),
                                                       np.arange(n, dtype=np.int64), True)
        if self._sample_metadata:
            names = block.segment_ids.names
            versions = [self._view.open_segment(name).version for name in names]
            extra[META_KEY] = ListColumn([
                {"segment_id": names[code], "segment_version": versions[code],
                 "index_value": value, "sample_index": index}
                for code, value, index in zip(block.segment_ids.codes.tolist(),
                                              block.values.tolist(), block.indices.tolist(),
                                              strict=True)])
        for (job, part), result in run.finish():
            parts[job.plan.key].append((part.sample_positions, result))
        columns: dict[str, Column] = {
            key: made[key] if key in made else field_column(n, key_parts)
            for key, key_parts in parts.items()}
        columns.update(extra)
        policy = self._decode_errors if decode_errors is None else decode_errors
        failed = apply_decode_policy(block.failures.failures, policy, dataset=self._view.name,
                                     index=self._index, warned=self._warned)
        return BlockColumns(size=n, columns=columns, failed=failed)

    def _task_run(self, block: ResolvedBlock | None) -> TaskRun:
        """A run of decode tasks on this pipeline's threads (the block's failures cleared)."""
        if block is not None:
            block.failures.failures.clear()
        threads = self._pool.threads
        # Blocks prepared at once hand their tasks to one pool of ``threads`` threads (the
        # fetch threads only wait), so that together they never decode on more threads than
        # asked; whole-field decoders (video) share the threads out themselves instead.
        pooled = self._concurrent_blocks > 1 and (block is None or all(
            job.plan.field.decode.decode_concurrency != "field" for job in block.jobs))
        return TaskRun(self._pool, threads=threads, pooled=pooled)

    def _job_tasks(self, job: FieldJob, n: int, run: TaskRun,
                   parts: dict[str, list[tuple[npt.NDArray[np.int64], Sequence[Any]]]], *,
                   channels_last: bool) -> list[tuple[FieldJob, RequestArrays]]:
        """A field's decode tasks; an inline field is decoded here, into ``parts``."""
        batch = job.batch
        if not len(job.requests) or batch is None:
            return []
        threads = run.threads
        concurrency = job.plan.field.decode.decode_concurrency
        # One output buffer for the field's block, in block order, shared by its tasks.
        arena = OutputArena(n, job.requests.sample_positions, key=job.plan.key) \
            if concurrency == "requests" else None
        # A whole-field decoder's share of the threads: the other blocks decode meanwhile.
        share = max(1, threads // self._concurrent_blocks) \
            if concurrency == "field" and self._concurrent_blocks > 1 else None
        if arena is not None or channels_last or share is not None:
            job = replace(job, batch=batch.with_options(output_arena=arena,
                                                        channels_last=channels_last,
                                                        decode_threads=share))
        if concurrency == "inline" or (threads <= 1 and not run.pooled):
            parts.setdefault(job.plan.key, []).append(
                (job.requests.sample_positions, _run_decode(job, job.requests)))
            return []
        if concurrency == "requests" and threads > 1 \
                and len(job.requests) >= 2 * MIN_REQUESTS_PER_THREAD:
            edges = chunk_edges(len(job.requests), threads)
            return [(job, job.requests[lo:hi]) for lo, hi in itertools.pairwise(edges)]
        return [(job, job.requests)]


def chunk_edges(count: int, threads: int) -> list[int]:
    """Where a field's ``count`` requests are cut into tasks for ``threads`` threads: chunks
    that shrink as the work left does (each about ``1 / (2 * threads)`` of it, at least
    ``count / (2 * TASKS_PER_THREAD * threads)`` and 2 requests), so that the last tasks are
    short and the threads finish the block together (the block waits for its slowest thread)
    with about ``TASKS_PER_THREAD`` tasks per thread, each a little Python."""
    smallest = max(2, count // (2 * TASKS_PER_THREAD * threads))
    edges = [0]
    while edges[-1] < count:
        left = count - edges[-1]
        edges.append(edges[-1] + min(left, max(smallest, -(-left // (2 * threads)))))
    return edges


class TaskRun:
    """Decode tasks taken from one queue by the calling thread and the pool's threads.

    Tasks may be added while the pool's threads already work (:meth:`add` starts them on the
    first tasks); :meth:`finish` has the calling thread take tasks too until none is left, waits
    for the pool's threads and returns every task with its result, in the order added.
    Whole-field tasks (video) go first: they are the longest.
    """

    def __init__(self, pool: ThreadPool, *, threads: int, pooled: bool) -> None:
        self.threads = threads
        self.pooled = pooled
        self.keys: set[str] = set()
        self._pool = pool
        self._tasks: list[tuple[FieldJob, RequestArrays]] = []
        self._results: list[Sequence[Any] | None] = []
        self._queue: collections.deque[int] = collections.deque()
        self._helpers: list[Any] = []
        self._failed = False
        self._error: BaseException | None = None  # raised by this thread's task (take_all)

    def add(self, tasks: list[tuple[FieldJob, RequestArrays]]) -> None:
        """Queue ``tasks`` and, with the first, start the pool's threads on the queue."""
        if not tasks:
            return
        tasks = sorted(tasks, key=lambda t: t[0].plan.field.decode.decode_concurrency != "field")
        for job, _ in tasks:
            self.keys.add(job.plan.key)
        first = len(self._tasks)
        self._tasks += tasks
        self._results += [None] * len(tasks)
        if any(job.plan.field.decode.decode_concurrency == "field" for job, _ in tasks):
            # The longest first: before the queued "requests" chunks.
            self._queue.extendleft(reversed(range(first, len(self._tasks))))
        else:
            self._queue.extend(range(first, len(self._tasks)))
        helpers = self.threads if self.pooled else self.threads - 1
        while len(self._helpers) < min(helpers, len(self._tasks) - (0 if self.pooled else 1)):
            self._helpers.append(self._pool.submit(self._drain))

    def _drain(self) -> None:
        while self.take_one():
            pass

    def take_one(self) -> bool:
        """Run one queued task in this thread; False when none was left (or one failed).

        The caller that queued a block's image tasks takes one at once, before its other
        Python work (resolving the numeric fields): its decode releases the GIL, which the pool's
        threads need to get from their wake-up to their own first decode.
        """
        if self._failed:
            return False
        try:
            k = self._queue.popleft()  # atomic: threads never take the same task
        except IndexError:
            return False
        try:
            self._results[k] = _run_decode(*self._tasks[k])
        except BaseException:  # no further task starts; the error is re-raised by finish
            self._failed = True
            self._queue.clear()
            raise
        return True

    def cancel(self) -> None:
        """Start no further task and wait for the running ones (their results are dropped)."""
        self._failed = True
        self._queue.clear()
        for helper in self._helpers:
            helper.exception()

    def take_all(self) -> None:
        """Take tasks in this thread until none is left (the pool's threads may still be on
        their last ones); an error a task raised is kept for :meth:`finish` to raise once the
        pool's threads have stopped. A pooled run's caller only waits: nothing to take."""
        if self.pooled or self._error is not None:
            return
        try:
            self._drain()
        except BaseException as err:  # re-raised once the helpers have stopped
            self._error = err

    def finish(self) -> list[tuple[tuple[FieldJob, RequestArrays], Sequence[Any]]]:
        """Take tasks until none is left, wait for the pool's threads; every task's result.

        Raises:
            BaseException: the first error a task raised.
        """
        self.take_all()
        error = self._error
        for helper in self._helpers:
            exc = helper.exception()
            if exc is not None and error is None:
                error = exc
        if error is not None:
            raise error
        if self._queue:  # a helper that started before the last tasks were added may be gone
            self._drain()
        done: list[tuple[tuple[FieldJob, RequestArrays], Sequence[Any]]] = []
        for task, result in zip(self._tasks, self._results, strict=True):
            assert result is not None
            done.append((task, result))
        return done


def _sample_batch(columns: BlockColumns) -> SampleBatch:
    """The block's samples, their dicts made only when read (a collator that takes the collated
    batch never makes them), and the batch collated without a stack."""
    deferred = DeferredSamples(size=columns.size, make=columns.samples, values=columns.values)
    return SampleBatch(deferred, columns.collated if columns.size else None)


def _complete(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
    """Per sample (row of ``rows``), whether every output has a row; ``None`` when all do."""
    if not rows.size or int(rows.min()) >= 0:
        return None
    complete: npt.NDArray[np.bool_] = rows.min(axis=1) >= 0
    return complete


def _run_decode(job: FieldJob, requests: RequestArrays) -> Sequence[Any]:
    assert job.batch is not None
    results = job.plan.field.decode.decode(job.batch, requests)
    if len(results) != len(requests):
        raise RuntimeError(
            f"{job.plan.field.decode!r} returned {len(results)} results for {len(requests)} "
            f"requests of field {job.plan.key!r}; a decoder must return one value (or None) "
            "per request"
        )
    return results if isinstance(results, TensorRows) else list(results)

