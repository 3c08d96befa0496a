"""Register ROS 2 MCAP recordings (single files or rosbag2 folders): each topic an entity."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rayform._optional import require
from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError, RayformError
from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.mcap._ros2_messages import Mapped, UnmappableError, mapping_for
from rayform.importers.mcap._rosbag2 import (
    McapSource,
    is_mcap_file,
    is_rosbag2_folder,
    resolve_source,
)
from rayform.recording._columns import FRAME_CONVENTION_PROPERTY
from rayform.recording._writer import RecordingWriter, TimelineLike

LOG_TIME = "log_time"
PUBLISH_TIME = "publish_time"
HEADER_TIME = "header_time"
RAW_DATA = "McapMessage:data"
SCHEMA_NAME = "McapSchema:name"
SCHEMA_ENCODING = "McapSchema:encoding"
SCHEMA_DATA = "McapSchema:data"
MESSAGE_ENCODING = "McapChannel:message_encoding"
_UNSAFE_ENTITY = re.compile(r"[^A-Za-z0-9_\-./~{}+]")

Decoder = Callable[[bytes], Any]


@dataclass
class _Channel:
    """The messages of one channel, still encoded."""

    topic: str
    schema_name: str
    schema_encoding: str
    schema_data: bytes
    message_encoding: str
    schema_id: int
    log_ns: list[int] = field(default_factory=list)
    publish_ns: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)


class McapImporter(Importer):
    """Reads ROS 2 MCAP files and rosbag2 MCAP folders (extra ``rayform[mcap]``).

    A file (or a bag folder, all its split files together) becomes one segment named after the
    file stem (or folder name). Each topic becomes the entity of the same path, on the
    timestamp timelines ``log_time`` and ``publish_time`` and, for messages with a header,
    ``header_time`` (the header stamp; simulation time where the robot used it). Common types
    get typed columns (see :mod:`rayform.importers.mcap._ros2_messages`); any other type is kept
    as raw CDR bytes in ``<topic>:McapMessage:data`` with its schema as static components, with a
    :class:`~rayform.errors.ConversionWarning`. A channel whose schema cannot be parsed is
    skipped with a warning naming it.
    """

    name = "mcap"

    def sniff(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix.lower() == ".mcap" or is_mcap_file(path)
        return is_rosbag2_folder(path)

    def convert(self, path: Path, staging: Path) -> list[Path]:
        reader_mod: Any = require("mcap.reader", extra="mcap", feature="Reading MCAP files")
        ros2: Any = require("mcap_ros2.decoder", extra="mcap", feature="Decoding ROS 2 messages")
        source = resolve_source(path)
        channels: dict[int, _Channel] = {}
        properties: dict[str, str | int] = dict(source.properties)
        for number, file in enumerate(source.files):
            _read_file(reader_mod, file, channels, properties, offset=number << 32)
        if properties.get("mcap_profile") == "ros2" \
                or any(c.schema_encoding == "ros2msg" for c in channels.values()):
            # ROS poses are in the ROS convention by definition (REP 103: x forward, y left, z up).
            properties.setdefault(FRAME_CONVENTION_PROPERTY, "ros")
        segment_id = segment_id_from_name(source.name)
        out = staging / f"{segment_id}.rfr"
        decoders = ros2.DecoderFactory()
        with RecordingWriter(out, recording_id=segment_id, application_id="mcap") as rec:
            for name, value in properties.items():
                rec.set_property(name, value)
            used: dict[str, str] = {}
            for channel in sorted(channels.values(), key=lambda c: c.topic):
                if not channel.payloads:
                    continue
                entity = _entity_for(channel, used, path)
                _write_channel(rec, entity, channel, decoders, source)
        return [out]


def _read_file(reader_mod: Any, file: Path, channels: dict[int, _Channel],
               properties: dict[str, str | int], *, offset: int) -> None:
    if not is_mcap_file(file):
        raise CorruptRecordingError(f"{file}: not an MCAP file (missing the MCAP magic bytes)")
    try:
        with file.open("rb") as fh:
            reader = reader_mod.make_reader(fh)
            header = reader.get_header()
            _check_compressions(reader_mod, reader, fh, file)
            properties.setdefault("mcap_profile", str(header.profile))
            properties.setdefault("mcap_library", str(header.library))
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                key = offset + int(channel.id)
                data = channels.get(key)
                if data is None:
                    data = channels[key] = _Channel(
                        topic=str(channel.topic),
                        schema_name=str(schema.name) if schema is not None else "",
                        schema_encoding=str(schema.encoding) if schema is not None else "",
                        schema_data=bytes(schema.data) if schema is not None else b"",
                        message_encoding=str(channel.message_encoding),
                        schema_id=int(schema.id) if schema is not None else 0)
                data.log_ns.append(int(message.log_time))
                data.publish_ns.append(int(message.publish_time))
                data.payloads.append(bytes(message.data))
            for record in reader.iter_metadata():
                if record.name == "rosbag2":
                    continue
                for key, value in record.metadata.items():
                    properties[f"{record.name}:{key}"] = str(value)
    except RayformError:
        raise
    except Exception as err:  # mcap raises McapError, struct.error, EOFError, zstd/lz4 errors …
        raise CorruptRecordingError(
            f"{file}: not a readable MCAP file (truncated or damaged): "
            f"{type(err).__name__}: {err}") from err


_COMPRESSIONS = frozenset({"", "zstd", "lz4"})


def _check_compressions(reader_mod: Any, reader: Any, fh: Any, file: Path) -> None:
    """Refuse chunks compressed with a method the mcap library does not know: it would read
    their compressed bytes as records and drop every message without a word.

    The summary's chunk indexes say it cheaply; a file without a summary is scanned once,
    chunks left compressed."""
    summary = reader.get_summary()
    if summary is not None and summary.chunk_indexes:
        methods = {str(c.compression) for c in summary.chunk_indexes}
    else:
        stream_mod = require("mcap.stream_reader", extra="mcap", feature="Reading MCAP")
        fh.seek(0)
        methods = {str(r.compression) for r in stream_mod.StreamReader(fh, emit_chunks=True)
                   .records if type(r).__name__ == "Chunk"}
        fh.seek(0)
    unknown = sorted(methods - _COMPRESSIONS)
    if unknown:
        raise FormatError(f"{file}: MCAP chunks compressed with {unknown[0][:40]!r}, which "
                          f"rayform cannot read (known: zstd, lz4, none); recompress the file "
                          "with `mcap recover` or `mcap compress`")


def entity_for_topic(topic: str) -> str:
    """The entity path of a topic: ``"/odom"`` stays; unsafe characters become ``_``."""
    parts = [_UNSAFE_ENTITY.sub("_", p) for p in topic.split("/") if p]
    parts = ["_" if p in (".", "..") else p for p in parts]
    return "/" + "/".join(parts) if parts else "/_"


def _entity_for(channel: _Channel, used: dict[str, str], source: object) -> str:
    entity = entity_for_topic(channel.topic)
    known = used.get(entity)
    if known is not None and known != channel.schema_name:
        renamed = f"{entity}/{entity_for_topic(channel.schema_name).strip('/').replace('/', '_')}"
        warnings.warn(f"{source}: topic {channel.topic!r} appears with types {known!r} and "
                      f"{channel.schema_name!r}; the {channel.schema_name!r} messages are stored "
                      f"under entity {renamed!r}", ConversionWarning, stacklevel=2)
        entity = renamed
    used[entity] = channel.schema_name
    return entity


def _decoder_for(channel: _Channel, decoders: Any) -> Decoder | None:
    """The channel's CDR decoder; ``None`` (after a warning) when its schema cannot be parsed."""
    from mcap.records import Schema

    if channel.message_encoding != "cdr" or channel.schema_encoding != "ros2msg":
        return None
    schema = Schema(id=channel.schema_id, name=channel.schema_name,
                    encoding=channel.schema_encoding, data=channel.schema_data)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            decoder: Decoder | None = decoders.decoder_for(channel.message_encoding, schema)
    except Exception as err:  # the ROS IDL parser raises many types
        raise _SchemaError(str(err) or type(err).__name__) from err
    return decoder


class _SchemaError(Exception):
    pass


def _write_channel(rec: RecordingWriter, entity: str, channel: _Channel, decoders: Any,
                   source: McapSource) -> None:
    log_ns = np.asarray(channel.log_ns, dtype=np.int64)
    timelines: dict[str, TimelineLike] = {
        LOG_TIME: log_ns.astype("datetime64[ns]"),
        PUBLISH_TIME: np.asarray(channel.publish_ns, dtype=np.int64).astype("datetime64[ns]"),
    }
    label = f"channel {channel.topic!r} ({channel.schema_name or 'no schema'})"
    try:
        decoder = _decoder_for(channel, decoders)
    except _SchemaError as err:
        warnings.warn(f"{source.name}: {label}: its schema cannot be parsed ({err}); the channel "
                      f"is skipped ({len(channel.payloads)} messages)", ConversionWarning,
                      stacklevel=5)
        return
    mapping = mapping_for(channel.schema_name)
    mapped: Mapped | None = None
    reason = "has no typed mapping"
    if decoder is None:
        reason = (f"is encoded as {channel.message_encoding!r} with a "
                  f"{channel.schema_encoding or 'missing'!r} schema, not ROS 2 CDR")
    elif mapping is not None:
        messages = _decode_all(decoder, channel, source)
        try:
            mapped = mapping(messages)
        except UnmappableError as err:
            reason = f"cannot take the typed mapping ({err})"
    if mapped is None:
        warnings.warn(f"{source.name}: {label} {reason}; kept as raw bytes in "
                      f"'{entity}:{RAW_DATA}' with its schema", ConversionWarning, stacklevel=5)
        _write_raw(rec, entity, channel, timelines)
        return
    if mapped.header_ns is not None:
        header = np.where(mapped.header_ns >= 0, mapped.header_ns, log_ns)
        timelines[HEADER_TIME] = header.astype("datetime64[ns]")
    rec.log_columns(entity, timelines=timelines, components=mapped.components)
    rec.log_static(entity, components={**mapped.static, SCHEMA_NAME: channel.schema_name})
    for suffix, (components, static) in mapped.children.items():
        rec.log_columns(entity + suffix, timelines=timelines, components=components)
        if static:
            rec.log_static(entity + suffix, components=static)


def _decode_all(decoder: Decoder, channel: _Channel, source: McapSource) -> list[Any]:
    messages = []
    for i, payload in enumerate(channel.payloads):
        try:
            messages.append(decoder(payload))
        except Exception as err:  # the CDR reader raises struct.error, IndexError, ValueError …
            raise CorruptRecordingError(
                f"{source.name}: channel {channel.topic!r}: message {i} (log_time "
                f"{channel.log_ns[i]}) cannot be decoded as {channel.schema_name}: "
                f"{type(err).__name__}: {err}") from err
    return messages


def _write_raw(rec: RecordingWriter, entity: str, channel: _Channel,
               timelines: dict[str, TimelineLike]) -> None:
    rec.log_columns(entity, timelines=timelines, components={
        RAW_DATA: pa.ListArray.from_arrays(
            pa.array(np.arange(len(channel.payloads) + 1, dtype=np.int32)),
            pa.array(channel.payloads, pa.binary()))})
    try:
        schema_text: str | bytes = channel.schema_data.decode("utf-8")
    except UnicodeDecodeError:
        schema_text = channel.schema_data
    rec.log_static(entity, components={
        SCHEMA_NAME: channel.schema_name,
        SCHEMA_ENCODING: channel.schema_encoding,
        SCHEMA_DATA: schema_text,
        MESSAGE_ENCODING: channel.message_encoding,
    })

