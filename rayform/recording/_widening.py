"""Schema widening: the Arrow type two recordings' columns merge to, and arrays cast up to it.

Rerun's catalog merges the schemas of a dataset's segments at registration and fills what a
narrower segment lacks with nulls on read. The compatible changes, recursively:

- a ``null``-typed column (or item) and any type: the other type;
- a struct missing fields: the union of the fields (first seen order, new fields appended), every
  field nullable where one side lacks it;
- non-nullable and nullable items of a list, large list, fixed-size list or struct field:
  nullable.

Everything else is refused: a primitive type change (``float`` vs ``double``, ``int32`` vs
``int64``), a list kind change, another fixed-size-list length, and any difference in a
dictionary's or map's key or value types.
"""

from __future__ import annotations

import pyarrow as pa


def merged_type(known: pa.DataType, new: pa.DataType) -> pa.DataType | None:
    """The type both ``known`` and ``new`` values widen to, or None when they cannot merge."""
    if known == new:
        return known
    if pa.types.is_null(known):
        return new
    if pa.types.is_null(new):
        return known
    if pa.types.is_struct(known) and pa.types.is_struct(new):
        return _merged_struct(known, new)
    for is_kind in (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list):
        if is_kind(known) and is_kind(new):
            if pa.types.is_fixed_size_list(known) and known.list_size != new.list_size:
                return None
            item = _merged_field(known.value_field, new.value_field, name=known.value_field.name)
            if item is None:
                return None
            if pa.types.is_list(known):
                return pa.list_(item)
            if pa.types.is_large_list(known):
                return pa.large_list(item)
            return pa.list_(item, known.list_size)
    return None


def _merged_field(known: pa.Field, new: pa.Field, *, name: str) -> pa.Field | None:
    t = merged_type(known.type, new.type)
    if t is None:
        return None
    return pa.field(name, t, nullable=known.nullable or new.nullable)


def _merged_struct(known: pa.StructType, new: pa.StructType) -> pa.DataType | None:
    fields: list[pa.Field] = []
    new_names = {new.field(i).name for i in range(new.num_fields)}
    for i in range(known.num_fields):
        f = known.field(i)
        if f.name in new_names:
            merged = _merged_field(f, new.field(f.name), name=f.name)
            if merged is None:
                return None
            fields.append(merged)
        else:
            fields.append(f.with_nullable(True))
    known_names = {f.name for f in fields}
    fields += [new.field(i).with_nullable(True) for i in range(new.num_fields)
               if new.field(i).name not in known_names]
    return pa.struct(fields)


def widen(values: pa.Array, target: pa.DataType) -> pa.Array:
    """``values`` as ``target`` (a type :func:`merged_type` returned for them): unchanged when the
    type already is the target, else cast, with nulls for the struct fields ``values`` lacks.

    The same-type case must not cast: Arrow's cast validates nullability (rejecting the nulls
    Rerun leaves under null rows of non-nullable items) and truncates ``list<null>`` children.
    """
    return values if values.type == target else values.cast(target)
