"""Column names, component names and other shared literals of the data model (Rerun naming)."""

from __future__ import annotations

from typing import Final, Literal

# Segment table / index-range columns (Rerun's names where Rerun has one).
SEGMENT_ID: Final = "rerun_segment_id"
LAYER_NAMES: Final = "rerun_layer_names"
STORAGE_URLS: Final = "rerun_storage_urls"
LAST_UPDATED_AT: Final = "rerun_last_updated_at"
NUM_ROWS: Final = "rerun_num_rows"
SIZE_BYTES: Final = "rerun_size_bytes"
SEGMENT_VERSION: Final = "rayform_segment_version"
PROPERTY_PREFIX: Final = "property:"
RANGE_START_SUFFIX: Final = ":start"
RANGE_END_SUFFIX: Final = ":end"

DEFAULT_LAYER: Final = "base"
PROPERTIES_ENTITY: Final = "/__properties"

# Components ("<Archetype>:<component>"); a column is "<entity_path>:<component>".
SCALARS: Final = "Scalars:scalars"
ENCODED_IMAGE_BLOB: Final = "EncodedImage:blob"
ENCODED_IMAGE_MEDIA_TYPE: Final = "EncodedImage:media_type"
IMAGE_BUFFER: Final = "Image:buffer"  # raw pixels, tightly packed [H, W, C]
IMAGE_FORMAT: Final = "Image:format"  # Rerun's ImageFormat struct of IMAGE_BUFFER
VIDEO_SAMPLE: Final = "VideoStream:sample"
VIDEO_IS_KEYFRAME: Final = "VideoStream:is_keyframe"
VIDEO_CODEC: Final = "VideoStream:codec"
TEXT_DOCUMENT: Final = "TextDocument:text"
# Poses (Rerun's Transform3D): translation [3] and rotation quaternion [4] (x, y, z, w). The
# coordinate convention they are expressed in is the segment property FRAME_CONVENTION_PROPERTY.
TRANSFORM_TRANSLATION: Final = "Transform3D:translation"
TRANSFORM_QUATERNION: Final = "Transform3D:quaternion"
FRAME_CONVENTION_PROPERTY: Final = "frame_convention"
SITE_PROPERTY: Final = "site"
TASK_PROPERTY: Final = "task"
# The timestamp/duration timeline a recording's samples are drawn on, when it has several
# (rerun-sdk adds LOG_TIME_TIMELINE to everything logged with rr.log).
SAMPLE_TIMELINE_PROPERTY: Final = "sample_timeline"
LOG_TIME_TIMELINE: Final = "log_time"

# Video assets: an MP4 kept as-is (a content-addressed asset of the segment) plus a per-frame index.
# Static on the entity: the asset's sha256 and media type. One row per frame: its presentation
# time inside the asset (ns) and its keyframe flag, on the recording's timelines.
VIDEO_ASSET: Final = "AssetVideo:asset"
VIDEO_ASSET_MEDIA_TYPE: Final = "AssetVideo:media_type"
VIDEO_FRAME_TIMESTAMP: Final = "VideoFrameReference:timestamp"
VIDEO_FRAME_IS_KEYFRAME: Final = "VideoFrameReference:is_keyframe"
# The names of a vector's dimensions (joint names), static on its entity (Rerun's SeriesLines).
SERIES_LINES_NAMES: Final = "SeriesLines:names"

# The archetypes rerun-sdk defines (``rerun.archetypes.<name>``) that rayform columns use.
RERUN_ARCHETYPES: Final = frozenset({
    "AssetVideo", "EncodedImage", "Image", "RecordingInfo", "Scalars", "SeriesLines",
    "SeriesPoints", "TextDocument", "TextLog", "Transform3D", "VideoFrameReference", "VideoStream",
    "Points3D", "Points2D", "Boxes3D", "Boxes2D", "LineStrips3D", "LineStrips2D", "Pinhole",
    "DepthImage", "SegmentationImage", "Mesh3D", "Arrows3D", "Arrows2D", "Tensor",
})

TimelineKind = Literal["sequence", "timestamp", "duration"]
TIMELINE_KINDS: Final[tuple[TimelineKind, ...]] = ("sequence", "timestamp", "duration")


def column_name(entity_path: str, component: str) -> str:
    """Return the column name ``"<entity_path>:<Archetype>:<component>"``."""
    return f"{entity_path}:{component}"


def entity_of(column: str) -> str:
    """Return the entity path of a component column (the text before the first ``:``)."""
    entity, sep, _ = column.partition(":")
    if not sep:
        raise ValueError(f"{column!r} is not a component column name '<entity>:<Archetype>:<field>'")
    return entity


def sibling_column(column: str, component: str) -> str:
    """Return the column of ``component`` on the same entity and archetype as ``column``.

    ``sibling_column("/cam:VideoStream:sample", "is_keyframe") == "/cam:VideoStream:is_keyframe"``.
    """
    head, sep, _ = column.rpartition(":")
    if not sep:
        raise ValueError(f"{column!r} is not a component column name")
    return f"{head}:{component}"
