"""Reading a LeRobot dataset's metadata (v2.0, v2.1 and v3.0) without the ``lerobot`` package."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers.lerobot._layout import (
    DEFAULT_CHUNKS_SIZE,
    INFO_PATH,
    SUPPORTED_VERSIONS,
    V21_DATA_PATH,
    V21_VIDEO_PATH,
    V30_DATA_PATH,
    V30_TASKS_PATH,
    V30_VIDEO_PATH,
)
from rayform.recording._file import PropertyValue


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSpec:
    """One entry of ``info.json`` ``features``."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    names: tuple[str, ...] | None = None
    info: dict[str, Any] | None = None

    @property
    def is_visual(self) -> bool:
        return self.dtype in ("video", "image")


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetInfo:
    """The parts of ``meta/info.json`` the importer needs."""

    root: Path
    version: str
    fps: float
    robot_type: str | None
    chunks_size: int
    data_path: str
    video_path: str | None
    features: dict[str, FeatureSpec]
    total_episodes: int

    @property
    def is_v3(self) -> bool:
        return self.version.startswith("v3")

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f.dtype == "video"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoLocation:
    """Where one episode's frames of one camera live: a file and the episode's start in it."""

    path: Path
    from_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeInfo:
    """One episode as the metadata describes it."""

    index: int
    tasks: tuple[str, ...]
    length: int | None
    data_path: Path
    videos: dict[str, VideoLocation] = field(default_factory=dict)
    extra: dict[str, PropertyValue] = field(default_factory=dict)
    raw_stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # v3.0: stats/<f>/<stat>


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CorruptRecordingError(f"{path}: not valid JSON ({err}); re-download the file") from err


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorruptRecordingError(
                    f"{path}: line {number} is not valid JSON ({err}); re-download the file"
                ) from err
            if not isinstance(value, dict):
                raise CorruptRecordingError(f"{path}: line {number} is not a JSON object")
            yield value


def read_parquet(path: Path) -> pa.Table:
    """Read a Parquet file, turning a damaged file into a :class:`CorruptRecordingError`."""
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as err:  # ArrowNotImplementedError too
        raise CorruptRecordingError(f"{path}: not a readable Parquet file (truncated or damaged): "
                                    f"{err}") from err


def _flat_names(raw: Any, size: int) -> tuple[str, ...] | None:
    """Dimension names from ``names`` in any of the shapes LeRobot datasets use."""
    if isinstance(raw, dict):
        raw = next(iter(raw.values()), None)
    flat: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, list | tuple):
            for item in value:
                walk(item)
        else:
            flat.append(value)

    walk(raw)
    if raw is None or len(flat) != size or not all(isinstance(n, str) for n in flat):
        return None
    return tuple(flat)


def _require(mapping: dict[str, Any], key: str, where: Path) -> Any:
    if key not in mapping:
        raise FormatError(f"{where}: missing key {key!r}; this is not a complete LeRobot info.json")
    return mapping[key]


def _number(raw: dict[str, Any], key: str, where: Path, kind: type[int] | type[float],
            default: int | None = None) -> Any:
    """``raw[key]`` as an int or float; a string or other value names the key and the file."""
    value: Any = raw.get(key) if default is not None else _require(raw, key, where)
    if value is None and default is not None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool) and (
            kind is float or float(value).is_integer()):
        return kind(value)
    noun = "an integer" if kind is int else "a number"
    raise FormatError(f"{where}: {key!r} must be {noun}, got {value!r}; fix {INFO_PATH}")


MAX_TASK_CHARS = 1 << 16
MAX_TEMPLATE_WIDTH = 64
# The width of a format spec in a path template: "{episode_index:06d}" -> "06".
_FORMAT_WIDTH = re.compile(r"\{[^{}:]*:[^{}\d]*(\d+)")


def dataset_path(root: Path, template: str, where: Path, key: str, **fields: Any) -> Path:
    """A file of the dataset named by an ``info.json`` path template, kept inside ``root``.

    Raises:
        FormatError: the template is malformed, or names a file outside the dataset folder
            (an absolute path or ``..``).
    """
    widths = [int(w) for w in _FORMAT_WIDTH.findall(template)]
    if any(w > MAX_TEMPLATE_WIDTH for w in widths):
        raise FormatError(f"{where}: {key} template {template[:120]!r} pads a field to "
                          f"{max(widths)} characters; at most {MAX_TEMPLATE_WIDTH} are accepted "
                          f"— fix {INFO_PATH}")
    try:
        rel = template.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        raise FormatError(f"{where}: {key} template {template!r} cannot be filled: {err!r}; "
                          f"fix {INFO_PATH}") from err
    parts = rel.replace("\\", "/").split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise FormatError(
            f"{where}: {key} {rel!r} (from template {template!r}) leaves the dataset folder "
            f"{root}; a LeRobot dataset's files must be inside it — fix {INFO_PATH}"
        )
    return root.joinpath(*parts)


def read_info(root: Path) -> DatasetInfo:
    """Parse ``meta/info.json``.

    Raises:
        FormatError: the folder is not a LeRobot dataset, or its version is not supported.
    """
    path = root / INFO_PATH
    if not path.is_file():
        raise FormatError(
            f"{root}: not a LeRobot dataset (no {INFO_PATH}) and not a rosbag2 bag (no "
            "metadata.yaml); register LeRobot v2.x/v3.0 dataset folders, rosbag2 folders, or files"
        )
    raw = load_json(path)
    if not isinstance(raw, dict):
        raise CorruptRecordingError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    version = str(_require(raw, "codebase_version", path))
    if version not in SUPPORTED_VERSIONS:
        raise FormatError(
            f"{path}: codebase_version {version!r} is not supported (supported: "
            f"{', '.join(SUPPORTED_VERSIONS)}); convert the dataset with lerobot's converter first"
        )
    features: dict[str, FeatureSpec] = {}
    raw_features = _require(raw, "features", path)
    if not isinstance(raw_features, dict):
        raise FormatError(f"{path}: 'features' must be an object, got {type(raw_features).__name__}")
    for key, spec in raw_features.items():
        if not isinstance(spec, dict) or "dtype" not in spec:
            raise FormatError(f"{path}: feature {key!r} has no 'dtype'")
        shape = tuple(int(s) for s in spec.get("shape") or (1,))
        size = 1
        for s in shape:
            size *= s
        info = spec.get("info") or spec.get("video_info")
        names = _flat_names(spec.get("names"), size)
        if names is None and spec.get("names") is not None and spec["dtype"] not in (
                "video", "image"):
            warnings.warn(f"{path}: feature {key!r}: 'names' is not {size} strings "
                          f"({str(spec['names'])[:80]}); its dimensions are left unnamed",
                          ConversionWarning, stacklevel=2)
        features[key] = FeatureSpec(key=key, dtype=str(spec["dtype"]), shape=shape,
                                    names=names,
                                    info=info if isinstance(info, dict) else None)
    is_v3 = version.startswith("v3")
    fps = _number(raw, "fps", path, float)
    if not fps > 0:
        raise FormatError(f"{path}: fps must be positive, got {fps!r}; fix {INFO_PATH}")
    chunks_size = _number(raw, "chunks_size", path, int, DEFAULT_CHUNKS_SIZE) or DEFAULT_CHUNKS_SIZE
    if chunks_size < 1:
        raise FormatError(f"{path}: chunks_size must be positive, got {chunks_size!r}")
    data_path = raw.get("data_path") or (V30_DATA_PATH if is_v3 else V21_DATA_PATH)
    video_path = raw.get("video_path") or (V30_VIDEO_PATH if is_v3 else V21_VIDEO_PATH)
    for key, template in (("data_path", data_path), ("video_path", video_path)):
        if not isinstance(template, str):
            raise FormatError(f"{path}: {key!r} must be a string template, got {template!r}")
    return DatasetInfo(
        root=root,
        version=version,
        fps=fps,
        robot_type=raw.get("robot_type"),
        chunks_size=chunks_size,
        data_path=data_path,
        video_path=video_path,
        features=features,
        total_episodes=_number(raw, "total_episodes", path, int, 0),
    )


def read_tasks(info: DatasetInfo) -> dict[int, str]:
    """``task_index -> task`` from ``meta/tasks.jsonl`` (v2) or ``meta/tasks.parquet`` (v3)."""
    if info.is_v3:
        path = info.root / V30_TASKS_PATH
        if not path.is_file():
            return {}
        table = read_parquet(path)
        text_col = next((c for c in ("task", "__index_level_0__") if c in table.column_names), None)
        if text_col is None or "task_index" not in table.column_names:
            raise FormatError(f"{path}: expected columns 'task' and 'task_index', got "
                              f"{table.column_names}")
        return {int(i): str(t) for i, t in zip(table.column("task_index").to_pylist(),
                                               table.column(text_col).to_pylist(), strict=True)}
    path = info.root / "meta" / "tasks.jsonl"
    if not path.is_file():
        return {}
    tasks: dict[int, str] = {}
    for row in iter_jsonl(path):
        index, task = row.get("task_index"), row.get("task")
        if isinstance(index, bool) or not isinstance(index, int) or not isinstance(task, str):
            raise FormatError(f"{path}: each line needs an integer 'task_index' and a string "
                              f"'task', got {str(row)[:120]}")
        if len(task) > MAX_TASK_CHARS:
            raise FormatError(f"{path}: task {index} is {len(task)} characters; at most "
                              f"{MAX_TASK_CHARS} are accepted")
        tasks[index] = task
    return tasks


def _scalar_property(value: Any) -> PropertyValue | None:
    if isinstance(value, str | int | float | bool):
        return value
    return None


def read_episodes(info: DatasetInfo) -> list[EpisodeInfo]:
    """Every episode the metadata lists (whether or not its files are present)."""
    return _read_v3_episodes(info) if info.is_v3 else _read_v2_episodes(info)


def _read_v2_episodes(info: DatasetInfo) -> list[EpisodeInfo]:
    path = info.root / "meta" / "episodes.jsonl"
    rows: list[dict[str, Any]]
    if path.is_file():
        rows = list(iter_jsonl(path))
    else:  # no episode list: take the data files that are there
        rows = []
        for data_file in sorted((info.root / "data").glob("chunk-*/episode_*.parquet")):
            rows.append({"episode_index": int(data_file.stem.split("_")[-1])})
    episodes: list[EpisodeInfo] = []
    for row in rows:
        if "episode_index" not in row:
            raise FormatError(f"{path}: an episode line has no 'episode_index': {row!r}")
        index = int(row["episode_index"])
        chunk = index // info.chunks_size
        where = info.root / INFO_PATH
        data_path = dataset_path(info.root, info.data_path, where, "data_path",
                                 episode_chunk=chunk, episode_index=index, chunk_index=chunk,
                                 file_index=index)
        videos = {}
        if info.video_path:
            for key in info.video_keys:
                videos[key] = VideoLocation(path=dataset_path(
                    info.root, info.video_path, where, "video_path", episode_chunk=chunk,
                    episode_index=index, video_key=key, chunk_index=chunk, file_index=index))
        tasks = row.get("tasks") or []
        if not isinstance(tasks, list) or not all(isinstance(t, str) and len(t) <= MAX_TASK_CHARS
                                                  for t in tasks):
            raise FormatError(f"{path}: episode {index}: 'tasks' must be a list of strings of at "
                              f"most {MAX_TASK_CHARS} characters, got {str(tasks)[:80]!r}")
        extra: dict[str, PropertyValue] = {
            k: v for k, v in ((k, _scalar_property(v)) for k, v in row.items()
                              if k not in ("episode_index", "tasks", "length"))
            if v is not None}
        episodes.append(EpisodeInfo(index=index, tasks=tuple(str(t) for t in tasks),
                                    length=int(row["length"]) if "length" in row else None,
                                    data_path=data_path, videos=videos, extra=extra))
    return episodes


def _read_v3_episodes(info: DatasetInfo) -> list[EpisodeInfo]:
    files = sorted((info.root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise FormatError(
            f"{info.root}: a LeRobot v3.0 dataset needs meta/episodes/chunk-*/file-*.parquet; "
            "none found (download the meta/ folder completely)"
        )
    episodes: list[EpisodeInfo] = []
    for path in files:
        table = read_parquet(path)
        for row in table.to_pylist():
            episodes.append(_v3_episode(info, row, path))
    return sorted(episodes, key=lambda e: e.index)


def _v3_episode(info: DatasetInfo, row: dict[str, Any], where: Path) -> EpisodeInfo:
    for key in ("episode_index", "data/chunk_index", "data/file_index"):
        if row.get(key) is None:
            raise FormatError(f"{where}: an episode row has no {key!r}")
    index = int(row["episode_index"])
    info_path = info.root / INFO_PATH
    data_path = dataset_path(info.root, info.data_path, info_path, "data_path",
                             chunk_index=int(row["data/chunk_index"]),
                             file_index=int(row["data/file_index"]))
    videos = {}
    for key in info.video_keys:
        chunk = row.get(f"videos/{key}/chunk_index")
        file = row.get(f"videos/{key}/file_index")
        if chunk is None or file is None or not info.video_path:
            continue
        path = dataset_path(info.root, info.video_path, info_path, "video_path", video_key=key,
                            chunk_index=int(chunk), file_index=int(file))
        videos[key] = VideoLocation(path=path,
                                    from_s=float(row.get(f"videos/{key}/from_timestamp") or 0.0))
    skip_prefixes = ("stats/", "videos/", "data/", "meta/")
    skip = {"episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index"}
    extra: dict[str, PropertyValue] = {
        k: v for k, v in ((k, _scalar_property(v)) for k, v in row.items()
                          if k not in skip and not k.startswith(skip_prefixes))
        if v is not None}
    raw_stats: dict[str, dict[str, Any]] = {}
    for key, value in row.items():
        if isinstance(key, str) and key.startswith("stats/") and key.count("/") >= 2:
            feature, _, stat = key[len("stats/"):].rpartition("/")
            raw_stats.setdefault(feature, {})[stat] = value
    tasks = row.get("tasks") or []
    return EpisodeInfo(index=index, tasks=tuple(str(t) for t in tasks),
                       length=int(row["length"]) if row.get("length") is not None else None,
                       data_path=data_path, videos=videos, extra=extra, raw_stats=raw_stats)
