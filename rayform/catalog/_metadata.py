"""The catalog's on-disk JSON metadata, validated with pydantic (strict, versioned).

Files:
    ``catalog.json``                         :class:`CatalogMeta`
    ``entries/<name>/entry.json``            :class:`EntryMeta` (immutable after creation)
    ``entries/<name>/versions/<n>.json``     :class:`DatasetVersion` or :class:`TableVersion`,
                                             one immutable snapshot per commit; a dataset's
                                             segment records live in its segment index object
                                             (Arrow IPC, see ``_snapshot.py``)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from rayform.recording._columns import TimelineKind
from rayform.recording._file import PropertyValue


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CatalogMeta(_Strict):
    format: Literal["rayform-catalog"]
    format_version: Literal[1]
    created_at_ns: int


class EntryMeta(_Strict):
    format: Literal["rayform-entry"]
    format_version: Literal[1]
    id: str
    name: str
    kind: Literal["dataset", "table"]
    created_at_ns: int
    # Tables only: the schema at creation (base64 Arrow IPC), so that creating a table is one
    # atomic write; its first data commit is snapshot 1.
    table_schema_ipc: str | None = None


class IndexRange(_Strict):
    kind: TimelineKind
    start: int
    end: int


class EntityIndex(_Strict):
    """What one entity of a segment holds: its components and its range on each timeline."""

    components: list[str]
    ranges: dict[str, IndexRange]
    num_rows: int


class LayerRecord(_Strict):
    """One registered recording file of a segment."""

    object: str  # sha256 hex of the recording file
    size_bytes: int
    num_rows: int
    registered_at_ns: int
    source_uri: str
    assets: dict[str, int]  # sha256 hex -> size in bytes
    properties: dict[str, PropertyValue]
    entities: dict[str, EntityIndex]


class SegmentRecord(_Strict):
    segment_id: str
    version: str
    layers: dict[str, LayerRecord]
    properties: dict[str, PropertyValue]
    entities: dict[str, EntityIndex]  # merged over layers; static-only entities have no ranges
    num_rows: int
    size_bytes: int
    last_updated_at_ns: int


class DatasetVersion(_Strict):
    format: Literal["rayform-dataset-version"]
    format_version: Literal[1]
    version: int
    committed_at_ns: int
    timelines: dict[str, TimelineKind]
    schema_ipc: str  # base64 of the union Arrow schema (IPC serialised)
    segment_index: str  # sha256 of the segment index object (Arrow IPC, see _snapshot.py)
    num_segments: int


class TableVersion(_Strict):
    format: Literal["rayform-table-version"]
    format_version: Literal[1]
    version: int
    committed_at_ns: int
    schema_ipc: str
    objects: list[str]
    num_rows: int
