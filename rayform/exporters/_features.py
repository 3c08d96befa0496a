"""Which columns of a dataset view become LeRobot features, and under which keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

from rayform.catalog._dataset import DatasetView
from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.importers.lerobot._layout import (
    BOOKKEEPING_FEATURES,
    SERIES_NAMES,
    TASK_ENTITY,
    feature_for_entity,
)
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    SCALARS,
    TEXT_DOCUMENT,
    VIDEO_FRAME_TIMESTAMP,
    VIDEO_SAMPLE,
    column_name,
    entity_of,
)

FeatureKind = Literal["numeric", "video_asset", "video_stream", "image"]
TASK_COLUMN: Final = column_name(TASK_ENTITY, TEXT_DOCUMENT)
# Archetypes whose numeric components are bookkeeping, not signals.
_NOT_SIGNALS: Final = frozenset({
    "VideoFrameReference", "VideoStream", "AssetVideo", "EncodedImage", "Image", "SeriesLines",
    "McapSchema", "McapChannel", "McapMessage", "CameraInfo", "Header", "RecordingInfo",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportFeature:
    """One LeRobot feature and the column it is made from.

    Attributes:
        key: the LeRobot feature key (``"observation.state"``).
        column: the source column (``Scalars:scalars``, ``VideoFrameReference:timestamp``,
            ``VideoStream:sample`` or ``EncodedImage:blob`` of an entity).
        kind: how the column becomes the feature.
    """

    key: str
    column: str
    kind: FeatureKind

    def __post_init__(self) -> None:
        if not self.key or "/" in self.key:
            raise ConfigError(f"LeRobot feature key {self.key!r} must be non-empty and without '/'")
        if self.key in BOOKKEEPING_FEATURES:
            raise ConfigError(f"LeRobot feature key {self.key!r} is reserved for LeRobot's own "
                              f"columns {BOOKKEEPING_FEATURES}; map the column to another key")

    @property
    def entity(self) -> str:
        return entity_of(self.column)

    @property
    def is_visual(self) -> bool:
        return self.kind != "numeric"

    @property
    def names_column(self) -> str:
        return column_name(self.entity, SERIES_NAMES)


def _is_numeric_list(t: pa.DataType) -> bool:
    if not pa.types.is_list(t) and not pa.types.is_large_list(t):
        return False
    v = t.value_type
    return bool(pa.types.is_integer(v) or pa.types.is_floating(v) or pa.types.is_boolean(v))


def kind_of(column: str, arrow_type: pa.DataType) -> FeatureKind | None:
    """How a column can become a feature, or ``None`` when it cannot."""
    component = column.split(":", 1)[1] if ":" in column else ""
    if component == VIDEO_FRAME_TIMESTAMP:
        return "video_asset"
    if component == VIDEO_SAMPLE:
        return "video_stream"
    if component == ENCODED_IMAGE_BLOB:
        return "image"
    if component.split(":", 1)[0] in _NOT_SIGNALS:
        return None
    return "numeric" if _is_numeric_list(arrow_type) else None


def key_for_column(column: str) -> str:
    """The default feature key of a column: the entity path with ``.`` separators, plus the
    component's field when it is not ``Scalars:scalars`` or a video/image column.

    ``/observation.state:Scalars:scalars`` -> ``observation.state``;
    ``/odom:Odometry:position`` -> ``odom.position``; ``/cam:VideoStream:sample`` -> ``cam``.
    """
    entity, _, component = column.partition(":")
    key = feature_for_entity(entity)
    if component in (SCALARS, VIDEO_FRAME_TIMESTAMP, VIDEO_SAMPLE, ENCODED_IMAGE_BLOB):
        return key
    return f"{key}.{component.rsplit(':', 1)[-1]}"


def select_features(view: DatasetView, explicit: Mapping[str, str] | None) -> list[ExportFeature]:
    """The features to export: ``explicit`` (``{key: column}``) or every suitable column that
    every segment of the view holds.

    Raises:
        ColumnNotFoundError: an explicit column is not in the view.
        ConfigError: an explicit column cannot be a LeRobot feature, or two columns want one key.
    """
    schema = view.schema()
    if explicit is not None:
        out = []
        for key, column in explicit.items():
            arrow_type = schema.field(column).type
            kind = kind_of(column, arrow_type)
            if kind is None:
                raise ConfigError(
                    f"column {column!r} ({arrow_type}) cannot be the LeRobot feature {key!r}: use "
                    "numeric list columns, VideoStream:sample, VideoFrameReference:timestamp or "
                    "EncodedImage:blob")
            out.append(ExportFeature(key=key, column=column, kind=kind))
        return out
    features: dict[str, ExportFeature] = {}
    shared = columns_of_every_segment(view)
    for column in schema.component_columns():
        if column not in shared or entity_of(column) == TASK_ENTITY:
            continue
        kind = kind_of(column, schema.field(column).type)
        if kind is None:
            continue
        key = key_for_column(column)
        if key in BOOKKEEPING_FEATURES:
            continue
        if key in features:
            raise ConfigError(f"columns {features[key].column!r} and {column!r} both map to the "
                              f"LeRobot feature {key!r}; pass features={{key: column}}")
        features[key] = ExportFeature(key=key, column=column, kind=kind)
    if not features:
        raise ColumnNotFoundError(
            f"the segments of dataset {view.name!r} have no column in common that can be a "
            "LeRobot feature (numeric lists, video or encoded images); pass "
            "features={key: column}")
    return list(features.values())


def columns_of_every_segment(view: DatasetView) -> set[str]:
    """The component columns every segment of the view holds (a dataset's schema is the union
    over all its segments, and a view of some of them may hold only part of it)."""
    shared: set[str] | None = None
    for record in view.segment_records():
        columns = {f"{entity}:{component}" for entity, index in record.entities.items()
                   for component in index.components}
        shared = columns if shared is None else shared & columns
    return shared or set()
