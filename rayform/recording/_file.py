"""The native recording file: one Arrow IPC file per segment layer, plus its validated header.

A recording file holds one record batch per entity (rows sorted by the entity's first timeline)
under a single wide schema: one column per timeline (``int64``, ``timestamp[ns]`` or
``duration[ns]``; null where the entity has no value on that timeline, and on static rows) and one
``List`` column per component (null on other entities' rows). The schema metadata key
``rayform:recording`` carries a JSON header (:class:`RecordingHeader`) naming the recording id,
properties, timelines, entity row ranges (temporal and static blocks apart), attached assets
(content-addressed side files such as MP4 videos) and, from format version 2 on, the file's
checksum (see :mod:`rayform.recording._checksum`). From format version 3 on, record batches other
than encoded media are zstd-compressed (Arrow IPC buffer compression, see
:mod:`rayform.recording._ipc_file`). Version 1 (no checksum) and 2 (uncompressed) files are still
read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from rayform._digest import Digest
from rayform.errors import CorruptRecordingError
from rayform.recording._columns import TimelineKind

HEADER_KEY = b"rayform:recording"
RECORDING_FORMAT: Final = "rayform-recording"
RECORDING_FORMAT_VERSION: Final = 3
READABLE_FORMAT_VERSIONS: Final = (1, 2, 3)
RECORDING_SUFFIX = ".rfr"

PropertyScalar = str | int | float | bool | None
PropertyValue = PropertyScalar | list[PropertyScalar]
"""A segment property: a scalar, or a list of scalars (a Rerun property of several values)."""
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1


def fits_arrow(value: PropertyValue) -> bool:
    """Whether a property value fits the Arrow column it becomes (an int must fit int64)."""
    if isinstance(value, list):
        return all(fits_arrow(v) for v in value)
    return not isinstance(value, int) or isinstance(value, bool) or (
        INT64_MIN <= value <= INT64_MAX)


class EntityRows(BaseModel):
    """Where one entity's rows live in the file."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    start: int
    stop: int
    components: list[str]


class AssetInfo(BaseModel):
    """A content-addressed side file (e.g. an MP4) that the recording refers to by hash."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    media_type: str
    size_bytes: int


class RecordingHeader(BaseModel):
    """The JSON header stored in a recording file's Arrow schema metadata."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    format: Literal["rayform-recording"]
    format_version: Literal[1, 2, 3]
    recording_id: str
    application_id: str
    properties: dict[str, PropertyValue]
    timelines: dict[str, TimelineKind]
    entities: dict[str, EntityRows]
    static_entities: dict[str, EntityRows]
    assets: dict[Digest, AssetInfo]  # content-addressed side files, named by their sha256
    # Version 2 on: sha256 of the header (without this key), schema and record batches as stored.
    content_sha256: Digest | None = None

    @model_validator(mode="after")
    def _checksum_matches_version(self) -> RecordingHeader:
        if (self.format_version >= 2) != (self.content_sha256 is not None):
            raise ValueError(
                f"format_version {self.format_version} "
                + ("needs a content_sha256" if self.format_version >= 2
                   else "has no content_sha256 key")
            )
        return self

    def to_bytes(self) -> bytes:
        unset = {"content_sha256"} if self.content_sha256 is None else None  # version 1 files
        return self.model_dump_json(exclude=unset).encode()

    def canonical_bytes(self) -> bytes:
        """The header as the checksum covers it: canonical JSON without ``content_sha256``."""
        return self.model_dump_json(exclude={"content_sha256"}).encode()


def header_from_schema(schema: pa.Schema, *, source: str) -> RecordingHeader:
    """Parse and validate the header of a recording file's schema.

    Raises:
        CorruptRecordingError: the header is missing, not JSON, or does not validate.
    """
    raw = (schema.metadata or {}).get(HEADER_KEY)
    if raw is None:
        raise CorruptRecordingError(
            f"{source}: Arrow file has no {HEADER_KEY.decode()!r} header; it was not written by "
            "rayform's RecordingWriter (use an importer for other formats)"
        )
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CorruptRecordingError(
            f"{source}: recording header is not valid UTF-8 JSON (damaged file): {err}"
        ) from err
    if isinstance(payload, dict) and payload.get("format_version") not in (None,
                                                                           *READABLE_FORMAT_VERSIONS):
        raise CorruptRecordingError(
            f"{source}: recording format_version {payload.get('format_version')!r} is not supported "
            f"by this rayform (reads {list(READABLE_FORMAT_VERSIONS)}); upgrade rayform"
        )
    try:
        return RecordingHeader.model_validate(payload)
    except ValidationError as err:
        problems = "; ".join(
            f"key {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
        )
        raise CorruptRecordingError(f"{source}: invalid recording header: {problems}") from err


def is_recording_file(path: Path) -> bool:
    """True when ``path`` starts with the Arrow IPC file magic (cheap sniff, no validation)."""
    try:
        with path.open("rb") as fh:
            return fh.read(6) == b"ARROW1"
    except OSError:
        return False


def open_recording(path: Path) -> tuple[RecordingHeader, pa.Table]:
    """Memory-map a recording file and return its header and (zero-copy) table.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CorruptRecordingError: the file is truncated, not Arrow, or has a bad header.
    """
    try:
        source = pa.memory_map(str(path), "r")
        reader = pa.ipc.open_file(source)
        table = reader.read_all()
    except FileNotFoundError:
        raise  # gone, not damaged: a cached object may be fetched again
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as err:
        raise CorruptRecordingError(
            f"{path}: not a readable rayform recording (truncated or damaged Arrow IPC file): {err}"
        ) from err
    header = header_from_schema(reader.schema, source=str(path))
    validate_layout(header, table.schema, num_rows=table.num_rows, source=str(path))
    return header, table


def validate_layout(header: RecordingHeader, schema: pa.Schema, *, num_rows: int,
                    source: str) -> None:
    """Check that the header's entity ranges and timelines agree with the file's schema and rows."""
    names = set(schema.names)
    for timeline in header.timelines:
        if timeline not in names:
            raise CorruptRecordingError(f"{source}: header names timeline {timeline!r} but no column")
    blocks = [*header.entities.items(), *header.static_entities.items()]
    for entity, rows in blocks:
        if not 0 <= rows.start <= rows.stop <= num_rows:
            raise CorruptRecordingError(
                f"{source}: entity {entity!r} rows [{rows.start}, {rows.stop}) outside the table "
                f"of {num_rows} rows"
            )
        for component in rows.components:
            if f"{entity}:{component}" not in names:
                raise CorruptRecordingError(
                    f"{source}: entity {entity!r} lists component {component!r} but the column "
                    "is missing"
                )
