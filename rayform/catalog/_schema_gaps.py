"""Which segments of a widened dataset lack which columns, or hold them narrower than the merge.

A dataset's schema is the merge of its segments' (see :mod:`rayform.recording._widening`), so a
segment may lack a column (readers show nulls) or hold it narrower: a struct without some
fields, non-nullable items. Missing columns are found from metadata; narrower ones by reading
the schema of the recording files of columns the merge widened (marked at registration).
"""

from __future__ import annotations

from dataclasses import dataclass

from rayform.catalog._dataset import DatasetView
from rayform.catalog._registration import WIDENED_KEY


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnGaps:
    """The segments that lack a column, and those holding it narrower (sorted ids)."""

    missing: tuple[str, ...] = ()
    narrower: tuple[str, ...] = ()

    def describe(self, *, limit: int = 3) -> str:
        """``"missing in s1, s2; narrower in s3"`` (``""`` when every segment has it whole)."""
        parts = []
        for word, ids in (("missing in", self.missing), ("narrower in", self.narrower)):
            if ids:
                shown = ", ".join(ids[:limit]) + (f" … ({len(ids)})" if len(ids) > limit else "")
                parts.append(f"{word} {shown}")
        return "; ".join(parts)


def schema_gaps(view: DatasetView) -> dict[str, ColumnGaps]:
    """Per component column of ``view``'s schema with a gap: the segments lacking it or holding
    it narrower. Columns every segment holds as the schema says are left out."""
    schema = view.schema()
    widened = {name for name in schema.component_columns()
               if WIDENED_KEY in (schema.field(name).metadata or {})}
    missing: dict[str, list[str]] = {}
    narrower: dict[str, list[str]] = {}
    for record in view.segment_records():
        data = None
        for name in schema.component_columns():
            entity, _, component = name.partition(":")
            index = record.entities.get(entity)
            if index is None or component not in index.components:
                missing.setdefault(name, []).append(record.segment_id)
            elif name in widened:
                data = data or view.open_segment(record.segment_id)
                target = schema.field(name).type
                if any(name in table.column_names and table.schema.field(name).type != target
                       for _, table in data.files()):
                    narrower.setdefault(name, []).append(record.segment_id)
    return {name: ColumnGaps(missing=tuple(missing.get(name, ())),
                             narrower=tuple(narrower.get(name, ())))
            for name in schema.component_columns() if name in missing or name in narrower}
