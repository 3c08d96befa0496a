"""How LeRobot features map to rayform columns (shared by the importer and the exporter).

A feature ``key`` (``"observation.state"``) becomes the entity ``"/" + key``
(``/observation.state``), as in Rerun's LeRobot loader, so that the mapping is reversible:

* numeric features: ``/<key>:Scalars:scalars`` (one list of the feature's values per frame, dtype
  kept) plus the static ``/<key>:SeriesLines:names`` when info.json names the dimensions;
* string features: ``/<key>:TextDocument:text``;
* image features: ``/<key>:EncodedImage:blob`` and ``:media_type``;
* video features: a video asset on ``/<key>`` (``AssetVideo:*`` + ``VideoFrameReference:*``);
* the episode's task text per frame: ``/task:TextDocument:text``.

Timelines: ``frame_index`` (sequence) and ``timestamp`` (a *duration* timeline: LeRobot's
timestamps are seconds since the episode start, stored in nanoseconds). When every timestamp of an
episode is within LeRobot's tolerance (1e-4 s) of ``frame_index / fps``, the ``timestamp``
timeline is the exact grid ``frame_index * round(1e9 / fps)`` ns and the raw float32 values are
kept as ``/timestamp:Scalars:scalars``; the segment property ``time_grid`` says which was done
(:mod:`rayform.importers._time_grid`).
"""

from __future__ import annotations

from typing import Final

from rayform.recording._columns import column_name

FRAME_INDEX: Final = "frame_index"
TIMESTAMP: Final = "timestamp"
EPISODE_INDEX: Final = "episode_index"
INDEX: Final = "index"
TASK_INDEX: Final = "task_index"
BOOKKEEPING_FEATURES: Final = (TIMESTAMP, FRAME_INDEX, EPISODE_INDEX, INDEX, TASK_INDEX)

TASK_ENTITY: Final = "/task"
SERIES_NAMES: Final = "SeriesLines:names"

V21_DATA_PATH: Final = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH: Final = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
V30_DATA_PATH: Final = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V30_VIDEO_PATH: Final = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V30_EPISODES_PATH: Final = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V30_TASKS_PATH: Final = "meta/tasks.parquet"
INFO_PATH: Final = "meta/info.json"
STATS_PATH: Final = "meta/stats.json"
DEFAULT_CHUNKS_SIZE: Final = 1000

SUPPORTED_VERSIONS: Final = ("v2.0", "v2.1", "v3.0")


def segment_id_for_episode(episode_index: int) -> str:
    """``episode_000029`` for episode 29 (LeRobot's own file naming)."""
    return f"episode_{episode_index:06d}"


def entity_for_feature(key: str) -> str:
    """The entity path of a LeRobot feature: ``"observation.state"`` -> ``"/observation.state"``."""
    return "/" + key


def feature_for_entity(entity_path: str) -> str:
    """The LeRobot feature key of an entity path (``/`` separators become ``.``).

    ``"/observation.state"`` -> ``"observation.state"``; ``"/cam/rgb"`` -> ``"cam.rgb"``.
    """
    return entity_path.strip("/").replace("/", ".")


def scalars_column(key: str) -> str:
    return column_name(entity_for_feature(key), "Scalars:scalars")


def names_column(key: str) -> str:
    return column_name(entity_for_feature(key), SERIES_NAMES)
