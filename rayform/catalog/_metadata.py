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

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
)

from rayform._digest import Digest
from rayform.recording._columns import TimelineKind
from rayform.recording._file import PropertyValue as RawPropertyValue
from rayform.recording._file import fits_arrow
from rayform.recording._names import validate_entry_name, validate_layer_name, validate_segment_id

# Names and ids read from metadata are untrusted: each is validated like one typed by a user.
EntryName = Annotated[str, AfterValidator(validate_entry_name)]
SegmentId = Annotated[str, AfterValidator(validate_segment_id)]
LayerName = Annotated[str, AfterValidator(validate_layer_name)]
EntryId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
SegmentVersionId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]




def _within_int64(value: RawPropertyValue) -> RawPropertyValue:
    if not fits_arrow(value):
        raise ValueError(f"property value {str(value)[:40]} does not fit a 64-bit integer")
    return value


# A property as stored: an integer must fit the int64 column it becomes.
PropertyValue = Annotated[RawPropertyValue, AfterValidator(_within_int64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CatalogMeta(_Strict):
    format: Literal["rayform-catalog"]
    format_version: Literal[1]
    created_at_ns: int


class EntryMeta(_Strict):
    format: Literal["rayform-entry"]
    format_version: Literal[1]
    id: EntryId
    name: EntryName
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

    object: Digest  # sha256 of the recording file
    size_bytes: int
    num_rows: int
    registered_at_ns: int
    source_uri: str
    assets: dict[Digest, int]  # sha256 -> size in bytes
    properties: dict[str, PropertyValue]
    entities: dict[str, EntityIndex]
    # sha256 of the object's block-hash object (rayform.storage._block_hashes): remote reads
    # verify the recording block by block. Absent in layers registered before it existed
    # (those are verified whole).
    block_hashes: Digest | None = None


def block_lists(record: SegmentRecord) -> dict[str, str]:
    """Each layer object of ``record`` that has block hashes -> its block-hash object."""
    return {layer.object: layer.block_hashes for layer in record.layers.values()
            if layer.block_hashes is not None}


class SegmentRecord(_Strict):
    segment_id: SegmentId
    version: SegmentVersionId
    layers: dict[LayerName, LayerRecord]
    properties: dict[str, PropertyValue]
    entities: dict[str, EntityIndex]  # merged over layers; static-only entities have no ranges
    num_rows: int
    size_bytes: int
    last_updated_at_ns: int


class Retirement(_Strict):
    """Marks a dataset's last snapshot: it was deleted, or renamed (see catalog/_lifecycle.py)."""

    kind: Literal["deleted", "renamed"]
    renamed_to: EntryName | None = None
    renamed_to_version: int | None = None  # the snapshot of ``renamed_to`` it continues as


class RenameSource(_Strict):
    """A snapshot written by a rename: valid only once ``name``'s snapshot ``version`` retires
    ``name`` as renamed to this dataset (the rename's one commit point)."""

    name: EntryName
    version: int


class DatasetVersion(_Strict):
    format: Literal["rayform-dataset-version"]
    format_version: Literal[1]
    version: int
    committed_at_ns: int
    timelines: dict[str, TimelineKind]
    schema_ipc: str  # base64 of the union Arrow schema (IPC serialised)
    segment_index: Digest  # the segment index object (Arrow IPC, see _snapshot.py)
    num_segments: int
    # Lifecycle (catalog/_lifecycle.py); absent from the files of ordinary snapshots.
    retired: Retirement | None = None
    renamed_from: RenameSource | None = None

    @model_serializer(mode="wrap")
    def _omit_unset_lifecycle(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for key in ("retired", "renamed_from"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class TableVersion(_Strict):
    format: Literal["rayform-table-version"]
    format_version: Literal[1]
    version: int
    committed_at_ns: int
    schema_ipc: str
    objects: list[Digest]
    num_rows: int
