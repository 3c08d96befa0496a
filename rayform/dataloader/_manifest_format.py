"""The manifest file format: column names, the header (:class:`ManifestMeta`) and its strict parsing.

A manifest is one Parquet file (zstd). Each row is one sample, stored in fetch order per
``(rank, worker)``: ``rank int32``, ``worker int32``, ``fetch_group int64``, ``emit_rank int64``,
``segment_id dictionary<int32, string>``, ``anchor int64`` (the sample's index value, ns on
temporal timelines), one ``struct<lo: int64, hi: int64>`` per field key (the inclusive index range
the field reads: its window, or for video from the prior keyframe) — Rerun 0.41's columns — and
``sample_index int64``, the sample's global index in the sample space the header describes.

The header rides in the Arrow schema metadata as strings (``None`` written ``"None"``): Rerun's
keys, and ``rayform_edge``, ``rayform_dataset_version`` and ``rayform_segments`` (the sample
space: per segment its id, version, first index value, sample count and index range), which let a
replay check that the data has not changed and let :meth:`Manifest.shuffle` re-plan the epoch
exactly as the live loader would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from rayform.dataloader._config import EdgeMode
from rayform.dataloader._sample_index import SampleIndex, SegmentMetadata
from rayform.errors import FormatError

MANIFEST_FORMAT_VERSION = "1"

COL_RANK = "rank"
COL_WORKER = "worker"
COL_FETCH_GROUP = "fetch_group"
COL_EMIT_RANK = "emit_rank"
COL_SEGMENT_ID = "segment_id"
COL_ANCHOR = "anchor"
COL_SAMPLE_INDEX = "sample_index"
RANGE_LO = "lo"
RANGE_HI = "hi"
SCHEDULE_COLUMNS = (COL_RANK, COL_WORKER, COL_FETCH_GROUP, COL_EMIT_RANK)
SAMPLE_COLUMNS = (COL_SEGMENT_ID, COL_ANCHOR, COL_SAMPLE_INDEX)
RANGE_TYPE = pa.struct([(RANGE_LO, pa.int64()), (RANGE_HI, pa.int64())])


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestSegment:
    """One segment of the manifest's sample space (a :class:`SegmentMetadata` plus its version)."""

    segment_id: str
    version: str
    index_start: int
    num_samples: int
    range_start: int
    range_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestMeta:
    """The decoded manifest header (Rerun's fields, then rayform's).

    Attributes:
        format_version: ``"1"``.
        dataset_name: the dataset the manifest was built from.
        dataset_id: its entry id.
        index_name: the index timeline.
        ns_per_sample: the grid step on temporal timelines (``None`` on sequence timelines).
        ns_dtype: ``"datetime64[ns]"``, ``"timedelta64[ns]"`` or ``None``.
        recipe: per field key, ``Field.to_recipe()``.
        required_fields: keys that had to have data for a sample to be kept.
        fetch_block_size: samples per fetch block.
        buffer_size: the shuffle buffer's size, if the strategy had one.
        min_fill: the shuffle buffer's ``min_fill``.
        num_ranks: the DDP world size the rows are sharded for.
        num_workers_per_rank: the DataLoader workers per rank the rows are sharded for.
        seed: the shuffle seed.
        shuffle_strategy: the strategy's ``RECIPE_TAG`` (``"none"``, ``"sample"``, ``"block"``).
        edge: ``"trim"`` or ``"pad"`` (how the sample space was built).
        dataset_version: the dataset snapshot the manifest was built from.
        segments: the sample space, segment by segment.
    """

    format_version: str
    dataset_name: str
    dataset_id: str
    index_name: str
    ns_per_sample: int | None
    ns_dtype: str | None
    recipe: dict[str, Any]
    required_fields: list[str]
    fetch_block_size: int
    buffer_size: int | None
    min_fill: int | None
    num_ranks: int
    num_workers_per_rank: int
    seed: int
    shuffle_strategy: str
    edge: EdgeMode = "trim"
    dataset_version: int = 0
    segments: tuple[ManifestSegment, ...] = field(default=())

    def sample_index(self) -> SampleIndex:
        """The sample space the manifest's ``sample_index`` column refers to."""
        segments = [SegmentMetadata(s.segment_id, s.index_start,
                                    s.index_start + (s.num_samples - 1) * (self.ns_per_sample or 1),
                                    s.num_samples, range_start=s.range_start,
                                    range_end=s.range_end)
                    for s in self.segments]
        return SampleIndex(segments, ns_per_sample=self.ns_per_sample, ns_dtype=self.ns_dtype,
                           edge=self.edge)


class _Header(BaseModel):
    """The header as stored: string values, parsed strictly (every key required)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    manifest_format_version: str
    dataset_name: str
    dataset_id: str
    index_name: str
    ns_per_sample: int | None
    ns_dtype: str | None
    recipe: dict[str, dict[str, Any]]
    required_fields: list[str]
    fetch_block_size: int
    buffer_size: int | None
    min_fill: int | None
    num_ranks: int
    num_workers_per_rank: int
    seed: int
    shuffle_strategy: str
    rayform_edge: EdgeMode
    rayform_dataset_version: int
    rayform_segments: list[tuple[str, str, int, int, int, int]]

    @field_validator("ns_per_sample", "ns_dtype", "buffer_size", "min_fill", mode="before")
    @classmethod
    def _none_token(cls, value: Any) -> Any:
        return None if value == "None" else value

    @field_validator("recipe", "required_fields", "rayform_segments", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value


def meta_to_metadata(meta: ManifestMeta) -> dict[str, str]:
    """The header as Arrow schema metadata (inverse of :func:`meta_from_schema`)."""
    raw: dict[str, Any] = {
        "manifest_format_version": meta.format_version,
        "dataset_name": meta.dataset_name,
        "dataset_id": meta.dataset_id,
        "index_name": meta.index_name,
        "ns_per_sample": meta.ns_per_sample,
        "ns_dtype": meta.ns_dtype,
        "recipe": json.dumps(meta.recipe, sort_keys=True),
        "required_fields": json.dumps(meta.required_fields),
        "fetch_block_size": meta.fetch_block_size,
        "buffer_size": meta.buffer_size,
        "min_fill": meta.min_fill,
        "num_ranks": meta.num_ranks,
        "num_workers_per_rank": meta.num_workers_per_rank,
        "seed": meta.seed,
        "shuffle_strategy": meta.shuffle_strategy,
        "rayform_edge": meta.edge,
        "rayform_dataset_version": meta.dataset_version,
        "rayform_segments": json.dumps([[s.segment_id, s.version, s.index_start, s.num_samples,
                                         s.range_start, s.range_end] for s in meta.segments]),
    }
    return {key: str(value) for key, value in raw.items()}


def meta_from_schema(schema: pa.Schema, *, source: str) -> ManifestMeta:
    """Parse the header of a manifest table or file.

    Raises:
        FormatError: not a rayform manifest, another format version, or a missing or malformed
            key (the message names ``source`` and the key).
    """
    stored = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    version = stored.get("manifest_format_version")
    if version != MANIFEST_FORMAT_VERSION:
        raise FormatError(
            f"{source}: not a manifest of format version {MANIFEST_FORMAT_VERSION} "
            f"(manifest_format_version={version!r}); write it with Manifest.write_parquet"
        )
    try:
        header = _Header.model_validate(stored)
    except (ValidationError, json.JSONDecodeError) as err:
        raise FormatError(
            f"{source}: damaged manifest header (format version {MANIFEST_FORMAT_VERSION}): "
            f"{_describe(err)}; regenerate it with Manifest.generate"
        ) from err
    segments = tuple(ManifestSegment(segment_id=s[0], version=s[1], index_start=s[2],
                                     num_samples=s[3], range_start=s[4], range_end=s[5])
                     for s in header.rayform_segments)
    return ManifestMeta(
        format_version=header.manifest_format_version, dataset_name=header.dataset_name,
        dataset_id=header.dataset_id, index_name=header.index_name,
        ns_per_sample=header.ns_per_sample, ns_dtype=header.ns_dtype, recipe=header.recipe,
        required_fields=header.required_fields, fetch_block_size=header.fetch_block_size,
        buffer_size=header.buffer_size, min_fill=header.min_fill, num_ranks=header.num_ranks,
        num_workers_per_rank=header.num_workers_per_rank, seed=header.seed,
        shuffle_strategy=header.shuffle_strategy,
        edge=header.rayform_edge,
        dataset_version=header.rayform_dataset_version, segments=segments)


def _describe(err: ValidationError | json.JSONDecodeError) -> str:
    if isinstance(err, json.JSONDecodeError):
        return f"a JSON value is not valid JSON ({err})"
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    return f"key {key!r}: {first['msg']}"


def check_columns(schema: pa.Schema, *, source: str) -> None:
    """Check that a manifest table has the schedule, sample and per-field range columns.

    Raises:
        FormatError: a column is missing or has the wrong type.
    """
    expected = {COL_RANK: pa.int32(), COL_WORKER: pa.int32(), COL_FETCH_GROUP: pa.int64(),
                COL_EMIT_RANK: pa.int64(), COL_ANCHOR: pa.int64(), COL_SAMPLE_INDEX: pa.int64()}
    for name, kind in expected.items():
        if name not in schema.names or schema.field(name).type != kind:
            found = schema.field(name).type if name in schema.names else "no such column"
            raise FormatError(f"{source}: manifest column {name!r} must be {kind}, got {found}")
    if COL_SEGMENT_ID not in schema.names:
        raise FormatError(f"{source}: manifest has no {COL_SEGMENT_ID!r} column")
