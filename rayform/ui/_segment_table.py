"""The segment table page: a SQL filter over ``NAME.segments``, a sort column, one page of rows,
and the curation verdict and findings counts of the segments shown.

The filter is a predicate over the columns of ``NAME.segments`` (the segment table rayform's SQL
shows), run the way ``slices.create(where=…)`` runs its filter: over the snapshot's segment
table registered as ``segments`` in a context of its own, read-only, bounded in size and memory,
and under the timeout on the main thread.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog import DatasetEntry
from rayform.catalog._notes import load_notes
from rayform.catalog._query import read_only_options
from rayform.catalog._query_errors import translate_errors
from rayform.catalog._query_limits import check_query_size, deadline, new_session_context
from rayform.curation._result import verdicts_of
from rayform.errors import ConfigError
from rayform.recording._columns import (
    LAST_UPDATED_AT,
    LAYER_NAMES,
    SEGMENT_ID,
    SEGMENT_VERSION,
    STORAGE_URLS,
)
from rayform.ui._values import json_rows

MAX_PAGE_SIZE = 500
# Columns the page leaves out (the JSON twin has them): storage paths and bookkeeping.
HIDDEN_COLUMNS = (LAYER_NAMES, STORAGE_URLS, LAST_UPDATED_AT, SEGMENT_VERSION)


def quote_name(name: str) -> str:
    """``name`` as a SQL identifier in double quotes (inner quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True, kw_only=True)
class TableQuery:
    """What the segment table shows.

    Attributes:
        where: a SQL predicate over ``NAME.segments`` (``"property:success" AND …``), or ``None``.
        sort: a column of the segment table to order by (default: the segment id).
        page: 1-based page number; ``page_size`` rows per page.
    """

    where: str | None = None
    sort: str = SEGMENT_ID
    descending: bool = False
    page: int = 1
    page_size: int = 50

    def __post_init__(self) -> None:
        if self.page < 1:
            raise ConfigError(f"page must be 1 or more, got {self.page!r}")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ConfigError(f"page_size must be between 1 and {MAX_PAGE_SIZE}, got "
                              f"{self.page_size!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentPage:
    """One page of the segment table (rows as JSON-able dicts)."""

    dataset: str
    query: TableQuery
    columns: list[str]
    rows: list[dict[str, Any]]
    total: int
    curated: bool
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.page_size))

    def to_json(self) -> dict[str, Any]:
        q = self.query
        return {"dataset": self.dataset, "where": q.where, "sort": q.sort,
                "descending": q.descending, "page": q.page, "page_size": q.page_size,
                "pages": self.pages, "total": self.total, "columns": self.columns,
                "rows": self.rows, "curated": self.curated, "verdicts": self.verdicts}


class SegmentTables:
    """Each dataset snapshot's segment table, built once (metadata only) and queried in a
    read-only DataFusion context of its own: the page's count and page queries, and the next
    page, do not rebuild a 10,000-row table each. Holds the last :data:`KEPT` snapshots."""

    KEPT = 4

    def __init__(self) -> None:
        self._tables: OrderedDict[tuple[str, int], tuple[pa.Table, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, dataset: DatasetEntry) -> tuple[pa.Table, Any]:
        """The segment table of ``dataset``'s snapshot and a context where it is ``segments``."""
        key = (dataset.name, dataset.snapshot_version)
        with self._lock:
            found = self._tables.get(key)
            if found is not None:
                self._tables.move_to_end(key)
                return found
        table = dataset.segment_table_arrow()
        ctx = new_session_context()
        batches = table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]
        ctx.register_record_batches("segments", [batches])
        with self._lock:
            self._tables[key] = (table, ctx)
            while len(self._tables) > self.KEPT:
                self._tables.popitem(last=False)
        return table, ctx


def _run(ctx: Any, text: str, *, what: str, timeout_s: float | None) -> pa.Table:
    with translate_errors(what), deadline(timeout_s, what=what):
        return ctx.sql(text, options=read_only_options()).to_arrow_table()


def segment_page(tables: SegmentTables, dataset: DatasetEntry, query: TableQuery, *,
                 timeout_s: float | None = None) -> SegmentPage:
    """Run the page's queries (read-only SQL, the catalog's size bound, memory pool, timeout).

    Raises:
        QueryError: the filter is not valid SQL over the segment table, or ran past a limit.
        ConfigError: the sort column is not a column of the segment table.
    """
    table, ctx = tables.get(dataset)
    columns = table.column_names
    if query.sort not in columns:
        raise ConfigError(f"sort: {query.sort!r} is not a column of {dataset.name}.segments; "
                          f"choose one of {', '.join(columns)}")
    what = f"the filter of {dataset.name}.segments {query.where!r}"
    where = ""
    if query.where:
        check_query_size(query.where, what=what)
        where = f" WHERE ({query.where})"
    total = int(_run(ctx, f"SELECT count(*) AS n FROM segments{where}", what=what,
                     timeout_s=timeout_s).column(0)[0].as_py())
    order = "DESC" if query.descending else "ASC"
    offset = (query.page - 1) * query.page_size
    text = (f"SELECT * FROM segments{where} ORDER BY {quote_name(query.sort)} {order} NULLS LAST, "
            f"{SEGMENT_ID} LIMIT {query.page_size} OFFSET {offset}")
    rows = json_rows(_run(ctx, text, what=what, timeout_s=timeout_s))
    notes = load_notes(dataset.catalog, dataset.name)
    curated = notes is not None and notes.findings is not None
    verdicts = page_verdicts(dataset, [str(r[SEGMENT_ID]) for r in rows]) if curated else {}
    return SegmentPage(dataset=dataset.name, query=query, columns=list(columns),
                       rows=rows, total=total, curated=curated, verdicts=verdicts)


def page_verdicts(dataset: DatasetEntry, segments: list[str]) -> dict[str, dict[str, Any]]:
    """Per segment: the curation verdict, its reasons and the findings per severity."""
    findings = dataset.findings()
    mine = findings.filter(pc.is_in(findings.column("segment"),
                                            value_set=pa.array(segments, pa.string())))
    counts: dict[str, Counter[str]] = {s: Counter() for s in segments}
    for segment, severity in zip(mine.column("segment").to_pylist(),
                                 mine.column("severity").to_pylist(), strict=True):
        counts[segment][severity] += 1
    return {v.segment: {"verdict": v.verdict, "reasons": list(v.reasons),
                        "findings": dict(counts[v.segment])}
            for v in verdicts_of(mine, segments)}
