"""Recording properties: Rerun's ``/__properties`` chunks <-> rayform segment properties.

Rerun shows a property logged on ``/__properties/<name>`` with component ``<comp>`` as the
segment-table column ``property:<name>:<comp>`` and built-ins on ``/__properties`` itself
(``RecordingInfo:name``) as ``property:RecordingInfo:name``. Rayform stores a property under the
name that follows ``property:``, so the segment tables of both show the same columns.
A single value becomes a scalar property; several values or nested ones become JSON text.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pyarrow as pa

from rayform.recording._columns import PROPERTIES_ENTITY
from rayform.recording._file import PropertyValue

RECORDING_INFO: Final = "RecordingInfo"


def is_properties_entity(entity_path: str) -> bool:
    return entity_path == PROPERTIES_ENTITY or entity_path.startswith(PROPERTIES_ENTITY + "/")


def property_name(entity_path: str, component: str) -> str:
    """``("/__properties/task", "text")`` -> ``"task:text"``; on ``/__properties`` the component."""
    sub = entity_path[len(PROPERTIES_ENTITY):].strip("/")
    return f"{sub}:{component}" if sub else component


def property_value(cell: Any) -> PropertyValue:
    """One property cell (the list of a static row) as a scalar or JSON text."""
    if isinstance(cell, list) and len(cell) == 1:
        cell = cell[0]
    if cell is None or isinstance(cell, str | int | float | bool):
        return cell
    return json.dumps(cell, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def property_array(value: PropertyValue) -> pa.Array:
    """A property value as a one-row Arrow ``List`` array (Rerun's component shape)."""
    if isinstance(value, bool):
        inner = pa.array([value], pa.bool_())
    elif isinstance(value, int):
        inner = pa.array([value], pa.int64())
    elif isinstance(value, float):
        inner = pa.array([value], pa.float64())
    elif value is None:
        inner = pa.array([], pa.null())
    else:
        inner = pa.array([value], pa.string())
    return pa.ListArray.from_arrays(pa.array([0, len(inner)], pa.int32()), inner)
