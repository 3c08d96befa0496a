"""A dataset's schema (index and component columns) and entity content filters."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.recording._columns import (
    PROPERTIES_ENTITY,
    RERUN_ARCHETYPES,
    TimelineKind,
    entity_of,
)

INDEX_TYPES: dict[str, pa.DataType] = {
    "sequence": pa.int64(),
    "timestamp": pa.timestamp("ns"),
    "duration": pa.duration("ns"),
}


STATIC_KEY: Final = b"rayform:static"
"""Field metadata of a column every segment logged static only (set at registration)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexColumnDescriptor:
    """An index column (a timeline) of a schema, as Rerun's ``IndexColumnDescriptor``.

    Attributes:
        name: the timeline's name.
        kind: ``"sequence"``, ``"timestamp"`` or ``"duration"``.
        arrow_type: ``int64``, ``timestamp[ns]`` or ``duration[ns]``.
    """

    name: str
    kind: TimelineKind
    arrow_type: pa.DataType

    @property
    def is_static(self) -> bool:
        """Always False for an index column (Rerun's generic descriptor interface)."""
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentColumnDescriptor:
    """A component column of a schema, as Rerun's ``ComponentColumnDescriptor``.

    Attributes:
        name: ``"<entity_path>:<component>"``.
        entity_path: the entity, e.g. ``"/cam0"``.
        component: ``"<Archetype>:<field>"`` (or just ``"<field>"`` for AnyValues).
        archetype: ``"rerun.archetypes.<name>"`` for Rerun's archetypes, the name for others,
            None without one.
        component_type: Rerun's component type name; None (rayform does not keep it).
        is_static: every segment logged it static only.
        is_property: it lives under ``/__properties``.
        arrow_type: the merged Arrow type of the dataset.
    """

    name: str
    entity_path: str
    component: str
    archetype: str | None
    component_type: str | None
    is_static: bool
    is_property: bool
    arrow_type: pa.DataType


ColumnDescriptor = IndexColumnDescriptor | ComponentColumnDescriptor


@dataclass(frozen=True, slots=True, eq=False)
class Schema:
    """The union schema of a dataset (or a content-filtered view of it).

    Iterating it yields Rerun-style column descriptors, index columns first; two schemas are
    equal when their descriptors are. The methods return column names.
    """

    arrow: pa.Schema
    timelines: dict[str, TimelineKind]

    def __iter__(self) -> Iterator[ColumnDescriptor]:
        for name, kind in self.timelines.items():
            yield IndexColumnDescriptor(name=name, kind=kind, arrow_type=INDEX_TYPES[kind])
        for name in self.component_columns():
            yield _component_descriptor(self.arrow.field(name))

    def __len__(self) -> int:
        return len(self.timelines) + len(self.component_columns())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def index_columns(self) -> list[str]:
        """Timeline names."""
        return list(self.timelines)

    def component_columns(self) -> list[str]:
        """Component column names ``"<entity>:<Archetype>:<component>"``."""
        return [f.name for f in self.arrow if f.name not in self.timelines]

    def column_names(self) -> list[str]:
        return [*self.index_columns(), *self.component_columns()]

    def entity_paths(self) -> list[str]:
        return sorted({entity_of(c) for c in self.component_columns()})

    def archetypes(self) -> list[str]:
        return sorted({c.split(":")[1] for c in self.component_columns() if c.count(":") >= 2})

    def column_for(self, entity_path: str, component: str) -> str | None:
        """The column of ``component`` (``"Archetype:field"`` or just ``"field"``) on an entity."""
        for name in self.component_columns():
            ent, _, comp = name.partition(":")
            if ent == entity_path and (comp == component or comp.endswith(":" + component)):
                return name
        return None

    def field(self, column: str) -> pa.Field:
        """The Arrow field of a column.

        Raises:
            ColumnNotFoundError: no such column (the message lists close matches).
        """
        idx = self.arrow.get_field_index(column)
        if idx < 0:
            close = [c for c in self.column_names() if column.split(":")[0] in c][:5]
            hint = f"; did you mean one of {close}?" if close else ""
            raise ColumnNotFoundError(f"unknown column {column!r}{hint}")
        return self.arrow.field(idx)

    def timeline_kind(self, timeline: str) -> TimelineKind:
        """The kind of a timeline.

        Raises:
            ColumnNotFoundError: no such timeline.
        """
        kind = self.timelines.get(timeline)
        if kind is None:
            raise ColumnNotFoundError(
                f"unknown timeline {timeline!r}; the dataset has {sorted(self.timelines)}"
            )
        return kind


@dataclass(frozen=True, slots=True)
class ContentFilter:
    """Which entities a view keeps: ``["/cam0/**", "-/debug/**"]`` style expressions."""

    expressions: tuple[str, ...]

    @staticmethod
    def parse(exprs: str | Iterable[str]) -> ContentFilter:
        items = (exprs,) if isinstance(exprs, str) else tuple(exprs)
        for e in items:
            body = e[1:] if e.startswith(("-", "+")) else e
            if not body.startswith("/"):
                raise ConfigError(
                    f"content filter {e!r} must be an entity path expression like '/cam0/**' or "
                    "'-/debug/**'"
                )
        return ContentFilter(items)

    def matches(self, entity: str) -> bool:
        includes = [e.lstrip("+") for e in self.expressions if not e.startswith("-")]
        excludes = [e[1:] for e in self.expressions if e.startswith("-")]
        if includes:
            included = any(_match(p, entity) for p in includes)
        else:
            included = entity != PROPERTIES_ENTITY and not entity.startswith(PROPERTIES_ENTITY + "/")
        return included and not any(_match(p, entity) for p in excludes)


def _match(pattern: str, entity: str) -> bool:
    if pattern.endswith("/**"):
        base = pattern[:-3] or "/"
        return entity == base or entity.startswith(base.rstrip("/") + "/") or base == "/"
    return fnmatch.fnmatchcase(entity, pattern)


def _component_descriptor(field: pa.Field) -> ComponentColumnDescriptor:
    entity, _, component = field.name.partition(":")
    short = component.split(":")[0] if ":" in component else None
    archetype = None if short is None else (
        f"rerun.archetypes.{short}" if short in RERUN_ARCHETYPES else short)
    is_property = entity == PROPERTIES_ENTITY or entity.startswith(PROPERTIES_ENTITY + "/")
    return ComponentColumnDescriptor(
        name=field.name, entity_path=entity, component=component, archetype=archetype,
        component_type=None, is_static=STATIC_KEY in (field.metadata or {}),
        is_property=is_property, arrow_type=field.type)
