"""Building a manifest: scan which samples are complete, then schedule one epoch over them.

The scan runs the live pipeline's row resolution on the index alone (no decoding, no queries):
per field, whether each sample has a row at or before every output position (and, for video, a
prior keyframe), how stale the served rows are, and the index range the field reads. A sample is
kept when every *required* field has data within its ``Field.max_staleness``.

Scheduling plans the epoch with the very functions the live iterable dataset uses
(:func:`~rayform.dataloader._epoch_plan.contiguous_stream` over the strategy's order of the *whole*
sample space, for each ``(rank, worker)``), then drops the samples the scan rejected. A replay
therefore yields exactly what the live loader yields, since the live loader skips those samples.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.dataloader._config import Field
from rayform.dataloader._epoch_plan import contiguous_stream
from rayform.dataloader._manifest_format import (
    COL_ANCHOR,
    COL_EMIT_RANK,
    COL_FETCH_GROUP,
    COL_RANK,
    COL_SAMPLE_INDEX,
    COL_SEGMENT_ID,
    COL_WORKER,
    RANGE_HI,
    RANGE_LO,
    SCHEDULE_COLUMNS,
)
from rayform.dataloader._partition import StreamPosition
from rayform.dataloader._pipeline import SamplePipeline
from rayform.dataloader._sample_index import SampleIndex, native_offsets
from rayform.dataloader._shuffle import ShuffleStrategy

SCAN_CHUNK = 8192


def staleness_limits(fields: Mapping[str, Field], *, temporal: bool
                     ) -> dict[str, int | None]:
    """Each field's ``max_staleness`` in index units (ns on temporal timelines), or ``None``."""
    out: dict[str, int | None] = {}
    for key, field in fields.items():
        if field.max_staleness is None:
            out[key] = None
        else:
            out[key] = int(native_offsets((field.max_staleness,), temporal,
                                          f"Field {key!r} max_staleness")[0])
    return out


def scan_samples(pipeline: SamplePipeline, fields: Mapping[str, Field], required: set[str]
                 ) -> pa.Table:
    """One row per kept sample, in global order: ``segment_id``, ``anchor``, ``sample_index``
    and one ``struct<lo, hi>`` per field."""
    index = pipeline.sample_index
    limits = staleness_limits(fields, temporal=index.ns_dtype is not None)
    kept: list[npt.NDArray[np.int64]] = []
    ranges: dict[str, tuple[list[npt.NDArray[np.int64]], list[npt.NDArray[np.int64]]]] = {
        key: ([], []) for key in fields}
    total = index.total_samples
    for lo in range(0, total, SCAN_CHUNK):
        chunk = np.arange(lo, min(lo + SCAN_CHUNK, total), dtype=np.int64)
        extents = pipeline.extents(chunk)
        keep = np.ones(len(chunk), dtype=np.bool_)
        for key in required:
            extent = extents[key]
            keep &= ~extent.missing
            limit = limits[key]
            if limit is not None:
                keep &= extent.lag <= limit
        kept.append(chunk[keep])
        for key in fields:
            ranges[key][0].append(extents[key].lo[keep])
            ranges[key][1].append(extents[key].hi[keep])
    sample_ids = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    seg_pos, anchors = index.locate(sample_ids)
    names = [s.segment_id for s in index.segments]
    columns: dict[str, pa.Array] = {
        COL_SEGMENT_ID: pa.DictionaryArray.from_arrays(pa.array(seg_pos.astype(np.int32)),
                                                       pa.array(names, type=pa.string())),
        COL_ANCHOR: pa.array(anchors, type=pa.int64()),
        COL_SAMPLE_INDEX: pa.array(sample_ids, type=pa.int64()),
    }
    for key, (los, his) in ranges.items():
        columns[key] = pa.StructArray.from_arrays(
            [pa.array(_concat(los), type=pa.int64()), pa.array(_concat(his), type=pa.int64())],
            names=[RANGE_LO, RANGE_HI])
    return pa.table(columns)


def schedule_samples(samples: pa.Table, sample_index: SampleIndex, *, strategy: ShuffleStrategy,
                     seed: int, fetch_block_size: int, num_ranks: int,
                     num_workers_per_rank: int) -> pa.Table:
    """The manifest rows: ``samples`` (any schedule columns dropped) laid out for every
    ``(rank, worker)`` in fetch order, with ``rank``, ``worker``, ``fetch_group``, ``emit_rank``."""
    samples = samples.select([c for c in samples.column_names if c not in SCHEDULE_COLUMNS])
    ids = samples.column(COL_SAMPLE_INDEX).to_numpy().astype(np.int64)
    total = sample_index.total_samples
    row_of = np.full(total, -1, dtype=np.int64)
    row_of[ids] = np.arange(len(ids), dtype=np.int64)
    valid = row_of >= 0
    order = strategy.epoch_order(sample_index, fetch_block_size=fetch_block_size, seed=seed)
    buffer = strategy.emission_buffer()
    schedule: dict[str, list[npt.NDArray[np.int64]]] = {
        COL_RANK: [], COL_WORKER: [], COL_FETCH_GROUP: [], COL_EMIT_RANK: []}
    rows: list[npt.NDArray[np.int64]] = []
    for rank in range(num_ranks):
        for worker in range(num_workers_per_rank):
            pos = StreamPosition(rank=rank, world_size=num_ranks, worker_id=worker,
                                 num_workers=num_workers_per_rank)
            stream = contiguous_stream(order, pos, fetch_block_size=fetch_block_size,
                                       buffer=buffer, buffer_seed=[seed, rank, worker])
            stream = stream.keep(valid[stream.indices])
            n = len(stream.indices)
            schedule[COL_RANK].append(np.full(n, rank, dtype=np.int64))
            schedule[COL_WORKER].append(np.full(n, worker, dtype=np.int64))
            schedule[COL_FETCH_GROUP].append(stream.fetch_groups())
            schedule[COL_EMIT_RANK].append(stream.emit_rank())
            rows.append(row_of[stream.indices])
    ordered = samples.take(pa.array(_concat(rows), type=pa.int64()))
    head = {
        COL_RANK: pa.array(_concat(schedule[COL_RANK]).astype(np.int32), type=pa.int32()),
        COL_WORKER: pa.array(_concat(schedule[COL_WORKER]).astype(np.int32), type=pa.int32()),
        COL_FETCH_GROUP: pa.array(_concat(schedule[COL_FETCH_GROUP]), type=pa.int64()),
        COL_EMIT_RANK: pa.array(_concat(schedule[COL_EMIT_RANK]), type=pa.int64()),
    }
    return pa.table({**head, **{name: ordered.column(name) for name in ordered.column_names}})


def _concat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
