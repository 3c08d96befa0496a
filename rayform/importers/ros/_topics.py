"""One ROS topic's messages written as an entity: typed columns, or raw bytes with their schema.

Shared by the MCAP and the rosbag importers, so the same messages register as the same columns
whichever container held them: each topic becomes the entity of the same path, on the timestamp
timelines ``log_time`` and ``publish_time`` (the log time where the container has no publish time)
and, for messages with a header, ``header_time``. Types with a typed mapping
(:mod:`rayform.importers.ros._messages`) get typed columns; any other type is kept as raw CDR bytes
in ``<topic>:McapMessage:data`` with its schema as static components, with a
:class:`~rayform.errors.ConversionWarning`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa

from rayform.errors import ConversionWarning, CorruptRecordingError
from rayform.importers.ros._messages import Mapped, UnmappableError, mapping_for
from rayform.recording._writer import RecordingWriter, TimelineLike

LOG_TIME: Final = "log_time"
PUBLISH_TIME: Final = "publish_time"
HEADER_TIME: Final = "header_time"
RAW_DATA: Final = "McapMessage:data"
SCHEMA_NAME: Final = "McapSchema:name"
SCHEMA_ENCODING: Final = "McapSchema:encoding"
SCHEMA_DATA: Final = "McapSchema:data"
MESSAGE_ENCODING: Final = "McapChannel:message_encoding"
_UNSAFE_ENTITY = re.compile(r"[^A-Za-z0-9_\-./~{}+]")

Decoder = Callable[[bytes], Any]


@dataclass
class Topic:
    """The messages of one topic (an MCAP channel, a bag connection), still encoded."""

    topic: str
    schema_name: str
    schema_encoding: str
    schema_data: bytes
    message_encoding: str
    log_ns: list[int] = field(default_factory=list)
    publish_ns: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"topic {self.topic!r} ({self.schema_name or 'no schema'})"


def entity_for_topic(topic: str) -> str:
    """The entity path of a topic: ``"/odom"`` stays; unsafe characters become ``_``."""
    parts = [_UNSAFE_ENTITY.sub("_", p) for p in topic.split("/") if p]
    parts = ["_" if p in (".", "..") else p for p in parts]
    return "/" + "/".join(parts) if parts else "/_"


def assign_entity(topic: Topic, used: dict[str, str], *, source: object = None) -> str:
    """The topic's entity; a second type on the same path gets a child named after its type,
    with a :class:`ConversionWarning` naming ``source`` (the file or bag)."""
    entity = entity_for_topic(topic.topic)
    known = used.get(entity)
    if known is not None and known != topic.schema_name:
        renamed = f"{entity}/{entity_for_topic(topic.schema_name).strip('/').replace('/', '_')}"
        warnings.warn(f"{source}: topic {topic.topic!r} appears with types {known!r} and "
                      f"{topic.schema_name!r}; the {topic.schema_name!r} messages are stored "
                      f"under entity {renamed!r}", ConversionWarning, stacklevel=2)
        entity = renamed
    used[entity] = topic.schema_name
    return entity


def write_topic(rec: RecordingWriter, entity: str, topic: Topic, decoder: Decoder | None, *,
                source_name: str, raw_reason: str = "") -> None:
    """Write ``topic`` as ``entity``: typed columns when it has a mapping, else raw bytes.

    Args:
        rec: the recording being written.
        entity: the entity path (from :func:`assign_entity`).
        topic: its messages.
        decoder: turns one payload into a message object; ``None`` keeps the topic raw.
        source_name: the file or bag named in errors and warnings.
        raw_reason: why there is no decoder (for the warning), when ``decoder`` is ``None``.

    Raises:
        CorruptRecordingError: a message of a mapped type cannot be decoded, or its fields
            contradict each other.
    """
    log_ns = np.asarray(topic.log_ns, dtype=np.int64)
    timelines: dict[str, TimelineLike] = {
        LOG_TIME: log_ns.astype("datetime64[ns]"),
        PUBLISH_TIME: np.asarray(topic.publish_ns, dtype=np.int64).astype("datetime64[ns]"),
    }
    mapping = mapping_for(topic.schema_name)
    mapped: Mapped | None = None
    reason = raw_reason or "has no typed mapping"
    if decoder is not None and mapping is not None:
        messages = decode_all(decoder, topic, source_name=source_name)
        try:
            mapped = mapping(messages)
        except UnmappableError as err:
            reason = f"cannot take the typed mapping ({err})"
        except Exception as err:  # fields that contradict each other (an image shorter than
            # height x step, …): damaged or hand-made messages, not a bug to show as a traceback
            raise CorruptRecordingError(
                f"{source_name}: {topic.label}: messages inconsistent with their type: "
                f"{type(err).__name__}: {err}") from err
    if mapped is None:
        warnings.warn(f"{source_name}: {topic.label} {reason}; kept as raw bytes in "
                      f"'{entity}:{RAW_DATA}' with its schema", ConversionWarning, stacklevel=4)
        _write_raw(rec, entity, topic, timelines)
        return
    if mapped.header_ns is not None:
        header = np.where(mapped.header_ns >= 0, mapped.header_ns, log_ns)
        timelines[HEADER_TIME] = header.astype("datetime64[ns]")
    rec.log_columns(entity, timelines=timelines, components=mapped.components)
    rec.log_static(entity, components={**mapped.static, SCHEMA_NAME: topic.schema_name})
    for suffix, (components, static) in mapped.children.items():
        rec.log_columns(entity + suffix, timelines=timelines, components=components)
        if static:
            rec.log_static(entity + suffix, components=static)


def decode_all(decoder: Decoder, topic: Topic, *, source_name: str) -> list[Any]:
    """Every message of ``topic`` decoded.

    Raises:
        CorruptRecordingError: a message cannot be decoded, naming the source, topic and message.
    """
    messages = []
    for i, payload in enumerate(topic.payloads):
        try:
            messages.append(decoder(payload))
        except Exception as err:  # the CDR readers raise struct.error, IndexError, ValueError …
            raise CorruptRecordingError(
                f"{source_name}: {topic.label}: message {i} (log_time {topic.log_ns[i]}) cannot "
                f"be decoded as {topic.schema_name}: {type(err).__name__}: {err}") from err
    return messages


def _write_raw(rec: RecordingWriter, entity: str, topic: Topic,
               timelines: dict[str, TimelineLike]) -> None:
    rec.log_columns(entity, timelines=timelines, components={
        RAW_DATA: pa.ListArray.from_arrays(
            pa.array(np.arange(len(topic.payloads) + 1, dtype=np.int32)),
            pa.array(topic.payloads, pa.binary()))})
    try:
        schema_text: str | bytes = topic.schema_data.decode("utf-8")
    except UnicodeDecodeError:
        schema_text = topic.schema_data
    rec.log_static(entity, components={
        SCHEMA_NAME: topic.schema_name,
        SCHEMA_ENCODING: topic.schema_encoding,
        SCHEMA_DATA: schema_text,
        MESSAGE_ENCODING: topic.message_encoding,
    })
