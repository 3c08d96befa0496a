"""Recording properties: Rerun's ``/__properties`` chunks <-> rayform segment properties.

Rerun shows a property logged on ``/__properties/<name>`` with component ``<comp>`` as the
segment-table column ``property:<name>:<comp>`` and built-ins on ``/__properties`` itself
(``RecordingInfo:name``) as ``property:RecordingInfo:name``. Rayform stores a property under the
name that follows ``property:``, so the segment tables of both show the same columns.
A single value becomes a scalar property and several a list, keeping their Arrow kind (a
``list<double>`` property stays a list of floats); nested or struct values become JSON text.
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


def property_value(cell: pa.Array) -> PropertyValue:
    """One property cell (a one-row Arrow ``List`` array) as a typed value: its only item as a
    scalar, several items as a list, both keeping their Arrow kind (integers, floats, booleans,
    strings; timestamps and durations as their int64 count). Nested or struct items become JSON
    text."""
    if not (pa.types.is_list(cell.type) or pa.types.is_large_list(cell.type)
            or pa.types.is_fixed_size_list(cell.type)):
        return _json(cell[0].as_py())
    items = cell.flatten()
    t = items.type
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        items = items.cast(pa.int64())
    elif pa.types.is_null(t):
        items = pa.array([None] * len(items), pa.string())
    elif not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
              or pa.types.is_string(t) or pa.types.is_large_string(t)):
        return _json(cell[0].as_py())
    values: list[Any] = items.to_pylist()
    if pa.types.is_floating(t):
        values = [None if v is None else float(v) for v in values]
    return values[0] if len(values) == 1 else values


def _json(value: Any) -> PropertyValue:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def property_array(value: PropertyValue) -> pa.Array:
    """A property value as a one-row Arrow ``List`` array (Rerun's component shape)."""
    items = value if isinstance(value, list) else [] if value is None else [value]
    inner = pa.array(items, _item_type(items))
    return pa.ListArray.from_arrays(pa.array([0, len(inner)], pa.int32()), inner)


def _item_type(items: list[Any]) -> pa.DataType:
    present = [v for v in items if v is not None]
    if not present:
        return pa.null()
    if all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.int64()
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()
