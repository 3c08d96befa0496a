"""Export one segment to a Rerun ``.rrd`` file (with ``rerun-sdk``), viewable in the Rerun viewer.

Every entity becomes Rerun chunks with the same timelines and component names; blobs go back to
Rerun's ``List<UInt8>`` and codec names to ``VideoCodec`` codes; a video asset becomes a static
``AssetVideo:blob`` holding the MP4; properties go to ``/__properties``. Registering the file
again gives back the same columns and values.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rayform._atomic import atomic_path
from rayform._optional import require
from rayform.catalog._dataset import DatasetView
from rayform.catalog._segment_data import SegmentData
from rayform.importers.rrd._arrow_types import binary_to_blobs, codec_names_to_codes
from rayform.importers.rrd._importer import ASSET_VIDEO_BLOB
from rayform.importers.rrd._properties import RECORDING_INFO, property_array
from rayform.recording._columns import (
    PROPERTIES_ENTITY,
    RERUN_ARCHETYPES,
    VIDEO_ASSET,
    VIDEO_CODEC,
)
from rayform.recording._file import RecordingHeader
from rayform.recording._widening import widen


def export_rrd(view: DatasetView, segment_id: str, out_path: str | os.PathLike[str], *,
               application_id: str | None = None) -> Path:
    """Write segment ``segment_id`` of ``view`` (all its layers) as a Rerun ``.rrd`` file.

    Args:
        view: a dataset or a view of one (``filter_contents`` limits the entities written).
        segment_id: the segment; it becomes the recording id.
        out_path: the ``.rrd`` file to write (replaced if it exists).
        application_id: the Rerun application id; default the dataset's name.

    Returns:
        The written path.

    Raises:
        ImportError: ``rerun-sdk`` is not installed (``pip install 'rayform[rerun]'``).
        SegmentNotFoundError: no such segment in the view.
    """
    chunk_mod: Any = require("rerun.chunk", extra="rerun", feature="Writing .rrd files")
    seg = view.open_segment(segment_id)
    schema = view.schema()
    # Columns this segment holds narrower than the dataset's merged schema are written widened
    # (nulls for the struct fields it lacks), as every other reader of the view sees them.
    wanted = {c: schema.field(c).type for c in schema.component_columns()}
    chunks = list(_chunks(chunk_mod, seg, wanted))
    chunks.extend(_property_chunks(chunk_mod, seg))
    path = Path(out_path)
    with atomic_path(path) as tmp:
        chunk_mod.LazyChunkStream.from_iter(chunks).write_rrd(
            tmp, application_id=application_id or view.name, recording_id=segment_id)
    return path


def _field(name: str, arr: pa.Array) -> pa.Field:
    archetype = name.split(":", 1)[0] if ":" in name else ""
    meta = {"rerun:component": name, "rerun:kind": "data"}
    if archetype:
        meta["rerun:archetype"] = (f"rerun.archetypes.{archetype}"
                                   if archetype in RERUN_ARCHETYPES else archetype)
    return pa.field(name, arr.type, metadata=meta)


def _to_rerun(component: str, arr: pa.Array) -> pa.Array:
    if pa.types.is_list(arr.type) and (pa.types.is_binary(arr.type.value_type)
                                       or pa.types.is_large_binary(arr.type.value_type)):
        return binary_to_blobs(arr)
    if component == VIDEO_CODEC and pa.types.is_list(arr.type) \
            and pa.types.is_string(arr.type.value_type):
        return codec_names_to_codes(arr)
    return arr


def _chunks(chunk_mod: Any, seg: SegmentData, wanted: Mapping[str, pa.DataType]
            ) -> Iterator[Any]:
    for header, table in seg.files():
        for entity, rows in header.entities.items():
            comps = [c for c in rows.components if f"{entity}:{c}" in wanted]
            if not comps:
                continue
            block = table.slice(rows.start, rows.stop - rows.start)
            yield from _temporal_chunks(chunk_mod, header, block, entity, comps, wanted)
        for entity, rows in header.static_entities.items():
            comps = [c for c in rows.components if f"{entity}:{c}" in wanted]
            if not comps:
                continue
            block = table.slice(rows.start, rows.stop - rows.start)
            yield from _static_chunk(chunk_mod, seg, block, entity, comps, wanted)


def _temporal_chunks(chunk_mod: Any, header: RecordingHeader, block: pa.Table, entity: str,
                     comps: list[str], types: Mapping[str, pa.DataType]) -> Iterator[Any]:
    """One chunk per set of timelines the rows have (Rerun needs dense time columns)."""
    names = [t for t in header.timelines if t in block.column_names]
    valid = np.stack([block.column(t).is_valid().to_numpy(zero_copy_only=False)
                      for t in names], axis=1) if names else np.zeros((block.num_rows, 0), bool)
    patterns, inverse = np.unique(valid, axis=0, return_inverse=True)
    for p, pattern in enumerate(patterns):
        timelines = [t for t, ok in zip(names, pattern, strict=True) if ok]
        if not timelines:
            continue
        rows = block.take(pa.array(np.flatnonzero(inverse.reshape(-1) == p)))
        arrays: list[pa.Array] = [rows.column(t).combine_chunks() for t in timelines]
        fields: list[pa.Field] = [pa.field(t, a.type) for t, a in zip(timelines, arrays,
                                                                       strict=True)]
        for comp in comps:
            name = f"{entity}:{comp}"
            arr = _to_rerun(comp, widen(rows.column(name).combine_chunks(), types[name]))
            arrays.append(arr)
            fields.append(_field(comp, arr))
        batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        yield from chunk_mod.Chunk.from_record_batch(batch, index=timelines, entity_path=entity)


def _static_chunk(chunk_mod: Any, seg: SegmentData, block: pa.Table, entity: str,
                  comps: list[str], types: Mapping[str, pa.DataType]) -> Iterator[Any]:
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for comp in comps:
        name = f"{entity}:{comp}"
        arr = widen(block.column(name).combine_chunks(), types[name]).drop_null()
        if not len(arr):
            continue
        arr = arr.slice(len(arr) - 1)
        if comp == VIDEO_ASSET:
            digest = str(arr[0].as_py()[0])
            data = seg.asset_path(digest).read_bytes()
            arr = binary_to_blobs(pa.array([[data]], pa.list_(pa.binary())))
            comp = ASSET_VIDEO_BLOB
        else:
            arr = _to_rerun(comp, arr)
        arrays.append(arr)
        fields.append(_field(comp, arr))
    if arrays:
        batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        yield from chunk_mod.Chunk.from_record_batch(batch, index=None, entity_path=entity)


def _property_chunks(chunk_mod: Any, seg: SegmentData) -> Iterator[Any]:
    properties = seg.record.properties
    if not properties:
        return
    by_entity: dict[str, tuple[list[pa.Array], list[pa.Field]]] = {}
    for name, value in properties.items():
        entity, component = PROPERTIES_ENTITY, name
        arr = property_array(value)
        arrays, fields = by_entity.setdefault(entity, ([], []))
        field = _field(component, arr)
        if not name.startswith(RECORDING_INFO + ":"):
            field = field.with_metadata({"rerun:component": component, "rerun:kind": "data"})
        arrays.append(arr)
        fields.append(field)
    for entity, (arrays, fields) in by_entity.items():
        batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        yield from chunk_mod.Chunk.from_record_batch(batch, index=None, entity_path=entity)

