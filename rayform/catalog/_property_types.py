"""Typed segment properties: the Arrow type of each property of a dataset, merged and checked at
registration like a column's type, and the segment table's property columns built in it.

A property value is a scalar (``bool``, ``int`` -> ``int64``, ``float`` -> ``float64``, ``str``)
or a list of them (``list<...>``, what a Rerun property of several values is). The types of a
property's values across segments merge as follows, everything else being a conflict:

- ``null`` (a ``None`` value) and any type: the other type;
- ``int64`` and ``float64``: ``float64`` (JSON-sourced numbers write ``1`` for ``1.0``);
- a scalar and a list (a Rerun property holding one value in one segment and several in
  another): the list of the merged item types, the scalar shown as a one-item list.

The dataset's property types live in its schema's metadata (:data:`PROPERTY_SCHEMA_KEY`); a
snapshot committed before they were recorded has them inferred from its segments' values.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pyarrow as pa

from rayform.errors import SchemaConflictError
from rayform.recording._file import PropertyValue, fits_arrow

PROPERTY_SCHEMA_KEY: Final = b"rayform:property_schema"
"""Dataset schema metadata: base64 of the Arrow IPC schema of its properties (one field each)."""


def property_type(value: PropertyValue) -> pa.DataType:
    """The Arrow type of one property value (``null`` for ``None``)."""
    if isinstance(value, list):
        item: pa.DataType = pa.null()
        for v in value:
            merged = merged_property_type(item, property_type(v))
            item = merged if merged is not None else pa.string()
        return pa.list_(item)
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    return pa.string()


def merged_property_type(known: pa.DataType, new: pa.DataType) -> pa.DataType | None:
    """The type both kinds of values show as, or None when they conflict (see module docs)."""
    if known == new:
        return known
    if pa.types.is_null(known):
        return new
    if pa.types.is_null(new):
        return known
    if {known, new} == {pa.int64(), pa.float64()}:
        return pa.float64()
    known_list, new_list = pa.types.is_list(known), pa.types.is_list(new)
    if known_list or new_list:
        item = merged_property_type(known.value_type if known_list else known,
                                    new.value_type if new_list else new)
        return None if item is None or pa.types.is_list(item) else pa.list_(item)
    return None


def merge_property_types(known: Mapping[str, pa.DataType],
                         properties: Mapping[str, PropertyValue], *, source_uri: str
                         ) -> dict[str, pa.DataType]:
    """``known`` with the types of one layer's ``properties`` merged in.

    Raises:
        SchemaConflictError: a property's value does not fit the type the dataset holds.
    """
    out = dict(known)
    for name, value in properties.items():
        t = property_type(value)
        old = out.get(name)
        merged = t if old is None else merged_property_type(old, t)
        if merged is None:
            raise SchemaConflictError(
                f"{source_uri}: property {name!r} has type {t} ({value!r}) but the dataset's "
                f"schema holds {old} for it; the schemas cannot be merged: log it with the "
                "same type in every recording or use another dataset"
            )
        out[name] = merged
    return out


def inferred_property_types(values: Iterable[Mapping[str, PropertyValue]]
                            ) -> dict[str, pa.DataType]:
    """Property types of segments registered before types were recorded (a conflict among their
    values shows as ``string``, as those snapshots' segment tables did)."""
    out: dict[str, pa.DataType] = {}
    for properties in values:
        for name, value in properties.items():
            t = property_type(value)
            old = out.get(name)
            merged = t if old is None else merged_property_type(old, t)
            out[name] = merged if merged is not None else pa.string()
    return out


def property_types_to_metadata(types: Mapping[str, pa.DataType]) -> dict[bytes, bytes]:
    schema = pa.schema([pa.field(name, t) for name, t in sorted(types.items())])
    return {PROPERTY_SCHEMA_KEY: base64.b64encode(schema.serialize().to_pybytes())}


def property_types_from_metadata(schema: pa.Schema) -> dict[str, pa.DataType] | None:
    """The property types a dataset schema records (None for a snapshot that records none)."""
    text = (schema.metadata or {}).get(PROPERTY_SCHEMA_KEY)
    if text is None:
        return None
    stored = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
    return {f.name: f.type for f in stored}


def property_column(values: list[Any], t: pa.DataType | None) -> pa.Array:
    """A segment-table column of one property's values (one per segment) in type ``t``, or in
    the type inferred from the values when ``t`` is None."""
    if t is None:
        t = inferred_property_types({"p": v} for v in values).get("p", pa.null())
    if pa.types.is_null(t) or not all(fits_arrow(v) for v in values):
        t = pa.string()  # a crafted catalog's int beyond int64: text rather than every read failing
    if pa.types.is_list(t):
        values = [v if v is None or isinstance(v, list) else [v] for v in values]
    elif pa.types.is_string(t):
        values = [v if v is None or isinstance(v, str)
                  else json.dumps(v) if isinstance(v, list) else str(v) for v in values]
    return pa.array(values, type=t)
