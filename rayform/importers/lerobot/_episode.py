"""Write one LeRobot episode (its Parquet rows and its video files) as a rayform recording."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers._time_grid import (
    GRID_SNAPPED,
    GRID_SOURCE,
    TIME_GRID_ERROR_PROPERTY,
    TIME_GRID_PROPERTY,
    grid_error_s,
    grid_ns,
)
from rayform.importers.lerobot._layout import (
    BOOKKEEPING_FEATURES,
    FRAME_INDEX,
    INDEX,
    SERIES_NAMES,
    TASK_ENTITY,
    TASK_INDEX,
    TIMESTAMP,
    entity_for_feature,
    segment_id_for_episode,
)
from rayform.importers.lerobot._metadata import DatasetInfo, EpisodeInfo, FeatureSpec
from rayform.importers.lerobot._row_checks import check_declared_shape, check_episode_rows
from rayform.importers.mp4._probe import VideoProbe
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    ENCODED_IMAGE_MEDIA_TYPE,
    SCALARS,
    TEXT_DOCUMENT,
)
from rayform.recording._file import PropertyValue
from rayform.recording._writer import RecordingWriter, TimelineLike

ProbeFn = Callable[[Path], VideoProbe]

TIMESTAMP_TOLERANCE_S = 1e-4
"""LeRobot's own tolerance between a frame's ``timestamp`` and ``frame_index / fps``
(``LeRobotDataset(tolerance_s=1e-4)``): within it, the time timeline is put on the exact grid."""
RAW_TIMESTAMP_ENTITY = "/" + TIMESTAMP
"""Where the source's float32 ``timestamp`` values are kept when the timeline is snapped."""


def write_episode(out: Path, *, info: DatasetInfo, episode: EpisodeInfo, table: pa.Table,
                  tasks: dict[int, str], probe: ProbeFn,
                  stored: Mapping[str, PropertyValue] | None = None) -> Path:
    """Write ``episode`` (its rows of the data file in ``table``) to the recording ``out``;
    ``stored`` are further properties (the statistics the dataset stores).

    Returns:
        The recording's path.

    Raises:
        FormatError: the rows lack what LeRobot requires, or a video does not cover them.
    """
    segment_id = segment_id_for_episode(episode.index)
    table = _sorted_rows(table, info, episode)
    check_episode_rows(table, data_path=episode.data_path, episode=episode.index, tasks=tasks)
    timelines, grid_error = _timelines(table, info)
    with RecordingWriter(out, recording_id=segment_id, application_id="lerobot") as rec:
        _set_properties(rec, info, episode, table, tasks)
        for name, value in (stored or {}).items():
            rec.set_property(name, value)
        if grid_error is None:
            rec.set_property(TIME_GRID_PROPERTY, GRID_SOURCE)
        else:
            rec.set_property(TIME_GRID_PROPERTY, GRID_SNAPPED)
            rec.set_property(TIME_GRID_ERROR_PROPERTY, grid_error)
            rec.log_columns(RAW_TIMESTAMP_ENTITY, timelines=timelines, components={
                SCALARS: numeric_rows(table.column(TIMESTAMP).combine_chunks(), TIMESTAMP)})
        if TASK_INDEX in table.column_names and tasks:
            ids = table.column(TASK_INDEX).to_numpy(zero_copy_only=False)
            rec.log_columns(TASK_ENTITY, timelines=timelines, components={
                TEXT_DOCUMENT: pa.array([tasks.get(int(i), "") for i in ids], type=pa.string())})
        for key, spec in info.features.items():
            if key in BOOKKEEPING_FEATURES or spec.dtype == "video":
                continue
            if key not in table.column_names:
                warnings.warn(f"{episode.data_path}: feature {key!r} listed in info.json has no "
                              "column; skipped", ConversionWarning, stacklevel=4)
                continue
            _log_feature(rec, spec, table.column(key).combine_chunks(), timelines, info.root)
        for key in info.video_keys:
            location = episode.videos.get(key)
            if location is None or not location.path.is_file():
                continue  # reported by the importer (partial download)
            _log_video(rec, key, location.path, location.from_s, table, timelines, probe)
    return out


def _sorted_rows(table: pa.Table, info: DatasetInfo, episode: EpisodeInfo) -> pa.Table:
    if table.num_rows == 0:
        raise FormatError(f"{episode.data_path}: episode {episode.index} has no rows")
    if FRAME_INDEX not in table.column_names:
        table = table.append_column(FRAME_INDEX, pa.array(np.arange(table.num_rows), pa.int64()))
    if TIMESTAMP not in table.column_names:
        seconds = table.column(FRAME_INDEX).to_numpy().astype(np.float64) / info.fps
        table = table.append_column(TIMESTAMP, pa.array(seconds.astype(np.float32)))
    order = pc.sort_indices(table, sort_keys=[(FRAME_INDEX, "ascending")])
    return table.take(order)


def seconds_to_ns(seconds: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """LeRobot float seconds to integer nanoseconds (rounded; float32 values survive a round trip)."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * 1e9).astype(np.int64)


def _timelines(table: pa.Table, info: DatasetInfo) -> tuple[dict[str, TimelineLike], float | None]:
    """The episode's timelines, and how far its timestamps were from the grid when they were
    put on it (``None``: they were kept as they are)."""
    frames = table.column(FRAME_INDEX).to_numpy(zero_copy_only=False).astype(np.int64)
    seconds = table.column(TIMESTAMP).to_numpy(zero_copy_only=False)
    error = grid_error_s(seconds, frames, info.fps)
    if error <= TIMESTAMP_TOLERANCE_S:
        return {FRAME_INDEX: frames,
                TIMESTAMP: grid_ns(frames, info.fps).astype("timedelta64[ns]")}, error
    return {FRAME_INDEX: frames,
            TIMESTAMP: seconds_to_ns(seconds).astype("timedelta64[ns]")}, None


def _set_properties(rec: RecordingWriter, info: DatasetInfo, episode: EpisodeInfo,
                    table: pa.Table, tasks: dict[int, str]) -> None:
    task_list = list(episode.tasks)
    if not task_list and TASK_INDEX in table.column_names and tasks:
        seen = dict.fromkeys(int(i) for i in table.column(TASK_INDEX).to_pylist())
        task_list = [tasks[i] for i in seen if i in tasks]
    for name, value in episode.extra.items():
        rec.set_property(name, value)
    rec.set_properties(episode_index=episode.index, length=table.num_rows, fps=info.fps,
                       codebase_version=info.version)
    if info.robot_type is not None:
        rec.set_property("robot_type", str(info.robot_type))
    if task_list:
        rec.set_property("task", task_list[0])
        rec.set_property("tasks", json.dumps(task_list))
    if INDEX in table.column_names:
        rec.set_property("dataset_from_index", int(pc.min(table.column(INDEX)).as_py()))
    # what the source declares, kept for `rayform curate` (bookkeeping.length, coverage.declared)
    if episode.length is not None:
        rec.set_property("declared_length", int(episode.length))
    if info.total_episodes > 0:
        rec.set_property("dataset_total_episodes", int(info.total_episodes))


def _log_feature(rec: RecordingWriter, spec: FeatureSpec, column: pa.Array,
                 timelines: dict[str, TimelineLike], root: Path) -> None:
    entity = entity_for_feature(spec.key)
    if spec.dtype == "image":
        blobs = _image_blobs(column, root, spec.key)
        media = [_media_type(b) for b in blobs]
        rec.log_columns(entity, timelines=timelines, components={
            ENCODED_IMAGE_BLOB: pa.array(blobs, type=pa.binary()),
            ENCODED_IMAGE_MEDIA_TYPE: pa.array(media, type=pa.string())})
        return
    t = column.type
    is_text = pa.types.is_string(t) or pa.types.is_large_string(t) or (
        pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type)
                                       or pa.types.is_large_string(t.value_type)))
    if spec.dtype == "string" and not is_text:
        raise FormatError(
            f"{root / 'meta' / 'info.json'}: feature {spec.key!r} is declared with dtype "
            f"'string', but its Parquet column holds {column.type}; fix the feature's dtype"
        )
    if is_text:
        rec.log_columns(entity, timelines=timelines,
                        components={TEXT_DOCUMENT: column.cast(pa.string())})
        return
    rows = numeric_rows(column, spec.key)
    check_declared_shape(rows, key=spec.key, shape=spec.shape, where=root / "meta" / "info.json")
    rec.log_columns(entity, timelines=timelines, components={SCALARS: rows})
    if spec.names is not None:
        rec.log_static(entity, components={SERIES_NAMES: pa.array([list(spec.names)],
                                                                  type=pa.list_(pa.string()))})


def numeric_rows(column: pa.Array, key: str) -> pa.Array:
    """A numeric Parquet column as an Arrow ``List`` array: one flat list of values per row."""
    t = column.type
    if pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t) or pa.types.is_list(t):
        inner = t.value_type
        if pa.types.is_fixed_size_list(inner) or pa.types.is_list(inner) \
                or pa.types.is_large_list(inner):
            rows = [np.asarray(v, dtype=np.float64).reshape(-1) if v is not None else None
                    for v in column.to_pylist()]
            dtype = _leaf_type(t).to_pandas_dtype()
            return pa.array([r.astype(dtype) if r is not None else None for r in rows],
                            type=pa.list_(_leaf_type(t)))
        return column.cast(pa.list_(inner))
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        offsets = pa.array(np.arange(len(column) + 1, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, column)
    raise FormatError(f"feature {key!r}: unsupported Parquet type {t}; expected numbers, "
                      "fixed-size lists of numbers, strings or images")


def _leaf_type(t: pa.DataType) -> pa.DataType:
    while pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return t


def _image_blobs(column: pa.Array, root: Path, key: str) -> list[bytes]:
    blobs: list[bytes] = []
    for value in column.to_pylist():
        if isinstance(value, dict):
            data, rel = value.get("bytes"), value.get("path")
            if data is None and rel:
                data = (root / rel).read_bytes()
        else:
            data = value
        if not isinstance(data, bytes | bytearray):
            raise FormatError(f"image feature {key!r}: a row holds no image bytes ({value!r:.80})")
        blobs.append(bytes(data))
    return blobs


def _media_type(blob: bytes) -> str:
    if blob.startswith(b"\x89PNG"):
        return "image/png"
    if blob.startswith(b"\xff\xd8"):
        return "image/jpeg"
    return "application/octet-stream"


def _log_video(rec: RecordingWriter, key: str, path: Path, from_s: float, table: pa.Table,
               timelines: dict[str, TimelineLike], probe: ProbeFn) -> None:
    video = probe(path)
    pts_ns = video.pts_ns
    seconds = table.column(TIMESTAMP).to_numpy(zero_copy_only=False).astype(np.float64)
    query = seconds_to_ns(seconds + from_s)
    pos = np.clip(np.searchsorted(pts_ns, query), 1, max(len(pts_ns) - 1, 1))
    if len(pts_ns) == 1:
        nearest = np.zeros(len(query), dtype=np.int64)
    else:
        left = pos - 1
        nearest = np.where(np.abs(pts_ns[left] - query) <= np.abs(pts_ns[pos] - query), left, pos)
    gap_ns = np.abs(pts_ns[nearest] - query)
    half_frame_ns = int(0.5e9 / (video.rate_hz or _rows_rate_hz(table)))
    far = int(np.count_nonzero(gap_ns > half_frame_ns))
    if far:
        if far == len(query):
            raise CorruptRecordingError(
                f"{path}: no frame of the video is near the episode's timestamps "
                f"({from_s:.3f} s + [{seconds[0]:.3f}, {seconds[-1]:.3f}] s); the video does not "
                "belong to these rows")
        warnings.warn(f"{path}: {far} of {len(query)} rows of {key!r} have no video frame within "
                      "half a frame; the nearest frame is used", ConversionWarning, stacklevel=5)
    rec.log_video_asset(entity_for_feature(key), path, timelines=timelines,
                        frame_timestamps_ns=pts_ns[nearest],
                        is_keyframe=video.is_keyframe[nearest])


def _rows_rate_hz(table: pa.Table) -> float:
    """A frame rate from the rows' timestamps when the video does not state one."""
    seconds = table.column(TIMESTAMP).to_numpy(zero_copy_only=False).astype(np.float64)
    if len(seconds) < 2 or seconds[-1] <= seconds[0]:
        return 30.0
    return float((len(seconds) - 1) / (seconds[-1] - seconds[0]))
