"""The SQL page: one read-only query over ``catalog.sql``, its first rows, CSV and JSON downloads.

The query runs with the catalog's limits (read-only options, size bound, memory pool) and, on
the main thread, its ``timeout_s``; batches are read until the row cap, so a query over a large
table never holds more than the cap in memory.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from rayform.catalog import Catalog
from rayform.ui._values import json_rows

PAGE_ROWS = 1000          # rows the page shows
DOWNLOAD_ROWS = 100_000   # rows a CSV or JSON download holds at most


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """The first ``len(rows)`` rows of a query; ``truncated`` when it had more."""

    query: str
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "columns": self.columns, "rows": self.rows,
                "num_rows": len(self.rows), "truncated": self.truncated}

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if row[c] is None else json.dumps(row[c])
                             if isinstance(row[c], list | dict) else row[c]
                             for c in self.columns])
        return buf.getvalue()


def run_query(catalog: Catalog, query: str, *, max_rows: int,
              timeout_s: float | None) -> QueryResult:
    """Run ``query`` read-only and keep its first ``max_rows`` rows.

    Raises:
        QueryError: DataFusion rejected it, it writes, or it passed a limit.
    """
    frame = catalog.sql(query, timeout_s=timeout_s)
    batches: list[pa.RecordBatch] = []
    count = 0
    truncated = False
    schema = None
    for batch in frame:
        record = batch.to_pyarrow()
        schema = record.schema
        if count + record.num_rows > max_rows:
            batches.append(record.slice(0, max_rows - count))
            truncated = True
            break
        batches.append(record)
        count += record.num_rows
    if schema is None:
        schema = frame.schema()
    table = pa.Table.from_batches(batches, schema=schema)
    return QueryResult(query=query, columns=list(table.column_names), rows=json_rows(table),
                       truncated=truncated)
