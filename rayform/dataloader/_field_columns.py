"""The column a Field reads, checked against the dataset: a near miss gets the column to write.

``Field("/observation.state", …)`` names an entity, not a column, and a video decoder on a
video's ``AssetVideo:asset`` column (the file itself) needs its frame references instead; both
are answered with the columns of the dataset that fit.
"""

from __future__ import annotations

from rayform.catalog import Schema
from rayform.dataloader._config import Field
from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.recording._columns import VIDEO_ASSET, VIDEO_ASSET_MEDIA_TYPE, VIDEO_FRAME_TIMESTAMP

SHOWN_COLUMNS = 8


def _columns_of(schema: Schema, entity: str) -> list[str]:
    return [c for c in schema.component_columns() if c.partition(":")[0] == entity]


def check_field_column(key: str, field: Field, schema: Schema) -> None:
    """Refuse a field whose path is an entity or a video's asset, naming the column to use.

    Raises:
        ColumnNotFoundError: an entity path, with that entity's columns (or, for an unknown
            entity, the dataset's).
        ConfigError: a frame decoder on a video asset's file column.
    """
    path = field.path
    decoder = type(field.decode).__name__
    if ":" not in path:
        entity = path if path.startswith("/") else "/" + path
        columns = _columns_of(schema, entity)
        if columns:
            raise ColumnNotFoundError(
                f"Field {key!r}: {path!r} is an entity path, not a column; name one of its "
                f"columns, e.g. Field({columns[0]!r}, decode={decoder}()); its columns: {columns}")
        known = schema.component_columns()
        shown = known[:SHOWN_COLUMNS] + (["…"] if len(known) > SHOWN_COLUMNS else [])
        raise ColumnNotFoundError(
            f"Field {key!r}: {path!r} is not a column name '<entity>:<Archetype>:<component>' "
            f"and no entity {entity!r} exists; the dataset's columns: {shown}")
    entity, _, component = path.partition(":")
    if component in (VIDEO_ASSET, VIDEO_ASSET_MEDIA_TYPE) and field.prior_keyframe_path:
        frames = f"{entity}:{VIDEO_FRAME_TIMESTAMP}"
        if frames in schema.component_columns():
            raise ConfigError(
                f"Field {key!r}: {decoder} decodes frames through the video's frame references, "
                f"not its {component!r} column (the MP4 file itself): use "
                f"Field({frames!r}, decode={decoder}())")
