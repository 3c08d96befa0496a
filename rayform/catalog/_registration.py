"""Registration: turn recording files into content-addressed objects and a new dataset snapshot.

Sources are validated first (nothing is written for bad input), then their objects are copied
and hashed, then the new segment index object is stored, and only then is the snapshot header
committed, in one atomic step. A crash before the commit leaves unreferenced objects behind
(invisible), never a changed catalog.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

import pyarrow as pa

from rayform.catalog._entity_index import index_entities, merge_entities
from rayform.catalog._metadata import (
    DatasetVersion,
    LayerRecord,
    SegmentRecord,
)
from rayform.catalog._property_types import (
    inferred_property_types,
    merge_property_types,
    property_types_from_metadata,
    property_types_to_metadata,
)
from rayform.catalog._schema import STATIC_KEY
from rayform.catalog._snapshot import DatasetSnapshot, SegmentIndex, store_index
from rayform.errors import (
    ConfigError,
    ConversionWarning,
    CorruptRecordingError,
    DuplicateSegmentError,
    InvalidNameError,
    SchemaConflictError,
)
from rayform.recording._checksum import verify_recording
from rayform.recording._columns import TimelineKind
from rayform.recording._file import (
    PropertyValue,
    RecordingHeader,
    fits_arrow,
    header_from_schema,
    open_recording,
)
from rayform.recording._names import validate_layer_name, validate_segment_id
from rayform.recording._widening import merged_type
from rayform.recording._writer import asset_dir_for
from rayform.recording._written import BLOCK_BYTES as WRITTEN_BLOCK_BYTES
from rayform.recording._written import written_file
from rayform.storage import _parts
from rayform.storage._block_hashes import BLOCK_BYTES, BlockHashes, hash_blocks
from rayform.storage._documents import FORMAT_VERSION
from rayform.storage._fetch import SourceUri, fetch_file, parse_source
from rayform.storage._store import Store, sha256_file


class OnDuplicate(str, Enum):
    """What ``register`` does when the segment id and layer are already registered."""

    ERROR = "error"
    SKIP = "skip"
    REPLACE = "replace"


DUPLICATE_FIX = "pass on_duplicate='replace' to overwrite it or 'skip' to keep it"
"""How a Python caller resolves a duplicate; the command line says it with its own options."""


def duplicate_message(segment_id: str, layer_name: str, *, fix: str = DUPLICATE_FIX) -> str:
    return f"segment {segment_id!r} layer {layer_name!r} is already registered; {fix}"


def registration_request(uris: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                         layer_name: str | Sequence[str], on_duplicate: OnDuplicate | str, *,
                         caller: str) -> tuple[list[SourceUri], list[str], OnDuplicate]:
    """Validate ``register`` arguments: sources (paths, ``file://``, ``s3://``, ``https://``),
    one layer per source, a known duplicate policy.

    Raises:
        ConfigError: no sources, a mismatched ``layer_name`` list, an unknown ``on_duplicate``,
            or a source URI of an unsupported scheme.
        InvalidNameError: a layer name with a path separator or ``..``.
    """
    paths = [parse_source(uris)] if isinstance(uris, str | os.PathLike) \
        else [parse_source(u) for u in uris]
    if not paths:
        raise ConfigError(f"{caller}: no data sources to register (an empty list); give one or "
                          "more recordings: paths, file:// or s3:// URIs")
    layers = [layer_name] * len(paths) if isinstance(layer_name, str) else list(layer_name)
    if len(layers) != len(paths):
        raise ConfigError(
            f"{caller}: {len(layers)} layer names for {len(paths)} sources; the layer names and "
            "the sources must be the same length: give one name or one per source"
        )
    for layer in layers:
        validate_layer_name(layer)
    try:
        policy = OnDuplicate(on_duplicate)
    except ValueError:
        raise ConfigError(
            f"{caller}: on_duplicate={on_duplicate!r} is not one of "
            f"{[p.value for p in OnDuplicate]}"
        ) from None
    return paths, layers, policy


def local_source(source: SourceUri, staging: Path) -> tuple[Path, str]:
    """A source's local path (fetching a remote one into ``staging``) and its ``source_uri``.

    Raises:
        SourceNotFoundError, RemoteError, OfflineError: a remote source could not be fetched.
    """
    if source.path is not None:
        return source.path, str(source.path.resolve())
    return fetch_file(source.uri, staging).path, source.uri


@dataclass(frozen=True, slots=True)
class PreparedLayer:
    """A recording file validated and indexed, ready to be stored and committed.

    ``source`` is the recording file and ``asset_sources`` its asset files while the layer is only
    inspected (``layer.object`` is empty then); :func:`store_layer` copies them into the store.
    """

    segment_id: str
    layer_name: str
    layer: LayerRecord
    timelines: dict[str, str]
    schema: pa.Schema
    source: Path | None = None
    asset_sources: tuple[Path, ...] = ()
    request_uri: str = ""  # the source as the caller gave it (registration results name it)
    # The sha256 of ``source`` when this registration's importer wrote it (the store may then
    # move the file in place of a copy, see Store.put_own_object); None: hashed while copied.
    source_sha256: str | None = None
    # With ``source_sha256``: the sha256 of each BLOCK_BYTES block of ``source``, which the
    # writer computed in the same pass (the block-hash object is then made without a read).
    block_digests: bytes | None = None

    @property
    def is_stored(self) -> bool:
        return bool(self.layer.object)


def prepare_layer(store: Store, recording: Path, *, source_uri: str,
                  layer_name: str) -> PreparedLayer:
    """Validate a recording file, store it and its assets as objects, and index its entities.

    Raises:
        CorruptRecordingError: the file (or one of its assets) is damaged.
        InvalidNameError: its recording id is not a valid segment id.
    """
    return store_layer(store, inspect_layer(recording, source_uri=source_uri,
                                            layer_name=layer_name))


def inspect_layer(recording: Path, *, source_uri: str, layer_name: str,
                  request_uri: str = "", converted: bool = False) -> PreparedLayer:
    """Validate and index a recording file without writing anything.

    ``converted``: the file is an importer's output in this registration's own staging folder.
    When this process's writer wrote it and it is unchanged since (see
    :mod:`rayform.recording._written`), the writer's validation, checksum, file digest, block
    digests, header, schema and timeline columns stand and the file is not read; every other
    recording is verified in full.

    Raises:
        CorruptRecordingError: the file (or one of its assets) is damaged.
        InvalidNameError: its recording id is not a valid segment id.
    """
    written = written_file(recording) if converted else None
    if written is not None:
        schema, table = written.schema, written.timelines
        header = header_from_schema(schema, source=str(recording))
    else:
        header, table = open_recording(recording)
        verify_recording(recording, header, table)  # nothing invalid is ever content-addressed
        schema = table.schema
    try:
        validate_segment_id(header.recording_id)
    except InvalidNameError as err:
        raise InvalidNameError(f"{recording}: {err}") from None
    entities = index_entities(header, table)
    asset_dir = asset_dir_for(recording)
    asset_sources: list[Path] = []
    for digest, info in header.assets.items():
        src = asset_dir / digest
        if not src.is_file():
            raise CorruptRecordingError(
                f"{recording}: asset {digest} ({info.media_type}) is missing from {asset_dir}"
            )
        if verified_digest(src) != digest:
            raise CorruptRecordingError(f"{src}: content does not match its name (damaged asset)")
        asset_sources.append(src)
    # Not stored yet: the object digest and assets are filled in by store_layer, which makes
    # the record that is committed (and validated when read back).
    layer = LayerRecord.model_construct(
        object="",
        # the writer's file: its size is the one written_file has just found unchanged
        size_bytes=written.identity[2] if written is not None else recording.stat().st_size,
        num_rows=table.num_rows,
        registered_at_ns=time.time_ns(),
        source_uri=source_uri,
        assets={},
        properties=fitted_properties(header.properties, source=str(recording)),
        entities=entities,
    )
    return PreparedLayer(segment_id=header.recording_id, layer_name=layer_name, layer=layer,
                         timelines=dict(header.timelines), schema=_layer_schema(header, schema),
                         source=recording, asset_sources=tuple(asset_sources),
                         request_uri=request_uri,
                         source_sha256=written.sha256 if written is not None else None,
                         block_digests=written.block_digests
                         if written is not None and WRITTEN_BLOCK_BYTES == BLOCK_BYTES else None)


def fitted_properties(properties: dict[str, PropertyValue], *, source: str
                      ) -> dict[str, PropertyValue]:
    """``properties`` with every integer beyond int64 kept as its decimal text (with a warning):
    stored as is, one value would break every read of the segment table."""
    out: dict[str, PropertyValue] = {}
    for name, value in properties.items():
        if not fits_arrow(value):
            warnings.warn(f"{source}: property {name!r} = {str(value)[:40]} does not fit a 64-bit "
                          "integer; it is stored as text", ConversionWarning, stacklevel=2)
            value = str(value)
        out[name] = value
    return out


_VERIFIED_MAX = 4096
_verified: dict[tuple[int, int, int, int], str] = {}


def verified_digest(path: Path) -> str:
    """sha256 of a file, hashed once per process per (device, inode, size, mtime).

    Recordings of one source often share an asset file (hard links to one MP4), so each episode
    would otherwise hash the same bytes again.
    """
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    digest = _verified.get(key)
    if digest is None:
        digest = sha256_file(path)
        if len(_verified) >= _VERIFIED_MAX:
            _verified.clear()
        _verified[key] = digest
    return digest


def store_layer(store: Store, prepared: PreparedLayer) -> PreparedLayer:
    """Copy an inspected layer's recording file and assets into the store (content-addressed)."""
    if prepared.is_stored:
        return prepared
    assert prepared.source is not None
    assets: dict[str, int] = {}
    for src in prepared.asset_sources:
        # An asset shared by many recordings (one LeRobot v3.0 MP4 holds many episodes) is
        # copied once: its name is its verified digest, and stored objects never change.
        if store.keep_object(src.name):
            assets[src.name] = src.stat().st_size
            continue
        stored, size = store.put_object(src)
        assets[stored] = size
    # The block hashes first: put_own_object moves a converted file into the store.
    blocks = store_block_hashes(store, prepared.source, size_bytes=prepared.layer.size_bytes,
                                digests=prepared.block_digests) \
        if has_block_hashes(prepared.layer.size_bytes) else None
    if prepared.source_sha256 is not None:
        digest, size = store.put_own_object(prepared.source, sha256=prepared.source_sha256)
    else:
        digest, size = store.put_object(prepared.source)
    layer = LayerRecord(**{**dict(prepared.layer), "object": digest, "size_bytes": size,
                           "assets": assets, "block_hashes": blocks})
    return PreparedLayer(segment_id=prepared.segment_id, layer_name=prepared.layer_name,
                         layer=layer, timelines=prepared.timelines, schema=prepared.schema,
                         request_uri=prepared.request_uri)


def has_block_hashes(size_bytes: int) -> bool:
    """Whether a recording of ``size_bytes`` is stored with a block-hash object: only one that
    remote readers fetch block by block (:data:`~rayform.storage._parts.DEFAULT_BLOCKS_FROM_BYTES`
    and more) uses it. A smaller one is fetched and verified whole, so its list would be a
    durable object (a file and its fsync at registration) that no reader asks for. Every reader
    fetches and verifies a layer without one whole, as it does layers registered before block
    hashes existed."""
    return size_bytes >= _parts.DEFAULT_BLOCKS_FROM_BYTES  # read here: tests lower it


def store_block_hashes(store: Store, source: Path, *, size_bytes: int = 0,
                       digests: bytes | None = None) -> str:
    """Store the block-hash object of the recording file ``source`` (remote readers verify the
    recording block by block against it); returns its digest.

    ``digests``: the sha256 of each :data:`BLOCK_BYTES` block of the ``size_bytes`` file, as
    its writer computed them (see :mod:`rayform.recording._written`); None: read from the file.
    """
    blocks = hash_blocks(source) if digests is None else \
        BlockHashes(block_bytes=BLOCK_BYTES, size_bytes=size_bytes, digests=digests)
    digest, _ = store.put_object_bytes(blocks.to_bytes())
    return digest


def schema_to_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def segment_version(layers: dict[str, LayerRecord]) -> str:
    """A segment's version: a hash of its layers' content hashes (changes iff the content does)."""
    text = "\n".join(f"{name}:{layers[name].object}" for name in sorted(layers))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def segment_record(segment_id: str, layers: dict[str, LayerRecord], now: int) -> SegmentRecord:
    """A segment's record, derived from its layers (later layer names override properties)."""
    names = sorted(layers)
    properties: dict[str, PropertyValue] = {}
    for name in names:
        properties.update(layers[name].properties)
    return SegmentRecord(
        segment_id=segment_id,
        version=segment_version(layers),
        layers={name: layers[name] for name in names},
        properties=properties,
        entities=merge_entities([layers[name].entities for name in names]),
        num_rows=sum(layer.num_rows for layer in layers.values()),
        size_bytes=sum(layer.size_bytes + sum(layer.assets.values()) for layer in layers.values()),
        last_updated_at_ns=now,
    )


@dataclass(frozen=True, slots=True)
class SnapshotDraft:
    """A dataset snapshot computed but not stored: what a commit writes."""

    timelines: dict[str, TimelineKind]
    schema_ipc: str
    index: SegmentIndex
    touched: list[str]

    def commit_as(self, store: Store, number: int) -> DatasetVersion:
        """Store the segment index object and return the snapshot header numbered ``number``."""
        return DatasetVersion(
            format="rayform-dataset-version",
            format_version=FORMAT_VERSION,
            version=number,
            committed_at_ns=time.time_ns(),
            timelines=self.timelines,
            schema_ipc=self.schema_ipc,
            segment_index=store_index(store, self.index),
            num_segments=len(self.index),
        )


WIDENED_KEY: Final = b"rayform:widened"
"""Field metadata of a dataset schema column whose type was widened: some segments hold it
narrower (a struct without some fields, non-nullable items), so ``rayform schema`` checks them."""


_MERGE_KEYS: Final = frozenset({WIDENED_KEY, STATIC_KEY})
"""The only field metadata :func:`merged_field` keeps."""


def _layer_schema(header: RecordingHeader, schema: pa.Schema) -> pa.Schema:
    """A recording file's schema, its static-only columns marked with :data:`STATIC_KEY`."""
    fields = []
    for field in schema.remove_metadata():
        entity, _, component = field.name.partition(":")
        static = header.static_entities.get(entity)
        temporal = header.entities.get(entity)
        if static is not None and component in static.components and \
                (temporal is None or component not in temporal.components):
            field = field.with_metadata({STATIC_KEY: b"1"})
        fields.append(field)
    return pa.schema(fields)


def merged_field(known: pa.Field, new: pa.Field, source_uri: str) -> pa.Field:
    """The dataset schema's field after a layer brings ``new`` for column ``known``: the merged
    type (:data:`WIDENED_KEY` marked when it changed), static while every layer's is.

    Raises:
        SchemaConflictError: the types do not merge (see :mod:`rayform.recording._widening`).
    """
    merged = merged_type(known.type, new.type)
    if merged is None:
        raise SchemaConflictError(
            f"{source_uri}: column {known.name!r} has type {new.type} but the dataset's schema "
            f"holds {known.type}; the schemas cannot be merged (only missing struct fields, "
            "nullability and null-typed columns widen): cast it before registering or use "
            "another dataset"
        )
    meta: dict[bytes, bytes] = {}
    if merged != known.type or merged != new.type or WIDENED_KEY in (known.metadata or {}):
        meta[WIDENED_KEY] = b"1"
    if STATIC_KEY in (known.metadata or {}) and STATIC_KEY in (new.metadata or {}):
        meta[STATIC_KEY] = b"1"
    return pa.field(known.name, merged, metadata=meta or None)


def apply_registration(old: DatasetSnapshot | None, prepared: list[PreparedLayer],
                       on_duplicate: OnDuplicate) -> SnapshotDraft:
    """The snapshot after registering ``prepared`` into ``old``, and the segment ids touched.

    Pure (writes nothing): raises ``DuplicateSegmentError`` or ``SchemaConflictError`` to abort.
    Only the records of touched segments are read; the others are carried over as stored.
    """
    change = registration_change(old, prepared, on_duplicate)
    index = old.index if old else SegmentIndex.from_records([])
    return SnapshotDraft(timelines=change.timelines, schema_ipc=schema_to_text(change.schema),
                         index=index.replaced(list(change.updated.values())),
                         touched=change.touched)


@dataclass(frozen=True, slots=True)
class RegistrationChange:
    """What registering layers changes in a snapshot: its timelines and schema, the records of
    the segments it updates, and their ids in the order registered."""

    timelines: dict[str, TimelineKind]
    schema: pa.Schema
    updated: dict[str, SegmentRecord]
    touched: list[str]


def registration_change(old: DatasetSnapshot | None, prepared: list[PreparedLayer],
                        on_duplicate: OnDuplicate) -> RegistrationChange:
    """What :func:`apply_registration` changes in ``old``, without building the new segment
    index (a check before storing needs only whether it raises and what it touches).

    Raises:
        DuplicateSegmentError, SchemaConflictError: as :func:`apply_registration`.
    """
    timelines: dict[str, TimelineKind] = dict(old.timelines) if old else {}
    old_schema = schema_from_text(old.schema_ipc) if old else pa.schema([])
    fields = {f.name: f for f in old_schema}
    index = old.index if old else SegmentIndex.from_records([])
    property_types = known_property_types(old_schema, index)
    now = time.time_ns()
    updated: dict[str, SegmentRecord] = {}
    touched: list[str] = []
    for prep in prepared:
        for name, kind in prep.timelines.items():
            known = timelines.get(name)
            if known is not None and known != kind:
                raise SchemaConflictError(
                    f"{prep.layer.source_uri}: timeline {name!r} is a {kind} timeline here but a "
                    f"{known} timeline in the dataset; rename it or register into another dataset"
                )
            timelines[name] = kind  # type: ignore[assignment]
        for field in prep.schema:
            known_field = fields.get(field.name)
            if known_field is None:
                fields[field.name] = field
            elif not (known_field.equals(field, check_metadata=True)  # merges to itself
                      and set(known_field.metadata or {}) <= _MERGE_KEYS):
                fields[field.name] = merged_field(known_field, field, prep.layer.source_uri)
        property_types = merge_property_types(property_types, prep.layer.properties,
                                              source_uri=prep.layer.source_uri)
        existing = updated.get(prep.segment_id) or index.record(prep.segment_id)
        if existing is not None and prep.layer_name in existing.layers:
            if on_duplicate is OnDuplicate.ERROR:
                raise DuplicateSegmentError(duplicate_message(prep.segment_id, prep.layer_name))
            if on_duplicate is OnDuplicate.SKIP:
                continue
        layers = dict(existing.layers) if existing else {}
        layers[prep.layer_name] = prep.layer
        updated[prep.segment_id] = segment_record(prep.segment_id, layers, now)
        touched.append(prep.segment_id)
    schema = pa.schema(list(fields.values()), metadata=property_types_to_metadata(property_types))
    return RegistrationChange(timelines=timelines, schema=schema, updated=updated, touched=touched)


def known_property_types(schema: pa.Schema, index: SegmentIndex) -> dict[str, pa.DataType]:
    """The property types a dataset's snapshot records, or (a snapshot from before they were
    recorded) the types its segments' values show."""
    recorded = property_types_from_metadata(schema)
    if recorded is not None or len(index) == 0:
        return recorded or {}
    rows = index.rows(None).column("properties").to_pylist()
    return inferred_property_types(json.loads(text) for text in rows)

