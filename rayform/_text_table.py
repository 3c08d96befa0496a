"""Render an Arrow table as an aligned plain-text table for the command line."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

MAX_CELL = 48


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, bytes):
        text = f"<{len(value)} bytes>"
    elif isinstance(value, list) and len(value) > 8:
        text = "[" + ", ".join(_cell(v) for v in value[:8]) + f", … ({len(value)} items)]"
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(table: pa.Table, *, max_rows: int = 50) -> str:
    """Header, separator and up to ``max_rows`` rows; says how many rows were left out."""
    names = table.column_names
    shown = table.slice(0, max_rows).to_pylist()
    rows = [[_cell(r[n]) for n in names] for r in shown]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if table.num_rows > max_rows:
        lines.append(f"… {table.num_rows - max_rows} more rows ({table.num_rows} in all)")
    else:
        lines.append(f"({table.num_rows} rows)")
    return "\n".join(lines)
