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

import json
from typing import Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from rayform.catalog._columns import TimelineKind
from rayform.catalog._recording import PropertyValue
from rayform.errors import CorruptMetadataError

FORMAT_VERSION: Final = 1

_Model = TypeVar("_Model", bound=BaseModel)


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


def parse_model(model: type[_Model], raw: bytes, *, source: str) -> _Model:
    """Parse ``raw`` JSON as ``model``; errors name the file, the key and the format version.

    Raises:
        CorruptMetadataError: not JSON, a foreign file, an unsupported format version, or a
            missing / mistyped key.
    """
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CorruptMetadataError(
            f"{source}: metadata is not valid JSON (damaged or truncated file): {err}"
        ) from err
    if not isinstance(payload, dict):
        raise CorruptMetadataError(f"{source}: metadata must be a JSON object, got {type(payload).__name__}")
    expected = model.model_fields["format"].annotation.__args__[0]  # type: ignore[union-attr]
    if payload.get("format") != expected:
        raise CorruptMetadataError(
            f"{source}: not a {expected} file (format={payload.get('format')!r}); "
            "is this directory a rayform catalog?"
        )
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise CorruptMetadataError(
            f"{source}: format_version {version!r} is not supported (this rayform reads "
            f"{FORMAT_VERSION}); upgrade rayform"
        )
    try:
        return model.model_validate(payload)
    except ValidationError as err:
        problems = "; ".join(
            f"key {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
        )
        raise CorruptMetadataError(
            f"{source}: invalid {expected} (format_version {version}): {problems}"
        ) from err


def dump_model(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()
