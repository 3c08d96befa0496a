"""Register PX4 ULog flight logs (``.ulg``) with pyulog: each topic instance an entity.

A log becomes the segment ``<file stem>``. Topic ``t`` becomes the entity ``/t`` (``/t_k`` for
multi-instance ``k ≥ 1``); each field ``f`` its component ``/t:ULog:f``, one list per message:
array fields (``gyro_rad[0]``, ``gyro_rad[1]`` …) one row of all their elements, the dtype as
logged; nested fields (``esc[0].esc_rpm``) become ``esc/0/esc_rpm``. Every row sits on the
duration timeline ``timestamp``: the message's own ``timestamp`` field (µs since boot) in ns.

Properties: the info messages (``ver_hw``, ``sys_name`` …) as ``info:<key>``; the parameters at
start as ``param:<NAME>``; ``start_timestamp_us``, ``last_timestamp_us``, the number and total
length of dropouts, the appended-data offsets (a log with data appended after a crash) and the
ULog file version. Parameters changed in flight are the entity ``/changed_parameters/<NAME>``
(``Scalars:scalars``), logged strings ``/logged_messages`` (``TextDocument:text`` +
``/logged_messages/level``), multi-part info messages (crash dumps) static ``TextDocument:text``
on ``/info_multiple/<key>``.

A log that pyulog flags as corrupt, or that ends inside a message (truncated), is refused with a
:class:`~rayform.errors.CorruptRecordingError`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform._optional import require
from rayform.errors import CorruptRecordingError, FormatError, RayformError
from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.ulog._reads import MARKER_KEY, MARKER_VALUE, WatchedFile, marked_file
from rayform.recording._columns import SCALARS, TEXT_DOCUMENT
from rayform.recording._writer import RecordingWriter

ULOG_MAGIC: Final = b"ULog\x01\x12\x35"
ULOG_SUFFIXES: Final = (".ulg", ".ulog")
TIMESTAMP: Final = "timestamp"
CHANGED_PARAMETERS: Final = "/changed_parameters"
LOGGED_MESSAGES: Final = "/logged_messages"
INFO_MULTIPLE: Final = "/info_multiple"
_ELEMENT: Final = re.compile(r"^(?P<base>.+)\[(?P<index>\d+)\]$")
_NESTED: Final = re.compile(r"\[(\d+)\]\.")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_\-./]")
_US_TO_NS: Final = 1000
FIELD_ARCHETYPE: Final = "ULog"


class ULogImporter(Importer):
    """Reads PX4 ULog files with ``pyulog`` (extra ``rayform[ulog]``); see the module docstring."""

    name = "ulog"

    def sniff(self, path: Path) -> bool:
        if not path.is_file():
            return False
        if path.suffix.lower() in ULOG_SUFFIXES:
            return True
        try:
            with path.open("rb") as fh:
                return fh.read(len(ULOG_MAGIC)) == ULOG_MAGIC
        except OSError:
            return False

    def convert(self, path: Path, staging: Path) -> list[Path]:
        core: Any = require("pyulog.core", extra="ulog", feature="Reading PX4 ULog files")
        log = _read(core, path)
        segment_id = segment_id_from_name(path.stem)
        out = staging / f"{segment_id}.rfr"
        with RecordingWriter(out, recording_id=segment_id, application_id="ulog") as rec:
            _set_properties(rec, log, path)
            used: set[str] = set()
            for data in log.data_list:
                _write_topic(rec, data, used, path)
            _write_changed_parameters(rec, log.changed_parameters)
            _write_logged_messages(rec, log.logged_messages)
            for key, parts in sorted(log.msg_info_multiple_dict.items()):
                text = "\n".join("".join(str(p) for p in series) for series in parts)
                rec.log_static(f"{INFO_MULTIPLE}/{_safe(key)}", components={TEXT_DOCUMENT: text})
        return [out]


def _read(core: Any, path: Path) -> Any:
    with path.open("rb") as raw:
        if raw.read(len(ULOG_MAGIC)) != ULOG_MAGIC:
            raise FormatError(f"{path}: not a ULog file (it does not start with the ULog magic "
                              "bytes); the file is damaged or of another format")
        log = _parse(core, marked_file(raw), path)
        if log.msg_info_dict.get(MARKER_KEY) != MARKER_VALUE:
            raw.seek(0)
            watched = WatchedFile(raw)
            _parse(core, watched, path)
            if watched.cut is not None:
                at, wanted, got = watched.cut
                raise CorruptRecordingError(
                    f"{path}: truncated: the message at byte {at} needs {wanted} bytes but the "
                    f"file ends after {got}; the file was cut while it was written or copied")
            if not log.file_corruption:
                raise CorruptRecordingError(
                    f"{path}: truncated: its last message does not end where the file ends; "
                    "the file was cut while it was written or copied")
        log.msg_info_dict.pop(MARKER_KEY, None)
    if log.file_corruption:
        raise CorruptRecordingError(
            f"{path}: damaged or truncated: pyulog found corrupt messages (bad message types or "
            "sizes, or a definition cut short) while reading it")
    if not log.data_list:
        raise CorruptRecordingError(f"{path}: the log holds no data messages")
    return log


def _parse(core: Any, file: Any, path: Path) -> Any:
    """pyulog's parse of ``file``, its exceptions turned into ours."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # pyulog prints what it notices
            return core.ULog(file, disable_str_exceptions=False)
    except RayformError:
        raise
    except Exception as err:  # ULogException, struct.error, UnicodeDecodeError, IndexError …
        raise CorruptRecordingError(
            f"{path}: not a readable ULog file (truncated or damaged): "
            f"{type(err).__name__}: {err}") from err


def _set_properties(rec: RecordingWriter, log: Any, path: Path) -> None:
    rec.set_properties(source_file=path.name, start_timestamp_us=int(log.start_timestamp),
                       last_timestamp_us=int(log.last_timestamp),
                       dropouts=len(log.dropouts),
                       dropout_ms=int(sum(int(d.duration) for d in log.dropouts)),
                       appended_offsets=json.dumps([int(o) for o in log._appended_offsets]),
                       ulog_file_version=int(getattr(log, "_file_version", 0)))
    for key, value in sorted(log.msg_info_dict.items()):
        prop = _property(value)
        if prop is not None:
            rec.set_property(f"info:{key}", prop)
    for name, value in sorted(log.initial_parameters.items()):
        prop = _property(value)
        if prop is not None:
            rec.set_property(f"param:{name}", prop)


def _property(value: Any) -> str | int | float | bool | None:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()  # type: ignore[no-any-return]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None


def entity_base(name: str, multi_id: int) -> str:
    """``/sensor_combined`` for instance 0, ``/actuator_outputs_1`` for instance 1."""
    topic = _safe(name)
    return f"/{topic}" if multi_id == 0 else f"/{topic}_{multi_id}"


def field_component(field: str) -> str:
    """The component of a (grouped) field: ``"gyro_rad"`` -> ``"ULog:gyro_rad"``."""
    return f"{FIELD_ARCHETYPE}:{field}"


def field_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """Field names grouped into components: ``gyro_rad[0..2]`` → ``gyro_rad``, in element
    order; padding fields (nested ones too: ``heartbeats[0]._padding0``) and ``timestamp``
    left out."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        if name == TIMESTAMP or name.rsplit(".", 1)[-1].startswith("_padding"):
            continue
        match = _ELEMENT.match(name)
        base, index = (match["base"], int(match["index"])) if match else (name, -1)
        groups.setdefault(_safe(_NESTED.sub(r"/\1/", base)), []).append((index, name))
    return {key: [n for _, n in sorted(items)] for key, items in groups.items()}


def _write_topic(rec: RecordingWriter, data: Any, used: set[str], path: Path) -> None:
    base = entity_base(str(data.name), int(data.multi_id))
    columns: dict[str, npt.NDArray[Any]] = data.data
    stamps = columns.get(TIMESTAMP)
    if stamps is None:
        raise CorruptRecordingError(f"{path}: topic {data.name!r} has no timestamp field")
    timelines = {TIMESTAMP: (stamps.astype(np.int64) * _US_TO_NS).astype("timedelta64[ns]")}
    if base in used:
        raise CorruptRecordingError(f"{path}: topic {data.name!r} instance {data.multi_id} "
                                    "appears twice")
    used.add(base)
    components: dict[str, npt.NDArray[Any]] = {}
    for suffix, names in field_groups(columns).items():
        arrays = [columns[n] for n in names]
        if len({a.dtype for a in arrays}) != 1:
            raise CorruptRecordingError(f"{path}: topic {data.name!r} array field {suffix!r} "
                                        "mixes element types")
        components[field_component(suffix)] = arrays[0] if len(arrays) == 1 and \
            not _ELEMENT.match(names[0]) else np.stack(arrays, axis=1)
    if components:
        rec.log_columns(base, timelines=timelines, components=components)


def _write_changed_parameters(rec: RecordingWriter, changed: list[tuple[int, str, Any]]) -> None:
    by_name: dict[str, list[tuple[int, Any]]] = {}
    for stamp, name, value in changed:
        by_name.setdefault(str(name), []).append((int(stamp), value))
    for name, rows in sorted(by_name.items()):
        values = np.asarray([v for _, v in rows])
        if values.dtype.kind not in "biuf":
            continue
        stamps = np.asarray([s for s, _ in rows], dtype=np.int64) * _US_TO_NS
        rec.log_columns(f"{CHANGED_PARAMETERS}/{_safe(name)}",
                        timelines={TIMESTAMP: stamps.astype("timedelta64[ns]")},
                        components={SCALARS: values})


def _write_logged_messages(rec: RecordingWriter, messages: list[Any]) -> None:
    if not messages:
        return
    stamps = np.asarray([int(m.timestamp) for m in messages], dtype=np.int64) * _US_TO_NS
    timelines = {TIMESTAMP: stamps.astype("timedelta64[ns]")}
    offsets = pa.array(np.arange(len(messages) + 1, dtype=np.int32))
    rec.log_columns(LOGGED_MESSAGES, timelines=timelines, components={
        TEXT_DOCUMENT: pa.ListArray.from_arrays(offsets, pa.array([str(m.message)
                                                                   for m in messages]))})
    rec.log_columns(f"{LOGGED_MESSAGES}/level", timelines=timelines, components={
        SCALARS: np.asarray([int(m.log_level) for m in messages], dtype=np.uint8)})


def _safe(name: str) -> str:
    text = _UNSAFE.sub("_", name).strip("/") or "_"
    return "/".join("_" if p in ("", ".", "..") else p for p in text.split("/"))
