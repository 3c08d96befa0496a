"""Register Rerun ``.rrd`` files: every recording in the file becomes one segment."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rayform._optional import require
from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError, InvalidNameError
from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers._time_grid import GRID_SOURCE, TIME_GRID_PROPERTY
from rayform.importers.mp4._probe import probe_video
from rayform.importers.rrd._arrow_types import (
    blobs_to_binary,
    codec_codes_to_names,
    is_blob_rows,
    is_codec_codes,
)
from rayform.importers.rrd._properties import is_properties_entity, property_name, property_value
from rayform.media._video_bitstream import detect_gop_start
from rayform.recording._columns import (
    VIDEO_ASSET,
    VIDEO_ASSET_MEDIA_TYPE,
    VIDEO_CODEC,
    VIDEO_FRAME_IS_KEYFRAME,
    VIDEO_FRAME_TIMESTAMP,
    VIDEO_IS_KEYFRAME,
    VIDEO_SAMPLE,
)
from rayform.recording._names import validate_entity_path, validate_segment_id
from rayform.recording._writer import RecordingWriter

RRD_MAGIC = b"RRF"
ASSET_VIDEO_BLOB = "AssetVideo:blob"
_KIND = b"rerun:kind"
_COMPONENT = b"rerun:component"
_INDEX_NAME = b"rerun:index_name"


@dataclass
class _EntityData:
    """The chunks of one entity, split into static cells and temporal blocks."""

    static: dict[str, pa.Array] = field(default_factory=dict)
    blocks: list[tuple[dict[str, pa.Array], dict[str, pa.Array]]] = field(default_factory=list)


class RrdImporter(Importer):
    """Reads ``.rrd`` files with ``rerun-sdk`` (extra ``rayform[rerun]``).

    Every recording in the file becomes the segment named by its recording id, with all its
    timelines, every entity and component under Rerun's column names, and the recording's
    properties (``/__properties``) as segment properties named as in Rerun's segment table.
    Blobs become ``Binary`` and the ``VideoStream:codec`` code becomes the codec name, as in
    rayform's own writer; a static ``AssetVideo:blob`` becomes a video asset (the MP4 kept
    as-is) referenced by ``AssetVideo:asset``. Blueprints are ignored.
    """

    name = "rrd"

    def sniff(self, path: Path) -> bool:
        if not path.is_file():
            return False
        if path.suffix.lower() == ".rrd":
            return True
        try:
            with path.open("rb") as fh:
                return fh.read(3) == RRD_MAGIC
        except OSError:
            return False

    def convert(self, path: Path, staging: Path) -> list[Path]:
        chunk_mod: Any = require("rerun.chunk", extra="rerun", feature="Reading .rrd files")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                reader = chunk_mod.RrdReader(path)
                entries = reader.recordings()
                recordings = [(entry, reader.stream(store=entry).to_chunks()) for entry in entries]
            except (RuntimeError, ValueError, OSError) as err:
                notes = "; ".join(str(w.message) for w in caught)
                raise CorruptRecordingError(
                    f"{path}: not a readable Rerun .rrd file (truncated or damaged): {err}"
                    + (f" ({notes})" if notes else "")) from err
        if not recordings:
            raise FormatError(f"{path}: the .rrd file holds no recording (only blueprints?)")
        outputs: list[Path] = []
        for entry, chunks in recordings:
            segment_id = _segment_id(str(entry.recording_id), path)
            out = staging / f"{len(outputs):04d}.rfr"
            write_recording(out, segment_id=segment_id, application_id=str(entry.application_id),
                            chunks=chunks, source=path, staging=staging)
            outputs.append(out)
        return outputs


def _segment_id(recording_id: str, path: Path) -> str:
    try:
        return validate_segment_id(recording_id)
    except InvalidNameError:
        safe = segment_id_from_name(recording_id)
        warnings.warn(f"{path}: recording id {recording_id!r} is not a valid segment id; "
                      f"registered as {safe!r}", ConversionWarning, stacklevel=4)
        return safe


def write_recording(out: Path, *, segment_id: str, application_id: str, chunks: Iterable[Any],
                    source: Path, staging: Path) -> Path:
    """Write the chunks of one Rerun recording as a rayform recording file."""
    entities: dict[str, _EntityData] = {}
    properties: dict[str, Any] = {}
    for chunk in chunks:
        entity = str(chunk.entity_path)
        batch = chunk.to_record_batch()
        timelines, components = _split_columns(batch)
        if is_properties_entity(entity):
            for comp, arr in components.items():
                if len(arr):
                    properties[property_name(entity, comp)] = property_value(
                        arr.slice(len(arr) - 1))
            continue
        try:
            validate_entity_path(entity)
        except InvalidNameError:
            warnings.warn(f"{source}: entity path {entity!r} cannot be a rayform entity path; "
                          "its data is skipped", ConversionWarning, stacklevel=4)
            continue
        data = entities.setdefault(entity, _EntityData())
        if chunk.is_static or not timelines:
            for comp, arr in components.items():
                if len(arr):
                    data.static[comp] = arr.slice(len(arr) - 1)
        elif components:
            data.blocks.append((timelines, components))
    properties.setdefault(TIME_GRID_PROPERTY, GRID_SOURCE)  # Rerun's timelines as logged
    with RecordingWriter(out, recording_id=segment_id, application_id=application_id) as rec:
        for name, value in properties.items():
            rec.set_property(name, value)
        for entity, data in entities.items():
            _attach_video_asset(rec, entity, data, source, staging)
            _flag_keyframes(entity, data, source)
            for timelines, components in data.blocks:
                rec.log_columns(entity, timelines=timelines, components=components)
            if data.static:
                rec.log_static(entity, components=data.static)
    return out


def _split_columns(batch: pa.RecordBatch) -> tuple[dict[str, pa.Array], dict[str, pa.Array]]:
    timelines: dict[str, pa.Array] = {}
    components: dict[str, pa.Array] = {}
    for i, fld in enumerate(batch.schema):
        meta = fld.metadata or {}
        kind = meta.get(_KIND, b"data")
        if kind == b"control":
            continue
        column = batch.column(i)
        if kind == b"index":
            timelines[meta.get(_INDEX_NAME, fld.name.encode()).decode()] = column
            continue
        component = meta.get(_COMPONENT, fld.name.encode()).decode()
        components[component] = _to_rayform(component, column)
    return timelines, components


def _to_rayform(component: str, column: pa.Array) -> pa.Array:
    if is_blob_rows(column.type):
        return blobs_to_binary(column)
    if component == VIDEO_CODEC and is_codec_codes(column.type):
        return codec_codes_to_names(column)
    return column


def _attach_video_asset(rec: RecordingWriter, entity: str, data: _EntityData, source: Path,
                        staging: Path) -> None:
    """Turn a static ``AssetVideo:blob`` into a video asset, flagging keyframes of its frames."""
    blob = data.static.pop(ASSET_VIDEO_BLOB, None)
    if blob is None:
        return
    payload = blob[0].as_py()
    media = data.static.get(VIDEO_ASSET_MEDIA_TYPE)
    media_type = str(media[0].as_py()[0]) if media is not None and media[0].as_py() else "video/mp4"
    if not payload:
        return
    video = bytes(payload[0])
    digest = rec.add_asset(video, media_type=media_type)
    data.static[VIDEO_ASSET] = pa.array([[digest]], pa.list_(pa.string()))
    data.static[VIDEO_ASSET_MEDIA_TYPE] = pa.array([[media_type]], pa.list_(pa.string()))
    if not any(VIDEO_FRAME_TIMESTAMP in comps for _, comps in data.blocks):
        return
    try:
        with tempfile.NamedTemporaryFile(dir=staging, suffix=".mp4") as tmp:
            tmp.write(video)
            tmp.flush()
            probe = probe_video(Path(tmp.name))
    except (ImportError, CorruptRecordingError) as err:
        warnings.warn(f"{source}: entity {entity!r}: cannot index the frames of its AssetVideo "
                      f"({err}); VideoFrameReference:is_keyframe is not set", ConversionWarning,
                      stacklevel=5)
        return
    pts_ns = probe.pts_ns
    for _, comps in data.blocks:
        refs = comps.get(VIDEO_FRAME_TIMESTAMP)
        if refs is None:
            continue
        values = refs.values.to_numpy(zero_copy_only=False).astype(np.int64)
        pos = np.clip(np.searchsorted(pts_ns, values, side="right") - 1, 0, len(pts_ns) - 1)
        flags = pa.array(probe.is_keyframe[pos], pa.bool_())
        comps[VIDEO_FRAME_IS_KEYFRAME] = pa.ListArray.from_arrays(refs.offsets, flags)


def _flag_keyframes(entity: str, data: _EntityData, source: Path) -> None:
    """Add ``VideoStream:is_keyframe`` (Rerun finds keyframes by parsing; rayform stores them)."""
    blocks = [comps for _, comps in data.blocks
              if VIDEO_SAMPLE in comps and VIDEO_IS_KEYFRAME not in comps]
    if not blocks:
        return
    codec_rows = data.static.get(VIDEO_CODEC)
    if codec_rows is None:
        codec_rows = next((c[VIDEO_CODEC] for c in blocks if VIDEO_CODEC in c), None)
    codec = str(codec_rows.values[0].as_py()) if codec_rows is not None and \
        len(codec_rows.values) else ""
    for comps in blocks:
        samples = comps[VIDEO_SAMPLE]
        flags: list[bool] = []
        for cell in samples.to_pylist():
            packet = cell[0] if cell else None
            found = detect_gop_start(packet, codec) if packet else False
            if found is None:
                warnings.warn(f"{source}: entity {entity!r}: keyframes of {codec or 'unknown'!r} "
                              "video cannot be detected; VideoStream:is_keyframe is not set",
                              ConversionWarning, stacklevel=5)
                return
            flags.append(bool(found))
        comps[VIDEO_IS_KEYFRAME] = pa.ListArray.from_arrays(
            pa.array(np.arange(len(flags) + 1, dtype=np.int32)), pa.array(flags, pa.bool_()))
