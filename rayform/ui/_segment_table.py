"""The segment table page: a SQL filter over ``NAME.segments``, a sort column, one page of rows,
and the curation verdict and findings counts of the segments shown."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._notes import load_notes
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


def segment_page(catalog: Catalog, dataset: DatasetEntry, query: TableQuery, *,
                 timeout_s: float | None = None) -> SegmentPage:
    """Run the page's queries (read-only SQL, the catalog's limits).

    Raises:
        QueryError: the filter is not valid SQL over the segment table, or ran past a limit.
        ConfigError: the sort column is not a column of the segment table.
    """
    source = f"{quote_name(dataset.name)}.segments"
    columns = catalog.sql(f"SELECT * FROM {source} LIMIT 0").schema().names
    if query.sort not in columns:
        raise ConfigError(f"sort: {query.sort!r} is not a column of {dataset.name}.segments; "
                          f"choose one of {', '.join(columns)}")
    where = f" WHERE ({query.where})" if query.where else ""
    count = catalog.sql(f"SELECT count(*) AS n FROM {source}{where}", timeout_s=timeout_s)
    total = int(count.to_arrow_table().column(0)[0].as_py())
    order = "DESC" if query.descending else "ASC"
    offset = (query.page - 1) * query.page_size
    text = (f"SELECT * FROM {source}{where} ORDER BY {quote_name(query.sort)} {order} NULLS LAST, "
            f"{SEGMENT_ID} LIMIT {query.page_size} OFFSET {offset}")
    table = catalog.sql(text, timeout_s=timeout_s).to_arrow_table()
    rows = json_rows(table)
    notes = load_notes(dataset.catalog, dataset.name)
    curated = notes is not None and notes.findings is not None
    verdicts = page_verdicts(dataset, [str(r[SEGMENT_ID]) for r in rows]) if curated else {}
    return SegmentPage(dataset=dataset.name, query=query, columns=list(table.column_names),
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
