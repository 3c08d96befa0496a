"""PX4 ULog flight logs (``.ulg``), read with pyulog."""

from __future__ import annotations

from rayform.importers.ulog._importer import (
    ULogImporter,
    entity_base,
    field_component,
    field_groups,
)

__all__ = ["ULogImporter", "entity_base", "field_component", "field_groups"]
