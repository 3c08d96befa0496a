"""Findings written at registration (``register_checked`` / ``rayform register --curate``): the
cheap self-contained checks on the new segments, equal to what ``curate`` finds with the same
checks, merged with the other segments' findings, and healed by ``curate`` after a crash."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from defects import REAL, build_dataset

from rayform.catalog import Catalog, DatasetEntry
from rayform.cli import main
from rayform.curation import curate, register_checked
from rayform.curation._registration_checks import REGISTRATION_CHECKS
from rayform.errors import ConversionWarning

pytestmark = pytest.mark.realdata
KEYS = ["segment", "segment_version", "check", "severity", "dims", "start_row", "end_row",
        "start_ns", "end_ns", "value", "message"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not REAL.is_dir():
        pytest.skip(f"real data not available at {REAL}")
    return build_dataset(tmp_path_factory.mktemp("reg"))


def _rows(table: object) -> list[str]:
    return sorted(map(str, table.select(KEYS).to_pylist()))  # type: ignore[attr-defined]


def _new(tmp_path: Path) -> DatasetEntry:
    return Catalog.create(str(tmp_path / "catalog")).create_dataset("g1")


def test_findings_at_registration_match_curate(folder: Path, tmp_path: Path) -> None:
    dataset = _new(tmp_path)
    registered, found = register_checked(dataset, [str(folder)])
    assert len(registered.segment_ids) == 16
    checks = {r["check"] for r in found.findings.to_pylist()}
    assert {"values.nonfinite", "timing.timestamps"} <= checks <= set(REGISTRATION_CHECKS)
    sql = dataset.catalog.sql("SELECT * FROM g1.findings").to_arrow_table()
    again = curate(dataset, checks=list(REGISTRATION_CHECKS), persist=False)
    assert _rows(sql) == _rows(found.findings) == _rows(again.findings)
    assert found.verdict("episode_000000").verdict == "exclude"  # the NaN burst
    assert found.verdict("episode_000009").verdict == "ok"


def test_later_registration_keeps_earlier_findings(folder: Path, tmp_path: Path) -> None:
    dataset = _new(tmp_path)
    _, first = register_checked(dataset, [str(folder)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # the real folder: 2 of 100
        _, second = register_checked(dataset, [str(REAL)])
    assert {v.segment for v in second.verdicts} == {"episode_000029", "episode_000030"}
    sql = dataset.catalog.sql("SELECT * FROM g1.findings").to_arrow_table()
    assert _rows(sql) == sorted(_rows(first.findings) + _rows(second.findings))


def test_full_curate_after_registration(folder: Path, tmp_path: Path) -> None:
    dataset = _new(tmp_path)
    register_checked(dataset, [str(folder)])
    full = curate(dataset, video="off")
    assert full.coverage["reused"] == 0  # other checks: everything recomputed
    assert {"values.offset", "values.nonfinite"} <= set(full.findings.column("check")
                                                        .to_pylist())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        register_checked(dataset, [str(REAL)])
    sql = dataset.catalog.sql("SELECT DISTINCT segment FROM g1.findings").to_arrow_table()
    assert "episode_000001" in sql.column("segment").to_pylist()  # the full run's kept
    rerun = curate(dataset, video="off")
    assert rerun.coverage["reused"] == 16  # the new segments alone are checked again


def test_crash_between_commits_is_healed(folder: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import rayform.curation._registration_checks as reg

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt("killed between the two commits")

    monkeypatch.setattr(reg, "merge_findings", crash)
    dataset = _new(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        register_checked(dataset, [str(folder)])
    monkeypatch.undo()
    catalog = dataset.catalog
    assert isinstance(catalog, Catalog)
    assert len(catalog.get_dataset("g1").segment_ids()) == 16  # the segments landed
    assert dataset.catalog.sql("SELECT * FROM g1.findings").to_arrow_table().num_rows == 0
    healed = curate(dataset, checks=list(REGISTRATION_CHECKS))
    assert healed.findings.num_rows and healed.coverage["reused"] == 0


def test_cli_register_curate(folder: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    url = Catalog.create(str(tmp_path / "cli")).url
    code = main(["--catalog", url, "register", "g1", str(folder), "--create", "--curate"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "checked 16 segment(s)" in captured.err
    rows = Catalog.open(url).sql(
        "SELECT count(*) AS n FROM g1.findings WHERE \"check\" = 'values.nonfinite'"
    ).to_arrow_table()
    assert rows.column("n")[0].as_py() == 1
