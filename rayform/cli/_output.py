"""Printing Arrow tables from the command line: an aligned table, CSV or JSON.

In a terminal, tables are fitted to the window (``rayform.cli._table``: keys and numbers are never
cut; trailing columns that do not fit are left out with a note). When standard output is a pipe
or a file, every column is printed and nothing is cut, so names and values can be copied;
``--format csv`` and ``--format json`` are for programs.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import io
import json
import os
import sys
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.text import Text

from rayform.cli._table import TextColumn, print_text_table

TERMINAL_LIST_ITEMS = 8
DEFAULT_WIDTH = 80
TERMINAL_HEIGHT = 25
NS_PER_S = 1_000_000_000
_NS_PER_UNIT = {"s": NS_PER_S, "ms": 1_000_000, "us": 1_000, "ns": 1}


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def json_value(value: Any) -> Any:
    """A JSON-ready form of one Arrow Python value (timestamps as ISO text, bytes as base64)."""
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def text_cell(value: Any, *, terminal: bool) -> str:
    """One cell as text; only a terminal gets long lists shortened and blobs summarised."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.6g}" if terminal else repr(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>" if terminal else base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        items = value[:TERMINAL_LIST_ITEMS] if terminal else value
        more = f", … ({len(value)} items)" if len(items) < len(value) else ""
        return "[" + ", ".join(text_cell(v, terminal=terminal) for v in items) + more + "]"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value).replace("\n", " ")


def _rows_note(shown: int, total: int) -> str:
    if shown < total:
        return f"… {total - shown} more rows ({total} in all; --limit 0 prints every row)"
    return f"({total} row{'' if total == 1 else 's'})"


def plain_table(table: pa.Table, *, limit: int | None = None) -> str:
    """Header, separator and rows, aligned, nothing cut; then a line counting the rows."""
    names = table.column_names
    shown = table if limit is None else table.slice(0, limit)
    rows = [[text_cell(r[n], terminal=False) for n in names] for r in shown.to_pylist()]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip(),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(_rows_note(shown.num_rows, table.num_rows))
    return "\n".join(lines)


def _wraps(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_nested(kind))


def _numeric(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_decimal(kind))


def terminal_columns(table: pa.Table) -> list[TextColumn]:
    """Each column of ``table`` as terminal text (long lists shortened, blobs summarised)."""
    return [TextColumn(name=field.name, wraps=_wraps(field.type), numeric=_numeric(field.type),
                       cells=[text_cell(v, terminal=True) for v in table.column(i).to_pylist()])
            for i, field in enumerate(table.schema)]


def terminal_width(stream: TextIO) -> int:
    """``$COLUMNS``, else the width of the terminal ``stream`` writes to, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, OSError, ValueError):
        return DEFAULT_WIDTH


def terminal_console(stream: TextIO, *, width: int | None = None) -> Console:
    """A console on ``stream`` that reads nothing as markup, emoji or highlights."""
    # A height too: without one, rich takes a TERM=dumb terminal to be 80 columns wide.
    return Console(file=stream, width=width or terminal_width(stream), height=TERMINAL_HEIGHT,
                   highlight=False,
                   emoji=False, markup=False, soft_wrap=False)


def print_terminal_table(table: pa.Table, console: Console, *, limit: int | None = None) -> None:
    """``table`` fitted to ``console.width``: keys and numbers whole; then a line counting rows."""
    shown = table if limit is None else table.slice(0, limit)
    print_text_table(console, terminal_columns(shown), shown.num_rows)
    console.print(Text(_rows_note(shown.num_rows, table.num_rows), style="dim"))


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | dict | bool):
        return json.dumps(json_value(value), ensure_ascii=False)
    return str(json_value(value))


def csv_text(table: pa.Table, *, limit: int | None = None) -> str:
    """RFC 4180 CSV with a header row; lists and structs as JSON, nulls as empty cells."""
    shown = table if limit is None else table.slice(0, limit)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in shown.to_pylist():
        writer.writerow([_csv_cell(v) for v in row.values()])
    return buf.getvalue()


def json_text(table: pa.Table, *, limit: int | None = None) -> str:
    """A JSON array of row objects, one row per line."""
    shown = table if limit is None else table.slice(0, limit)
    rows = [json.dumps(json_value(row), ensure_ascii=False) for row in shown.to_pylist()]
    return "[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n"


def seconds_text(ns: int) -> str:
    """A duration in nanoseconds as exact decimal seconds: ``7333333333 -> "7.333333333s"``."""
    whole, frac = divmod(abs(ns), NS_PER_S)
    digits = f"{frac:09d}".rstrip("0")
    return f"{'-' if ns < 0 else ''}{whole}{'.' + digits if digits else ''}s"


def printable(table: pa.Table, *, text: bool) -> pa.Table:
    """``table`` with its time columns as values every format prints exactly.

    Timestamps become ISO text (``T`` between date and time unless ``text``); durations become
    exact seconds, as text (``"7.333333333s"``) in tables, else as numbers. Arrow's own Python
    values of nanosecond times are lossy (microseconds) or fail outright.
    """
    for i, field in enumerate(table.schema):
        kind = field.type
        column = table.column(i)
        if pa.types.is_timestamp(kind):
            fmt = "%Y-%m-%d %H:%M:%S" if text else "%Y-%m-%dT%H:%M:%S"
            fmt += "%z" if kind.tz else ""
            value = pc.strftime(column, format=fmt)
        elif pa.types.is_duration(kind):
            ns = pc.multiply(column.cast(pa.int64()), _NS_PER_UNIT[kind.unit])
            if text:
                value = pa.array([None if v is None else seconds_text(v) for v in ns.to_pylist()],
                                 pa.string())
            else:
                value = pc.divide(ns.cast(pa.float64()), float(NS_PER_S))
        else:
            continue
        table = table.set_column(i, pa.field(field.name, value.type), value)
    return table


def render_table(table: pa.Table, *, fmt: str, limit: int | None,
                 stream: TextIO | None = None) -> None:
    """Print ``table`` to ``stream`` (standard output) as ``fmt`` (table, csv or json)."""
    out = stream if stream is not None else sys.stdout
    table = printable(table, text=fmt == "table")
    if fmt == "csv":
        out.write(csv_text(table, limit=limit))
    elif fmt == "json":
        out.write(json_text(table, limit=limit))
    elif is_terminal(out):
        print_terminal_table(table, terminal_console(out), limit=limit)
    else:
        out.write(plain_table(table, limit=limit) + "\n")
    out.flush()
