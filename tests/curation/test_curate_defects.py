"""Each injected defect is found by the right check, on the right segment, dimension and rows
(±1 row); the unmodified copies stay quiet; the findings are the same from Python and SQL."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from defects import CLEAN, DEFECTS, Defect

from rayform.catalog import DatasetEntry
from rayform.curation import CurationResult, curate

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def result(defect_dataset: DatasetEntry) -> CurationResult:
    return curate(defect_dataset, video="off")


def _matches(row: dict[str, Any], defect: Defect) -> bool:
    if row["segment"] != defect.segment or row["check"] != defect.check:
        return False
    if defect.column is not None and row["column"] != defect.column:
        return False
    if defect.dim is not None and defect.dim not in (row["dims"] or []):
        return False
    if defect.rows is None:
        return True
    if row["start_row"] is None or row["end_row"] is None:
        return False
    return abs(row["start_row"] - defect.rows[0]) <= 1 and abs(row["end_row"] - defect.rows[1]) <= 1


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.check + f"@{d.episode}" for d in DEFECTS])
def test_defect_found(result: CurationResult, defect: Defect) -> None:
    rows = result.findings.to_pylist()
    there = [(r["check"], r["dims"], r["start_row"], r["end_row"]) for r in rows
             if r["segment"] == defect.segment]
    assert any(_matches(r, defect) for r in rows), f"{defect.check} not on {defect.segment}: {there}"


def test_defect_verdicts(result: CurationResult) -> None:
    errors = {d.segment for d in DEFECTS if d.check in (
        "values.nonfinite", "values.offset", "values.scale", "series.frozen")}
    for segment in errors:
        assert result.verdict(segment).verdict == "exclude"
    assert result.verdict("episode_000008").verdict == "review"  # too short: a warning
    assert result.verdict("episode_000007").verdict == "ok"      # idle head: info, a range


def test_clean_copies_quiet(result: CurationResult) -> None:
    clean = {f"episode_{i:06d}" for i in CLEAN}
    loud = [r for r in result.at_least("warning").to_pylist() if r["segment"] in clean]
    assert loud == []
    assert all(result.verdict(s).verdict == "ok" for s in clean)


def test_findings_in_sql_match_python(defect_dataset: DatasetEntry, result: CurationResult) -> None:
    catalog = defect_dataset.catalog
    sql = catalog.sql("SELECT * FROM g1.findings WHERE severity = 'error' "
                      "ORDER BY segment, \"check\", start_row").to_arrow_table()
    mine = result.at_least("error")
    assert sql.num_rows == mine.num_rows > 0
    keys = ["segment", "check", "dims", "start_row", "end_row", "start_ns", "end_ns", "value"]
    assert sorted(map(str, sql.select(keys).to_pylist())) == \
        sorted(map(str, mine.select(keys).to_pylist()))
    assert defect_dataset.findings().num_rows == result.findings.num_rows


def test_second_run_reuses_every_segment(defect_dataset: DatasetEntry,
                                         result: CurationResult) -> None:
    again = curate(defect_dataset, video="off")
    assert again.coverage["reused"] == len(defect_dataset.segment_ids())
    keys = ["segment", "check", "dims", "start_row", "end_row", "message"]
    assert sorted(map(str, again.findings.select(keys).to_pylist())) == \
        sorted(map(str, result.findings.select(keys).to_pylist()))


def test_ranges_in_ns(result: CurationResult) -> None:
    nan = next(r for r in result.findings.to_pylist() if r["check"] == "values.nonfinite")
    assert nan["timeline"] == "frame_index" and nan["time_timeline"] == "timestamp"
    assert nan["start_ns"] == pytest.approx(100 / 30 * 1e9, abs=1e5)
    assert nan["end_ns"] == pytest.approx(109 / 30 * 1e9, abs=1e5)  # half-open: last row + 1 ns


def test_check_selection(defect_dataset: DatasetEntry) -> None:
    only = curate(defect_dataset, checks=["values.*", "-values.dead"], video="off",
                  persist=False)
    assert set(only.findings.column("check").to_pylist()) <= {
        "values.nonfinite", "values.offset", "values.scale"}
    status = {c["id"]: c for c in only.coverage["checks"]}
    assert not status["series.frozen"]["ran"] and "not selected" in status["series.frozen"]["reason"]
    assert isinstance(only.findings, pa.Table)


def test_shape_checks_only_where_injected(result: CurationResult) -> None:
    # a spike's return (episode 4) and a 5-row gap (5) are no seam; the copies of the same
    # real episode with a different number of head rows dropped are no duplicates
    rows = result.findings.to_pylist()
    assert {r["segment"] for r in rows if r["check"] == "episode.merged"} == {"episode_000013"}
    [dup] = [r for r in rows if r["check"] == "episode.duplicate"]
    assert dup["segment"] == "episode_000014" and "episode_000010" in dup["message"]
    assert dup["value"] <= dup["threshold"] == pytest.approx(1e-3)
