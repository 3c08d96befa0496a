"""Register ROS 1 ``.bag`` files and ROS 2 sqlite3 bags (``.db3`` files, split bag folders).

Read with the pure-Python ``rosbags`` package; written through the topic writer the MCAP importer
uses (:mod:`rayform.importers.ros._topics`), so the same messages in a ``.bag``, a ``.db3`` and an
MCAP file register as the same columns on the same timelines.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rayform._optional import require
from rayform.errors import CorruptRecordingError, FormatError, RayformError
from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.ros._bag_folder import (
    bag_folder,
    folder_storage,
    is_rosbag2_folder,
    read_bag_folder_info,
)
from rayform.importers.ros._topics import Decoder, Topic, assign_entity, write_topic
from rayform.recording._columns import FRAME_CONVENTION_PROPERTY
from rayform.recording._writer import RecordingWriter

ROS1_MAGIC: Final = b"#ROSBAG V2.0\n"
SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_EXTRA: Final = "rosbag"


@dataclass(frozen=True, slots=True, kw_only=True)
class _BagSource:
    """What rosbags opens for one segment: one ``.bag``/``.db3`` file or one bag folder."""

    name: str
    path: Path
    is_ros1: bool
    properties: dict[str, str | int]
    ros_distro: str | None


class RosbagImporter(Importer):
    """Reads ROS 1 bags and ROS 2 sqlite3 bags (extra ``rayform[rosbag]``).

    A ``.bag`` file, a ``.db3`` file or a rosbag2 folder of sqlite3 storage (all its split files
    together) becomes one segment named after the file stem or folder name, with the columns the
    MCAP importer gives the same messages (``publish_time`` is the log time: bags keep one time
    per message). Messages without a typed mapping are kept raw with their definition: CDR and
    ``ros2msg`` for ROS 2, ``ros1`` and ``ros1msg`` (MCAP's ROS 1 profile) for ROS 1. A bag whose
    messages cannot be decoded (a type whose definition is neither in the bag nor in the
    ``rosbags`` typestore of its distribution), or that yields fewer messages than its index
    counts, is refused naming it: never registered partial or empty.
    """

    name = "rosbag"

    def sniff(self, path: Path) -> bool:
        if path.is_file():
            suffix = path.suffix.lower()
            return suffix in (".bag", ".db3") or _starts_with(path, ROS1_MAGIC)
        return is_rosbag2_folder(path) and folder_storage(path) == "sqlite3"

    def convert(self, path: Path, staging: Path) -> list[Path]:
        highlevel: Any = require("rosbags.highlevel", extra=_EXTRA, feature="Reading ROS bags")
        typesys: Any = require("rosbags.typesys", extra=_EXTRA, feature="Reading ROS bags")
        source = _resolve(path)
        store = _default_store(typesys, source.ros_distro)
        topics: dict[tuple[str, str], Topic] = {}
        with _reading(source):
            reader = highlevel.AnyReader(
                [source.path], default_typestore=None if source.is_ros1
                else typesys.get_typestore(store))
            with reader:
                typestore = reader.typestore
                _check_types(source, reader.connections, typestore, store)
                declared = {(c.topic, c.msgtype): 0 for c in reader.connections}
                for connection in reader.connections:
                    declared[(connection.topic, connection.msgtype)] += int(connection.msgcount)
                counts = _collect(source, reader, typestore, topics)
        _check_counts(source, declared, counts)
        segment_id = segment_id_from_name(source.name)
        out = staging / f"{segment_id}.rfr"
        with RecordingWriter(out, recording_id=segment_id, application_id="rosbag") as rec:
            for name, value in source.properties.items():
                rec.set_property(name, value)
            rec.set_property(FRAME_CONVENTION_PROPERTY, "ros")  # REP 103
            used: dict[str, str] = {}
            for topic in sorted(topics.values(), key=lambda t: (t.topic, t.schema_name)):
                entity = assign_entity(topic, used, source=source.path)
                write_topic(rec, entity, topic, _decoder(typestore, topic),
                            source_name=str(source.path))
        return [out]


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(magic)) == magic
    except OSError:
        return False


def _resolve(path: Path) -> _BagSource:
    if path.is_dir():
        info, storage = read_bag_folder_info(path, extra=_EXTRA)
        folder = bag_folder(path, info, storage)
        for file in folder.files:
            _check_magic(file, SQLITE_MAGIC, "a ROS 2 sqlite3 bag file")
        distro = info.get("ros_distro")
        return _BagSource(name=path.name, path=path, is_ros1=False,
                          properties={**folder.properties(), "rosbag_format": 2},
                          ros_distro=distro if isinstance(distro, str) else None)
    is_ros1 = _starts_with(path, ROS1_MAGIC)
    if not is_ros1:
        _check_magic(path, SQLITE_MAGIC, "a ROS 1 bag (#ROSBAG V2.0) or a ROS 2 sqlite3 bag file")
    if is_ros1 and path.suffix != ".bag":
        raise FormatError(f"{path}: a ROS 1 bag must be named '*.bag' for rosbags to read it; "
                          "rename it")
    if not is_ros1 and path.suffix != ".db3":
        raise FormatError(f"{path}: a ROS 2 sqlite3 bag file must be named '*.db3'; rename it")
    return _BagSource(name=path.stem, path=path, is_ros1=is_ros1,
                      properties={"source_file": path.name, "rosbag_format": 1 if is_ros1 else 2},
                      ros_distro=None)


def _check_magic(path: Path, magic: bytes, what: str) -> None:
    if not _starts_with(path, magic):
        raise CorruptRecordingError(f"{path}: not {what} (its first bytes are not {magic!r}; "
                                    "truncated or another format)")


def _default_store(typesys: Any, distro: str | None) -> Any:
    """The typestore for bags without embedded definitions: the bag's distribution's, if known."""
    stores = typesys.Stores
    if distro:
        for store in stores:
            if store.value == f"ros2_{distro.lower()}":
                return store
    return stores.LATEST


@contextmanager
def _reading(source: _BagSource) -> Iterator[None]:
    """Every failure of rosbags (and the codecs under it) as a FormatError naming the bag."""
    try:
        yield
    except RayformError:
        raise
    except Exception as err:  # rosbags raises ReaderError, AnyReaderError, struct, sqlite3, bz2 …
        raise CorruptRecordingError(
            f"{source.path}: not a readable ROS bag (truncated or damaged): "
            f"{type(err).__name__}: {err}") from err


def _check_types(source: _BagSource, connections: Any, typestore: Any, store: Any) -> None:
    unknown = sorted({(c.topic, c.msgtype) for c in connections
                      if c.msgtype not in typestore.fielddefs})
    if unknown:
        topic, msgtype = unknown[0]
        raise FormatError(
            f"{source.path}: topic {topic!r} holds {msgtype!r} messages whose definition is "
            f"neither embedded in the bag nor known to rosbags' {store.value!r} typestore "
            f"({len(unknown)} such topic(s)); the bag cannot be decoded, so it is not registered. "
            "Re-record it with a rosbag2 that stores message definitions, or convert it to MCAP "
            "with 'ros2 bag convert' on a machine that has the message packages")


def _collect(source: _BagSource, reader: Any, typestore: Any,
             topics: dict[tuple[str, str], Topic]) -> dict[tuple[str, str], int]:
    """Read every message into ``topics``; the number read per (topic, type)."""
    counts: dict[tuple[str, str], int] = {}
    for connection, timestamp, raw in reader.messages():
        key = (connection.topic, connection.msgtype)
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = _topic(source, connection, typestore)
        topic.log_ns.append(int(timestamp))
        topic.publish_ns.append(int(timestamp))  # bags keep one time per message
        topic.payloads.append(bytes(raw))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _topic(source: _BagSource, connection: Any, typestore: Any) -> Topic:
    """An empty topic for a connection, with its encoding and schema as MCAP names them.

    ROS 2 messages are CDR with the bag's own definition (or the one rosbags generates from its
    typestore); ROS 1 messages are ``ros1`` with their ``ros1msg`` definition (MCAP's ROS 1
    profile), so a type without a typed mapping is kept as the bytes the bag holds.
    """
    msgtype = str(connection.msgtype)
    msgdef = connection.msgdef
    if source.is_ros1:
        return Topic(topic=str(connection.topic), schema_name=msgtype, schema_encoding="ros1msg",
                     schema_data=str(msgdef.data).encode(), message_encoding="ros1")
    if not source.is_ros1 and msgdef.data:
        encoding, text = ("ros2idl" if msgdef.format.name == "IDL" else "ros2msg"), msgdef.data
    else:
        encoding, text = "ros2msg", typestore.generate_msgdef(msgtype, ros_version=2)[0]
    return Topic(topic=str(connection.topic), schema_name=msgtype, schema_encoding=encoding,
                 schema_data=str(text).encode(), message_encoding="cdr")


def _check_counts(source: _BagSource, declared: dict[tuple[str, str], int],
                  counts: dict[tuple[str, str], int]) -> None:
    total = sum(counts.values())
    short = [(key, n, counts.get(key, 0)) for key, n in sorted(declared.items())
             if counts.get(key, 0) < n]
    if short:
        (topic, msgtype), n, got = short[0]
        raise CorruptRecordingError(
            f"{source.path}: the bag's index counts {n} {msgtype!r} messages on topic {topic!r} "
            f"but rosbags reads {got} ({len(short)} topic(s) short); the bag is not registered "
            "partial: check it with 'ros2 bag info' / 'rosbag check', or reindex it")
    if total == 0:
        raise FormatError(f"{source.path}: the bag holds no messages; nothing to register")


def _decoder(typestore: Any, topic: Topic) -> Decoder:
    msgtype = topic.schema_name
    deserialize = typestore.deserialize_ros1 if topic.message_encoding == "ros1" \
        else typestore.deserialize_cdr

    def decode(payload: bytes) -> Any:
        return deserialize(payload, msgtype)
    return decode
