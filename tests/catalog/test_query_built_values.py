"""Scalar functions that build one huge value from a literal count (``repeat``,
``array_repeat``, ``lpad``, a scalar ``range``) bypass DataFusion's memory pool: under a memory
cap they abort the process (a Rust allocation failure). They are refused before planning with a
``QueryError`` naming ``MAX_BUILT_VALUE_BYTES``; the refusal is checked in a subprocess under a
2 GiB address-space limit, where the unchecked query aborts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rayform
from rayform.catalog import DatasetEntry
from rayform.catalog._query_values import MAX_BUILT_VALUE_BYTES, check_built_values
from rayform.errors import QueryError

_ROOT = Path(__file__).resolve().parents[2]

HUGE = [
    "SELECT length(repeat('x', 2000000000)) AS n",
    "SELECT cardinality(array_repeat(1, 2e9)) AS n",
    "SELECT cardinality(array_repeat(array_repeat(1, 100000), 100000)) AS n",
    "SELECT length(lpad('a', 1000000000)) AS n",
    "SELECT cardinality(range(10000000000)) AS n",
]

CAPPED = textwrap.dedent("""
    import json, resource, sys
    limit = 2 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import rayform
    from rayform.errors import QueryError
    from rayform.catalog import _query_values
    if sys.argv[1] == "unchecked":
        _query_values.MAX_BUILT_VALUE_BYTES = 1 << 62
    catalog = rayform.Catalog.create("cat")
    for query in json.loads(sys.argv[2]):
        try:
            catalog.sql(query).to_arrow_table()
            print(json.dumps(["ran", query]), flush=True)
        except QueryError as err:
            print(json.dumps(["QueryError", str(err)]), flush=True)
    print(json.dumps(["small", catalog.sql("SELECT length(repeat('ab', 1000)) AS n")
                                      .to_arrow_table().column("n").to_pylist()]))
""")


def _capped(tmp_path: Path, mode: str, queries: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CAPPED, mode, json.dumps(queries)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(_ROOT), "HOME": str(tmp_path),
                               "PATH": "/usr/bin:/bin"})


def test_huge_built_values_are_refused_under_a_memory_cap_not_an_abort(tmp_path: Path) -> None:
    proc = _capped(tmp_path, "checked", HUGE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [kind for kind, _ in lines] == ["QueryError"] * len(HUGE) + ["small"]
    for (_, message), query in zip(lines, HUGE, strict=False):
        assert query in message and "MAX_BUILT_VALUE_BYTES" in message, message
        assert f"the limit is {MAX_BUILT_VALUE_BYTES} bytes" in message
    assert lines[-1] == ["small", [2000]]


def test_without_the_bound_the_same_query_aborts_the_process(tmp_path: Path) -> None:
    proc = _capped(tmp_path, "unchecked", HUGE[:1])
    assert proc.returncode < 0 or "memory allocation" in proc.stderr, proc.stdout


@pytest.mark.parametrize("query", [
    "SELECT repeat('x', 1000) AS v",
    "SELECT array_repeat(1, 1000) AS v",
    "SELECT count(*) AS v FROM range(100000000000)",  # a table function: streams, no one value
    "SELECT 'repeat(1, 1e12)' AS v",  # inside a string
    "SELECT repeat(rerun_segment_id, 3) AS v FROM robots.segments",  # a count from the data
])
def test_small_or_unknown_counts_are_not_refused(query: str) -> None:
    check_built_values(query, what="q")


def test_a_parameter_count_is_bounded_and_small_queries_still_run(robots: DatasetEntry) -> None:
    catalog = robots.catalog
    with pytest.raises(QueryError, match=r"repeat .*\$n .* would build one value of about "
                                         r"3e\+09 bytes.*MAX_BUILT_VALUE_BYTES"):
        catalog.sql("SELECT repeat('abc', $n) AS v", param_values={"n": 10**9})
    got = catalog.sql("SELECT repeat('ab', $n) AS v", param_values={"n": 3}).to_arrow_table()
    assert got.column("v").to_pylist() == ["ababab"]


def test_a_slice_filter_is_bounded_too(robots: DatasetEntry) -> None:
    client = rayform.Client(robots.catalog)
    with pytest.raises(QueryError, match=r"MAX_BUILT_VALUE_BYTES"):
        client.slices.create("robots", where="length(repeat('x', 2000000000)) > 0")
