"""Every object digest a metadata record names, found from its field types (not a fixed list).

A field typed :data:`~rayform._digest.Digest` — directly, in a list, as a dict key or value, in
an optional, or in a nested record — names an object the catalog must keep. ``check`` and ``gc``
collect references through :func:`named_digests`, so a new kind of object a record comes to name
(a new field of type ``Digest``) is verified and kept without changing them.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, StringConstraints

from rayform._digest import DIGEST_PATTERN


def named_digests(record: BaseModel) -> list[str]:
    """The digests ``record`` names, in field order, each once."""
    return list(dict.fromkeys(_walk(record, type(record))))


def _is_digest_type(tp: Any) -> bool:
    if typing.get_origin(tp) is not Annotated:
        return False
    return any(isinstance(m, StringConstraints) and m.pattern == DIGEST_PATTERN
               for m in typing.get_args(tp)[1:])


def _field_type(field: Any) -> Any:
    """A pydantic field's type with its constraints (pydantic moves them to ``metadata``)."""
    if field.metadata:
        return Annotated[(field.annotation, *field.metadata)]
    return field.annotation


@cache
def _may_hold(tp: Any) -> bool:
    """Whether a value of type ``tp`` can contain a digest (so a walk can skip the rest)."""
    if _is_digest_type(tp):
        return True
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return bool(_digest_fields(tp))
    return any(_may_hold(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)


@cache
def _digest_fields(model: type[BaseModel]) -> tuple[tuple[str, Any], ...]:
    fields = [(name, _field_type(f)) for name, f in model.model_fields.items()]
    return tuple((name, tp) for name, tp in fields if _may_hold(tp))


def _walk(value: Any, tp: Any) -> Iterator[str]:
    if value is None:
        return
    if _is_digest_type(tp):
        if isinstance(value, str):
            yield value
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        yield from _walk(value, args[0])
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        if isinstance(value, tp):
            for name, field_tp in _digest_fields(tp):
                yield from _walk(getattr(value, name), field_tp)
    elif origin is dict and isinstance(value, dict):
        key_tp, value_tp = args
        walk_keys, walk_values = _may_hold(key_tp), _may_hold(value_tp)
        for key, item in value.items():
            if walk_keys:
                yield from _walk(key, key_tp)
            if walk_values:
                yield from _walk(item, value_tp)
    elif origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple, set,
                                                                        frozenset)):
        item_types = [a for a in args if a is not Ellipsis]
        for item in value:
            for item_tp in item_types:
                yield from _walk(item, item_tp)
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            if _may_hold(arg):
                yield from _walk(value, arg)
