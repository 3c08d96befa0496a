"""Arrow values as JSON: times as ISO text, bytes as their size, NaN and infinities as null."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pyarrow as pa


def json_value(value: Any) -> Any:
    """One Arrow Python value (``as_py``) as something ``json.dumps`` writes strictly."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as JSON-able dicts (times with ns kept as ISO text)."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            # ISO text keeps nanoseconds, which datetime.datetime would drop
            text = column.cast(pa.string()) if field.type.tz is None else \
                column.cast(pa.timestamp(field.type.unit)).cast(pa.string())
            columns.append([None if v is None else v.replace(" ", "T") for v in text.to_pylist()])
        else:
            columns.append([json_value(v) for v in column.to_pylist()])
    names = table.column_names
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)] \
        if columns else [{} for _ in range(table.num_rows)]


def cell_text(value: Any) -> str:
    """A JSON-able value as a table cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        inner = ", ".join(cell_text(v) for v in value[:8])
        return f"[{inner}{', …' if len(value) > 8 else ''}]"
    return str(value)
