"""RecordingWriter: write one recording (one segment) from numpy or Arrow data.

Example::

    with RecordingWriter("ep0.rfr", recording_id="ep0") as rec:
        rec.set_properties(task="pick cube", success=True)
        rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(n)}, values=q)
        rec.log_encoded_images("/cam0/rgb", timelines=..., blobs=jpegs, media_type="image/jpeg")
        rec.log_video_stream("/cam1", timelines=..., samples=packets, is_keyframe=kf, codec="h264")

Timelines are given as arrays whose type picks the kind: integers are sequence timelines,
``datetime64``/``timestamp`` are timestamp timelines, ``timedelta64``/``duration`` are duration
timelines (all stored in nanoseconds). Components are stored as Arrow ``List`` columns named
``"<entity>:<Archetype>:<component>"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform._atomic import atomic_path
from rayform._local_writes import naming_full_disk
from rayform.errors import ConfigError, SchemaConflictError
from rayform.recording import _written
from rayform.recording._checksum import content_digest, stored_messages
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    ENCODED_IMAGE_MEDIA_TYPE,
    PROPERTIES_ENTITY,
    SCALARS,
    VIDEO_ASSET,
    VIDEO_ASSET_MEDIA_TYPE,
    VIDEO_CODEC,
    VIDEO_FRAME_IS_KEYFRAME,
    VIDEO_FRAME_TIMESTAMP,
    VIDEO_IS_KEYFRAME,
    VIDEO_SAMPLE,
    TimelineKind,
)
from rayform.recording._file import (
    HEADER_KEY,
    RECORDING_FORMAT,
    RECORDING_FORMAT_VERSION,
    AssetInfo,
    EntityRows,
    PropertyValue,
    RecordingHeader,
)
from rayform.recording._ipc_file import (
    EncodedBatch,
    encode_batches,
    has_dictionary,
    has_encoded_media,
    rewrite_schema,
    write_plain_file,
    write_recording_file,
)
from rayform.recording._names import validate_entity_path, validate_segment_id
from rayform.recording._widening import merged_type, widen
from rayform.recording._written import BLOCK_BYTES, remember_written

TimelineLike: TypeAlias = "npt.ArrayLike | pa.Array"
ComponentLike: TypeAlias = "npt.ArrayLike | pa.Array | Sequence[Any]"

ASSETS_SUFFIX = ".assets"
_UNSET_DIGEST = "0" * 64


def timeline_array(name: str, values: TimelineLike) -> tuple[TimelineKind, pa.Array]:
    """Convert timeline values to an Arrow array and say which kind of timeline they form."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = np.asarray(values)
        if values.dtype.kind == "M":
            values = pa.array(values.astype("datetime64[ns]"), type=pa.timestamp("ns"))
        elif values.dtype.kind == "m":
            values = pa.array(values.astype("timedelta64[ns]"), type=pa.duration("ns"))
        elif values.dtype.kind in "iu":
            values = pa.array(values.astype(np.int64), type=pa.int64())
        else:
            raise ConfigError(
                f"timeline {name!r}: values must be integers (sequence), datetime64 (timestamp) or "
                f"timedelta64 (duration), got dtype {values.dtype}"
            )
    t = values.type
    if pa.types.is_integer(t):
        return "sequence", _cast(values, pa.int64())
    if pa.types.is_timestamp(t):
        return "timestamp", _cast(values, pa.timestamp("ns"))
    if pa.types.is_duration(t):
        return "duration", _cast(values, pa.duration("ns"))
    raise ConfigError(f"timeline {name!r}: unsupported Arrow type {t}")


def once_as_arrow(timelines: Mapping[str, TimelineLike]) -> dict[str, TimelineLike]:
    """``timelines`` converted to the Arrow arrays :meth:`RecordingWriter.log_columns` stores,
    for an importer that logs many entities on the same timelines: converted once instead of
    once per entity (the stored bytes are the same)."""
    return {name: timeline_array(name, values)[1] for name, values in timelines.items()}


def _cast(values: pa.Array, target: pa.DataType) -> pa.Array:
    """``values`` as ``target`` (as they are when of that type already: a cast costs ~15 µs)."""
    return values if values.type == target else values.cast(target)


def component_array(name: str, values: ComponentLike, num_rows: int) -> pa.Array:
    """Convert component values to an Arrow ``List`` array of ``num_rows`` rows."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        arr = values
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            arr = _wrap_rows(arr)
        elif pa.types.is_large_list(arr.type):
            arr = arr.cast(pa.list_(arr.type.value_type))
    elif isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        arr = _numpy_to_list(values)
    elif isinstance(values, list | tuple) and values and isinstance(values[0], bytes | bytearray):
        arr = _wrap_rows(pa.array(values, type=pa.binary()))
    else:
        np_values: npt.NDArray[Any] = np.asarray(values)
        if np_values.dtype.kind in "biuf":
            arr = _numpy_to_list(np_values)
        else:
            arr = _wrap_rows(pa.array(list(np_values)))
    if len(arr) != num_rows:
        raise ConfigError(
            f"component {name!r} has {len(arr)} rows but its timelines have {num_rows}; "
            "give one value (or list) per row"
        )
    return arr


def _numpy_to_list(values: npt.NDArray[Any]) -> pa.Array:
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ConfigError(f"numeric components must be [N] or [N, D] arrays, got shape {values.shape}")
    n, d = values.shape
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    offsets = pa.array(np.arange(0, (n + 1) * d, d, dtype=np.int32)) if n else pa.array([0], pa.int32())
    return pa.ListArray.from_arrays(offsets, flat)


def _wrap_rows(values: pa.Array) -> pa.Array:
    offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, values)


class RecordingWriter:
    """Accumulates one recording in memory and writes it as a rayform recording file on close.

    Args:
        path: the recording file to write (``.rfr``).
        recording_id: the segment id it registers as.
        application_id: what wrote it.
        compress: zstd-compress every entity's batch except encoded media (JPEG blobs, video
            packets), which is stored as-is (default). ``False`` stores every batch
            uncompressed, all of the file memory-mappable, at several times the size.
    """

    def __init__(self, path: str | os.PathLike[str], *, recording_id: str,
                 application_id: str = "rayform", compress: bool = True) -> None:
        validate_segment_id(recording_id)
        self._path = Path(path)
        self._compress = compress
        self._recording_id = recording_id
        self._application_id = application_id
        self._properties: dict[str, PropertyValue] = {}
        self._timelines: dict[str, TimelineKind] = {}
        self._blocks: dict[str, list[tuple[dict[str, pa.Array], dict[str, pa.Array]]]] = {}
        self._static: dict[str, dict[str, pa.Array]] = {}
        self._assets: dict[str, tuple[Path | bytes, AssetInfo]] = {}
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    # ----------------------------------------------------------------- properties / assets
    def set_property(self, name: str, value: PropertyValue) -> None:
        """Set one static segment property: str, int, float, bool or None, or a list of them of
        one type (``[0.1, 0.2]``); the segment table shows it in that Arrow type."""
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float | bool | type(None)) for v in items):
            raise ConfigError(
                f"property {name!r}: values must be str, int, float, bool or None, or a list of "
                f"them, got {value!r}"
            )
        kinds = {bool if isinstance(v, bool) else float if isinstance(v, int | float) else type(v)
                 for v in items if v is not None}
        if len(kinds) > 1:
            raise ConfigError(
                f"property {name!r}: the items of a list property must have one type, got "
                f"{value!r}"
            )
        if not name or "\n" in name:
            raise ConfigError(f"property name {name!r} must be a non-empty single line")
        self._properties[name] = list(value) if isinstance(value, list) else value

    def set_properties(self, **properties: PropertyValue) -> None:
        """Set several properties: ``rec.set_properties(task="pick", success=True)``."""
        for name, value in properties.items():
            self.set_property(name, value)

    def add_asset(self, data: str | os.PathLike[str] | bytes, *, media_type: str) -> str:
        """Attach a side file (e.g. an MP4) kept as-is; returns its content hash (sha256 hex)."""
        if isinstance(data, bytes):
            digest = hashlib.sha256(data).hexdigest()
            self._assets[digest] = (data, AssetInfo(media_type=media_type, size_bytes=len(data)))
            return digest
        src = Path(data)
        digest = _file_digest(src)
        self._assets[digest] = (src, AssetInfo(media_type=media_type, size_bytes=src.stat().st_size))
        return digest

    # ----------------------------------------------------------------------------- logging
    def log_columns(self, entity_path: str, *, timelines: Mapping[str, TimelineLike],
                    components: Mapping[str, ComponentLike]) -> None:
        """Log ``N`` rows of an entity: every timeline and component has one value per row."""
        self._check_open()
        validate_entity_path(entity_path)
        if not timelines:
            raise ConfigError(
                f"entity {entity_path!r}: log_columns needs at least one timeline; "
                "use log_static for static data"
            )
        tls: dict[str, pa.Array] = {}
        num_rows: int | None = None
        for name, values in timelines.items():
            kind, arr = timeline_array(name, values)
            known = self._timelines.get(name)
            if known is not None and known != kind:
                raise SchemaConflictError(
                    f"timeline {name!r} was logged as a {known} timeline and now as {kind}"
                )
            if arr.null_count:
                raise ConfigError(f"timeline {name!r} of entity {entity_path!r} contains nulls")
            if num_rows is not None and len(arr) != num_rows:
                raise ConfigError(
                    f"entity {entity_path!r}: timeline {name!r} has {len(arr)} values, others {num_rows}"
                )
            num_rows = len(arr)
            self._timelines[name] = kind
            tls[name] = arr
        assert num_rows is not None
        comps = {c: component_array(f"{entity_path}:{c}", v, num_rows) for c, v in components.items()}
        if not comps:
            raise ConfigError(f"entity {entity_path!r}: log_columns needs at least one component")
        self._blocks.setdefault(entity_path, []).append((tls, comps))

    def log_static(self, entity_path: str, *, components: Mapping[str, ComponentLike]) -> None:
        """Log static (timeless) components of an entity: one value (list) per component."""
        self._check_open()
        validate_entity_path(entity_path)
        if entity_path == PROPERTIES_ENTITY:
            raise ConfigError(f"use set_property for {PROPERTIES_ENTITY}")
        static = self._static.setdefault(entity_path, {})
        for name, value in components.items():
            if isinstance(value, pa.Array) and pa.types.is_list(value.type):
                static[name] = component_array(name, value, 1)
            elif isinstance(value, str | bytes | int | float | bool):
                static[name] = component_array(name, pa.array([value]), 1)
            else:
                static[name] = component_array(name, pa.array([np.asarray(value).reshape(-1)]), 1)

    def log_scalars(self, entity_path: str, *, timelines: Mapping[str, TimelineLike],
                    values: npt.ArrayLike) -> None:
        """Log scalars or vectors (``[N]`` or ``[N, D]``) as ``Scalars:scalars``, keeping the dtype."""
        self.log_columns(entity_path, timelines=timelines, components={SCALARS: np.asarray(values)})

    def log_encoded_images(self, entity_path: str, *, timelines: Mapping[str, TimelineLike],
                           blobs: Sequence[bytes], media_type: str) -> None:
        """Log encoded images (JPEG/PNG bytes, one per row) as ``EncodedImage:blob``."""
        n = len(blobs)
        self.log_columns(
            entity_path,
            timelines=timelines,
            components={
                ENCODED_IMAGE_BLOB: _wrap_rows(pa.array(list(blobs), type=pa.binary())),
                ENCODED_IMAGE_MEDIA_TYPE: _wrap_rows(pa.array([media_type] * n, type=pa.string())),
            },
        )

    def log_video_stream(self, entity_path: str, *, timelines: Mapping[str, TimelineLike],
                         samples: Sequence[bytes], is_keyframe: npt.ArrayLike, codec: str) -> None:
        """Log a video packet stream: one encoded packet per row, its keyframe flag, the codec."""
        flags = np.asarray(is_keyframe, dtype=bool)
        if flags.shape != (len(samples),):
            raise ConfigError(
                f"entity {entity_path!r}: is_keyframe has shape {flags.shape}, expected ({len(samples)},)"
            )
        self.log_columns(
            entity_path,
            timelines=timelines,
            components={
                VIDEO_SAMPLE: _wrap_rows(pa.array(list(samples), type=pa.binary())),
                VIDEO_IS_KEYFRAME: _wrap_rows(pa.array(flags, type=pa.bool_())),
            },
        )
        self.log_static(entity_path, components={VIDEO_CODEC: codec})

    def log_video_asset(self, entity_path: str, video: str | os.PathLike[str] | bytes, *,
                        timelines: Mapping[str, TimelineLike], frame_timestamps_ns: npt.ArrayLike,
                        is_keyframe: npt.ArrayLike, media_type: str = "video/mp4") -> str:
        """Attach a video file kept as-is, plus one row per frame (its pts in ns, keyframe flag).

        Returns the asset's sha256. Frame ``i`` is shown at the timelines' ``i``-th values.
        """
        pts = np.asarray(frame_timestamps_ns, dtype=np.int64)
        flags = np.asarray(is_keyframe, dtype=bool)
        if pts.shape != flags.shape or pts.ndim != 1:
            raise ConfigError(
                f"entity {entity_path!r}: frame_timestamps_ns {pts.shape} and is_keyframe "
                f"{flags.shape} must be 1-D arrays of the same length"
            )
        digest = self.add_asset(video, media_type=media_type)
        self.log_columns(
            entity_path,
            timelines=timelines,
            components={
                VIDEO_FRAME_TIMESTAMP: _wrap_rows(pa.array(pts, type=pa.int64())),
                VIDEO_FRAME_IS_KEYFRAME: _wrap_rows(pa.array(flags, type=pa.bool_())),
            },
        )
        self.log_static(entity_path, components={VIDEO_ASSET: digest,
                                                  VIDEO_ASSET_MEDIA_TYPE: media_type})
        return digest

    # ------------------------------------------------------------------------------ output
    def build_table(self) -> tuple[RecordingHeader, pa.Table]:
        """Assemble the wide table and header without writing anything."""
        header, schema, batches, _ = self._assemble()
        table = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
        return header, table

    def _parts(self) -> tuple[RecordingHeader, pa.Schema, list[pa.RecordBatch],
                              list[EncodedBatch] | None, list[pa.Array]]:
        """The header without its checksum, the plain schema, the batches (one per entity),
        their stored messages (None: written whole by pyarrow, see ``has_dictionary``) and the
        logged arrays in them (the rest are nulls made here)."""
        columns: dict[str, pa.DataType] = {}
        for name, kind in self._timelines.items():
            columns[name] = {"sequence": pa.int64(), "timestamp": pa.timestamp("ns"),
                             "duration": pa.duration("ns")}[kind]
        # Each entity's columns by name and its number of rows. An entity logged once is not
        # made a table: its arrays are the logged ones, and the timelines an importer logs for
        # many entities are one array each (see once_as_arrow), checked and measured once.
        entity_columns: list[tuple[str, bool, dict[str, pa.Array], int]] = []
        ascending: dict[int, bool] = {}
        for entity in sorted(self._blocks):
            blocks = self._blocks[entity]
            first = next(iter(blocks[0][0]))
            if len(blocks) == 1:
                tls, values = blocks[0]
                own = {**tls, **{f"{entity}:{c}": a for c, a in values.items()}}
                num_rows = len(tls[first])
                if num_rows > 1 and not _memo(ascending, tls[first], _ascending):
                    own = _columns(pa.table(own), first)
            else:
                parts = [pa.table({**t, **{f"{entity}:{c}": a for c, a in comps.items()}})
                         for t, comps in blocks]
                table = pa.concat_tables(parts, promote_options="permissive")
                num_rows = table.num_rows
                own = _columns(table, first if num_rows > 1 and not _ascending(
                    table.column(first).combine_chunks()) else None)
            entity_columns.append((entity, False, own, num_rows))
        for entity in sorted(self._static):
            own = {f"{entity}:{c}": a for c, a in self._static[entity].items()}
            entity_columns.append((entity, True, own, 1 if own else 0))  # one row, if any
        for _, _, own, _ in entity_columns:
            for name, array in own.items():
                if name in self._timelines:
                    continue
                known = columns.get(name)
                merged = array.type if known is None else merged_type(known, array.type)
                if merged is None:
                    raise SchemaConflictError(
                        f"column {name!r} logged with types {known} and {array.type}, "
                        "which no schema can hold (see rayform.recording._widening)"
                    )
                columns[name] = merged
        schema = pa.schema([pa.field(n, t) for n, t in columns.items()])
        types = list(columns.values())
        batches: list[pa.RecordBatch] = []
        compressed: list[bool] = []
        entities: dict[str, EntityRows] = {}
        static_entities: dict[str, EntityRows] = {}
        row = 0
        # Many entities lack most columns: one array of nulls per length and type (its
        # buffers are zeros, and a batch's bytes are the same whichever array it holds).
        nulls: dict[tuple[int, int], pa.Array] = {}
        null_bytes: dict[tuple[int, int], int] = {}
        sizes: list[int | None] = []  # each batch's nbytes, where it may be compressed
        logged_bytes: list[int] = []  # the same without the columns of nulls
        logged: dict[int, pa.Array] = {}  # by identity: a shared timeline is validated once
        own_bytes: dict[int, int] = {}
        first_of_type: dict[pa.DataType, int] = {}
        same_type = [first_of_type.setdefault(t, i) for i, t in enumerate(types)]
        whole = has_dictionary(first_of_type)  # written whole by pyarrow (dictionary batches)
        for entity, is_static, own, num_rows in entity_columns:
            arrays = []
            own_arrays: list[pa.Array] = []
            null_keys: list[tuple[int, int]] = []
            for i, (name, target) in enumerate(zip(columns, types, strict=True)):
                column = own.get(name)
                if column is None:
                    key = (num_rows, same_type[i])
                    if key not in nulls:
                        nulls[key] = pa.nulls(num_rows, type=target)
                    arrays.append(nulls[key])
                    null_keys.append(key)
                    continue
                arrays.append(widen(column, target))
                own_arrays.append(arrays[-1])
            for array in own_arrays:
                logged.setdefault(id(array), array)
            batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
            batches.append(batch)
            components = {c: a for c, a in own.items() if c not in self._timelines}
            may_compress = self._compress and not has_encoded_media(components)
            compressed.append(may_compress)
            # A batch's nbytes is the sum of its columns' (Arrow adds them up the same way);
            # the columns of nulls, shared by many batches, are measured once.
            for key in null_keys if may_compress else ():
                if key not in null_bytes:
                    null_bytes[key] = nulls[key].nbytes
            logged_bytes.append(sum(_memo(own_bytes, a, _nbytes) for a in own_arrays)
                                if may_compress else 0)
            sizes.append(logged_bytes[-1] + sum(null_bytes[k] for k in null_keys)
                         if may_compress else None)
            comps = sorted(c.split(":", 1)[1] for c in components)
            rows = EntityRows(start=row, stop=row + num_rows, components=comps)
            (static_entities if is_static else entities)[entity] = rows
            row += num_rows
        encoded = [] if whole else encode_batches(batches, compressed, sizes,
                                                     logged_bytes=logged_bytes)
        header = RecordingHeader(
            format=RECORDING_FORMAT,
            format_version=RECORDING_FORMAT_VERSION,
            recording_id=self._recording_id,
            application_id=self._application_id,
            properties=dict(self._properties),
            timelines=dict(self._timelines),
            entities=entities,
            static_entities=static_entities,
            assets={h: info for h, (_, info) in self._assets.items()},
            content_sha256=_UNSET_DIGEST,  # the checksum does not cover itself
        )
        return header, schema, batches, None if whole else encoded, list(logged.values())

    def _assemble(self) -> tuple[RecordingHeader, pa.Schema, list[pa.RecordBatch],
                                 list[EncodedBatch] | None]:
        """The header, schema (the header in its metadata), batches (one per entity) and their
        stored messages (None: the schema has dictionaries, pyarrow writes the file whole)."""
        header, schema, batches, encoded, _ = self._parts()
        return (*_with_digest(header, schema, _checksum(header, schema, batches, encoded)),
                batches, encoded)

    def close(self) -> Path:
        """Write the recording file (atomically) and its assets; returns the file's path."""
        self._check_open()
        unset, plain, batches, encoded, logged = self._parts()
        _validate(self._path, batches, logged)
        # A large recording is written while its checksum is computed on another thread, with
        # the header's checksum unset, then the two places that hold the header (the schema
        # message and the footer) are rewritten in place: the header's length does not change.
        overlap = encoded is not None and \
            sum(e.message.body.size for e in encoded) >= _OVERLAPPED_CHECKSUM_BYTES
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rayform-checksum") \
            if overlap else None
        try:
            if pool is not None:
                checksum = pool.submit(_checksum, unset, plain, batches, encoded)
                header, schema = _with_digest(unset, plain, _UNSET_DIGEST)
            else:
                header, schema = _with_digest(unset, plain,
                                              _checksum(unset, plain, batches, encoded))
            path = self._write(header, schema, batches, encoded, checksum if pool else None)
        finally:
            if pool is not None:
                pool.shutdown()
        return path

    def _write(self, header: RecordingHeader, schema: pa.Schema, batches: list[pa.RecordBatch],
               encoded: list[EncodedBatch] | None, checksum: Future[str] | None) -> Path:
        with naming_full_disk(self._path.parent, what=f"writing recording {self._path}"), \
                atomic_path(self._path) as tmp:
            if encoded is None:
                with pa.OSFile(str(tmp), "wb") as sink:
                    write_plain_file(sink, schema, batches)
            else:
                layout = write_recording_file(tmp, schema, encoded)
                if checksum is not None:
                    header, schema = _with_digest(header, schema, checksum.result())
                    rewrite_schema(tmp, schema, layout)
            file_sha256, block_digests = _file_hashes(tmp)
            if self._assets:
                asset_dir = asset_dir_for(self._path)
                asset_dir.mkdir(parents=True, exist_ok=True)
                for digest, (src, _) in self._assets.items():
                    dest = asset_dir / digest
                    if isinstance(src, bytes):
                        dest.write_bytes(src)
                    else:
                        _link_or_copy(src, dest)
        names = list(self._timelines)
        timelines = pa.Table.from_batches([b.select(names) for b in batches],
                                          schema=pa.schema([schema.field(n) for n in names]))
        remember_written(self._path, sha256=file_sha256, block_digests=block_digests,
                         schema=schema, timelines=timelines)
        self._closed = True
        return self._path

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigError(f"RecordingWriter for {self._path} is already closed")

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()


# Digests of asset files already hashed in this process, keyed by the file's identity: a LeRobot
# v3.0 video holding many episodes is attached to each episode's recording and hashed once.
_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def _ascending(values: pa.Array) -> bool:
    """Whether a timeline's values are already in order (sorting them would copy every row's
    data)."""
    numbers = _cast(values, pa.int64()).to_numpy(zero_copy_only=False)
    return bool(np.all(numbers[1:] >= numbers[:-1]))


def _nbytes(array: pa.Array) -> int:
    return int(array.nbytes)


_T = TypeVar("_T")


def _memo(memo: dict[int, _T], array: pa.Array, measure: Callable[[pa.Array], _T]) -> _T:
    """``measure(array)``, kept in ``memo`` by the array's identity (valid while the arrays
    measured are alive: those held by the writer being closed)."""
    found = memo.get(id(array))
    if found is None:
        found = memo[id(array)] = measure(array)
    return found


def _columns(table: pa.Table, sort_by: str | None) -> dict[str, pa.Array]:
    """The table's columns by name, one array each, its rows in the order of ``sort_by``."""
    if sort_by is not None:
        table = table.take(pa.compute.sort_indices(table, sort_keys=[(sort_by, "ascending")]))
    return {name: column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
            for name, column in zip(table.column_names, table.columns, strict=True)}


def _file_sha256(path: Path) -> str:
    """sha256 of a file (memory-mapped: read from the page cache, no copy in memory)."""
    with path.open("rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return hashlib.sha256().hexdigest()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest()


def _validate(path: Path, batches: list[pa.RecordBatch], logged: list[pa.Array]) -> None:
    """What registration would check of the file (see :mod:`rayform.recording._written`): the
    batches' structure, and every logged array in full (the columns of nulls that fill the rest
    of each batch are valid as made).

    Raises:
        ConfigError: invalid Arrow data (an importer or caller bug).
    """
    try:
        for batch in batches:
            batch.validate()
        for array in logged:
            array.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        raise ConfigError(f"recording {path}: logged data is not valid Arrow "
                          f"(an importer or caller bug): {err}") from err


_PARALLEL_HASH_BYTES = 8 << 20
_OVERLAPPED_CHECKSUM_BYTES = 8 << 20


def _checksum(header: RecordingHeader, schema: pa.Schema, batches: list[pa.RecordBatch],
              encoded: list[EncodedBatch] | None) -> str:
    """The recording's ``content_sha256`` (see :mod:`rayform.recording._checksum`)."""
    if encoded is None:  # written whole by pyarrow (uncompressed)
        sink = pa.BufferOutputStream()
        write_plain_file(sink, schema, batches)
        return content_digest(header, schema, stored_messages(sink.getvalue()))
    return content_digest(header, schema, ((e.message.metadata, e.message.body) for e in encoded))


def _with_digest(header: RecordingHeader, schema: pa.Schema, digest: str
                 ) -> tuple[RecordingHeader, pa.Schema]:
    """The header with its checksum, and the schema carrying that header."""
    header = header.model_copy(update={"content_sha256": digest})
    return header, schema.with_metadata({HEADER_KEY: header.to_bytes()})


def _file_hashes(path: Path) -> tuple[str, bytes | None]:
    """The sha256 of a file written here and of each of its :data:`BLOCK_BYTES` blocks, in one
    pass over its memory-mapped bytes (from the page cache); the blocks' only for a file of
    ``_written.BLOCK_DIGESTS_FROM_BYTES`` or more (None for a smaller one: registration stores
    no block-hash object for it, and hashing its blocks cost as much as hashing it whole). A
    large file's whole digest is computed on a second thread meanwhile: hashlib frees the GIL,
    and the two digests are each as costly as the other."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return hashlib.sha256().hexdigest(), b""
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                if size < _written.BLOCK_DIGESTS_FROM_BYTES:  # read here: tests lower it
                    return hashlib.sha256(view).hexdigest(), None
                whole = hashlib.sha256()
                digests = bytearray()
                if size < _PARALLEL_HASH_BYTES:
                    for start in range(0, size, BLOCK_BYTES):
                        block = view[start:start + BLOCK_BYTES]
                        digests += hashlib.sha256(block).digest()
                        whole.update(block)
                        block.release()
                    return whole.hexdigest(), bytes(digests)
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rayform-hash") as pool:
                    hashed = pool.submit(whole.update, view)
                    for start in range(0, size, BLOCK_BYTES):
                        block = view[start:start + BLOCK_BYTES]
                        digests += hashlib.sha256(block).digest()
                        block.release()
                    hashed.result()
                return whole.hexdigest(), bytes(digests)
            finally:
                view.release()


def _file_digest(src: Path) -> str:
    st = src.stat()
    key = (str(src.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = _file_sha256(src)
        if len(_DIGESTS) >= 4096:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


def _link_or_copy(src: Path, dest: Path) -> None:
    """Hard-link an asset next to its recording (no copy of a large video); copy across devices.

    ``dest`` may be there already: a recording written again at the same path with the same
    asset (it is then ``src`` itself, nothing to do), or a leftover; it is replaced atomically.
    """
    with contextlib.suppress(FileNotFoundError):
        if os.path.samefile(src, dest):
            return
    tmp = dest.with_name(f"{dest.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def asset_dir_for(recording_path: Path) -> Path:
    """The folder next to a recording file that holds its assets, named by content hash.

    ``NAME.assets``; for a name so long that the suffix would pass the 255-byte limit of a file
    name, its first 40 characters and a digest of the whole name stand for it."""
    name = recording_path.name
    if len((name + ASSETS_SUFFIX).encode("utf-8", "surrogatepass")) > 255:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{name[:40]}~{digest}"
    return recording_path.with_name(name + ASSETS_SUFFIX)
