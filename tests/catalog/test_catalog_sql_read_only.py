"""SQL is read-only by default: DDL, DML and statements are refused with QueryError and write
nothing anywhere; ``allow_statements=True`` opts in; execution errors are QueryError too."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pytest

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import QueryError

Guard = Callable[[Path], AbstractContextManager[None]]


@pytest.fixture
def notes(robots: DatasetEntry) -> Catalog:
    """The ``robots`` catalog plus a table entry ``notes`` (x int64: 1, 2)."""
    catalog = Catalog.open(robots.catalog.url)
    catalog.create_table("notes", pa.schema([("x", pa.int64())])).append(x=[1, 2])
    return catalog


def _writes(tmp_path: Path, root: Path) -> dict[str, tuple[str, str]]:
    versions = root / "entries" / "robots" / "versions"
    return {
        "external table": ("CREATE EXTERNAL TABLE passwd (line VARCHAR) STORED AS CSV "
                           "LOCATION '/etc/passwd'", "is a DDL statement \\(CreateExternalTable\\)"),
        "copy out": (f"COPY (SELECT 1 AS x) TO '{tmp_path / 'out.csv'}' STORED AS CSV",
                     "is a DML statement \\(COPY\\)"),
        "copy into the catalog": (f"COPY (SELECT 1 AS x) TO '{versions / '000000000009.json'}' "
                                  "STORED AS JSON", "is a DML statement \\(COPY\\)"),
        "insert": ("INSERT INTO notes VALUES (3)", "is a DML statement \\(Insert Into\\)"),
        "drop": ("DROP TABLE notes", "is a DDL statement \\(DropTable\\)"),
        "view": ("CREATE VIEW v AS SELECT 1", "is a DDL statement \\(CreateView\\)"),
        "set": ("SET datafusion.execution.batch_size = 1", "is a session statement \\(SetVariable\\)"),
    }


@pytest.mark.parametrize("case", ["external table", "copy out", "copy into the catalog", "insert",
                                  "drop", "view", "set"])
def test_writes_are_refused_by_default(notes: Catalog, tmp_path: Path, disk_unchanged: Guard,
                                       case: str) -> None:
    root = Path(notes.url)
    query, refusal = _writes(tmp_path, root)[case]
    with disk_unchanged(tmp_path):
        with pytest.raises(QueryError, match=refusal) as info:
            notes.sql(query).collect()
        assert "allow_statements=True" in str(info.value)
        assert repr(query[:20])[1:-1] in str(info.value)
    # still readable, with its data intact
    assert Catalog.open(root).get_dataset("robots").segment_ids() == ["ep0", "ep1", "ep2"]
    assert notes.sql("SELECT sum(x) AS s FROM notes").to_pydict() == {"s": [3]}


def test_allow_statements_opts_in(notes: Catalog, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    notes.sql(f"COPY (SELECT x FROM notes) TO '{out}' STORED AS CSV", allow_statements=True).collect()
    assert out.read_text().split() == ["x", "1", "2"]
    with pytest.raises(TypeError):
        notes.sql("SELECT 1", None, True)  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize("run", ["collect", "to_arrow_table", "to_pylist", "to_pydict", "collect_partitioned",
                                 "iterate", "derived"])
def test_execution_errors_are_query_errors(notes: Catalog, run: str) -> None:
    df = notes.sql("SELECT x / (x - x) AS boom FROM notes")
    with pytest.raises(QueryError, match=r"SQL query 'SELECT x / \(x - x\).*Divide by zero"):
        if run == "iterate":
            list(df)
        elif run == "derived":
            df.filter("boom > 0").select("boom").collect()
        else:
            getattr(df, run)()
