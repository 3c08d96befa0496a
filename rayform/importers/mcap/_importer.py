"""Register ROS 2 MCAP recordings (single files or rosbag2 folders): each topic an entity."""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayform._optional import require
from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError, RayformError
from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers._time_grid import GRID_SOURCE, TIME_GRID_PROPERTY
from rayform.importers.mcap._rosbag2 import McapSource, is_mcap_file, resolve_source
from rayform.importers.ros._bag_folder import folder_storage, is_rosbag2_folder
from rayform.importers.ros._topics import Decoder, Topic, assign_entity, write_topic
from rayform.recording._columns import FRAME_CONVENTION_PROPERTY
from rayform.recording._writer import RecordingWriter


@dataclass
class _Channel(Topic):
    """The messages of one MCAP channel, still encoded, and the id of its schema record."""

    schema_id: int = 0


class McapImporter(Importer):
    """Reads ROS 2 MCAP files and rosbag2 MCAP folders (extra ``rayform[mcap]``).

    A file (or a bag folder, all its split files together) becomes one segment named after the
    file stem (or folder name). Each topic becomes the entity of the same path, on the
    timestamp timelines ``log_time`` and ``publish_time`` and, for messages with a header,
    ``header_time`` (the header stamp; simulation time where the robot used it). Common types
    get typed columns (see :mod:`rayform.importers.ros._messages`); any other type is kept
    as raw CDR bytes in ``<topic>:McapMessage:data`` with its schema as static components, with a
    :class:`~rayform.errors.ConversionWarning` (:mod:`rayform.importers.ros._topics`, shared with
    the rosbag importer). A channel whose schema cannot be parsed is skipped with a warning
    naming it.
    """

    name = "mcap"

    def sniff(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix.lower() == ".mcap" or is_mcap_file(path)
        # sqlite3 bag folders are the rosbag importer's; unreadable metadata is reported here.
        return is_rosbag2_folder(path) and folder_storage(path) != "sqlite3"

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
        properties.setdefault(TIME_GRID_PROPERTY, GRID_SOURCE)  # log and header times as stamped
        with RecordingWriter(out, recording_id=segment_id, application_id="mcap") as rec:
            for name, value in properties.items():
                rec.set_property(name, value)
            used: dict[str, str] = {}
            for channel in sorted(channels.values(), key=lambda c: c.topic):
                if not channel.payloads:
                    continue
                entity = assign_entity(channel, used, source=path)
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
    try:
        decoder = _decoder_for(channel, decoders)
    except _SchemaError as err:
        warnings.warn(f"{source.name}: {channel.label}: its schema cannot be parsed ({err}); the "
                      f"channel is skipped ({len(channel.payloads)} messages)", ConversionWarning,
                      stacklevel=4)
        return
    reason = "" if decoder is not None else (
        f"is encoded as {channel.message_encoding!r} with a "
        f"{channel.schema_encoding or 'missing'!r} schema, not ROS 2 CDR")
    write_topic(rec, entity, channel, decoder, source_name=source.name, raw_reason=reason)
