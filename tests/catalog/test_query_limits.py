"""SQL limits: a query too large to plan is refused before DataFusion sees it (a crash would kill
the interpreter, so those cases run in a subprocess); each context has a memory pool; timeout_s
cancels a query that runs too long."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rayform
from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._query_limits import (
    MAX_QUERY_OPERATORS,
    check_query_size,
    memory_limit_bytes,
)
from rayform.errors import ConfigError, QueryError

_ROOT = Path(__file__).resolve().parents[2]


def _run_isolated(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter: a segfault shows as a negative return code."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(_ROOT), "HOME": str(tmp_path),
                               "PATH": "/usr/bin:/bin"})


def test_a_10000_term_chain_is_refused_naming_the_limit_not_a_crash(tmp_path: Path) -> None:
    done = _run_isolated("""
        import rayform
        from rayform.errors import QueryError
        catalog = rayform.Catalog.create("c")
        try:
            catalog.sql("SELECT " + " + ".join(["1"] * 10_000)).to_arrow_table()
        except QueryError as err:
            print("refused:", err)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "MAX_QUERY_OPERATORS" in done.stdout


def test_a_10000_or_slice_filter_is_refused_not_a_crash(robots: DatasetEntry,
                                                        tmp_path: Path) -> None:
    done = _run_isolated(f"""
        import rayform
        from rayform.errors import QueryError
        client = rayform.Client({robots.catalog.url!r})
        where = " OR ".join(f"rerun_segment_id = 'ep{{i}}'" for i in range(10_000))
        try:
            client.slices.create("robots", where=where)
        except QueryError as err:
            print("refused:", err)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "MAX_QUERY_OPERATORS" in done.stdout


def test_sizes_below_the_limits_still_run(robots: DatasetEntry) -> None:
    catalog = Catalog.open(robots.catalog.url)
    chain = " + ".join(["1"] * 200)
    assert catalog.sql(f"SELECT {chain} AS n").to_arrow_table().column("n").to_pylist() == [200]
    where = " OR ".join(f"rerun_segment_id = 'ep{i}'" for i in range(200))
    made = rayform.Client(robots.catalog.url).slices.create("robots", where=where)
    assert sorted(made.segment_ids) == ["ep0", "ep1", "ep2"]


def test_operators_inside_strings_and_quoted_names_do_not_count() -> None:
    text = "'" + "+" * (MAX_QUERY_OPERATORS * 3) + "'"
    check_query_size(f'SELECT {text} AS "a+b-c" -- {"+" * 5000}', what="q")
    with pytest.raises(QueryError, match="MAX_QUERY_OPERATORS"):
        check_query_size("SELECT " + " OR ".join(["true"] * (MAX_QUERY_OPERATORS + 2)), what="q")


def test_a_query_over_one_mebibyte_is_refused(robots: DatasetEntry) -> None:
    catalog = Catalog.open(robots.catalog.url)
    with pytest.raises(QueryError, match="MAX_QUERY_BYTES"):
        catalog.sql("SELECT 1" + " " * (10 << 20))


def test_the_memory_pool_bounds_a_large_sort(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("RAYFORM_SQL_MEMORY_BYTES", str(1 << 20))
    catalog = Catalog.create(tmp_path / "c")
    with pytest.raises(QueryError, match="RAYFORM_SQL_MEMORY_BYTES"):
        catalog.sql("SELECT value FROM range(5000000) ORDER BY value DESC").to_arrow_table()


def test_memory_limit_setting_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_SQL_MEMORY_BYTES", "lots")
    with pytest.raises(ConfigError, match="RAYFORM_SQL_MEMORY_BYTES='lots'"):
        memory_limit_bytes()
    monkeypatch.delenv("RAYFORM_SQL_MEMORY_BYTES")
    assert 1 << 28 <= memory_limit_bytes() <= 4 << 30


def test_timeout_cancels_an_unbounded_query(tmp_path: Path) -> None:
    catalog = Catalog.create(tmp_path / "c")
    started = time.monotonic()
    with pytest.raises(QueryError, match=r"timeout_s=0\.5"):
        catalog.sql("SELECT count(*) FROM range(1000000000000)", timeout_s=0.5).to_arrow_table()
    assert time.monotonic() - started < 30
    assert catalog.sql("SELECT 1 AS x", timeout_s=5).to_arrow_table().num_rows == 1


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True, "5"])
def test_timeout_is_validated(tmp_path: Path, bad: object) -> None:
    catalog = Catalog.create(tmp_path / "c")
    with pytest.raises(ConfigError, match="timeout_s"):
        catalog.sql("SELECT 1", timeout_s=bad)  # type: ignore[arg-type]


def test_cli_sql_timeout(tmp_path: Path) -> None:
    Catalog.create(tmp_path / "c")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from rayform.cli import main; sys.exit(main())",
         "--catalog", str(tmp_path / "c"), "sql",
         "--timeout", "0.5", "SELECT count(*) FROM range(1000000000000)"],
        capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(_ROOT), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "timeout_s=0.5" in done.stderr, done.stderr
