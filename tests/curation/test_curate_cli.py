"""``rayform curate`` and ``rayform annotate``: the JSON schema, exit codes, and findings equal
to what Python and SQL give."""

from __future__ import annotations

import json

import pytest

from rayform.catalog import DatasetEntry
from rayform.cli import main
from rayform.curation import curate

pytestmark = pytest.mark.realdata
KEYS = ["segment", "check", "severity", "dims", "start_row", "end_row", "start_ns", "end_ns",
        "message"]


def test_cli_json_matches_python_and_sql(defect_dataset: DatasetEntry,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    url = defect_dataset.catalog.url
    code = main(["--catalog", url, "curate", "g1", "--video", "off", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # errors at the default --fail-on error
    assert set(out) == {"dataset", "version", "coverage", "segments", "findings"}
    assert out["coverage"]["registered"] == 16
    assert {s["segment"]: s["verdict"] for s in out["segments"]}["episode_000009"] == "ok"
    python = curate(defect_dataset, video="off", persist=False).findings.select(KEYS).to_pylist()
    sql = defect_dataset.catalog.sql("SELECT * FROM g1.findings").to_arrow_table()
    cli = [{k: f[k] for k in KEYS} for f in out["findings"]]
    assert sorted(map(str, cli)) == sorted(map(str, python)) == \
        sorted(map(str, sql.select(KEYS).to_pylist()))


def test_cli_exit_codes(real_dataset: DatasetEntry, capsys: pytest.CaptureFixture[str]) -> None:
    url = real_dataset.catalog.url
    assert main(["--catalog", url, "curate", "g1", "--video", "off", "--fail-on",
                 "warning"]) == 0
    assert "2 registered of 100 declared" in capsys.readouterr().out
    assert main(["--catalog", url, "curate", "g1", "--checks", "nope.*"]) == 1  # ConfigError
    with pytest.raises(SystemExit) as usage:
        main(["--catalog", url, "curate", "g1", "--fail-on", "sometimes"])
    assert usage.value.code == 2
    assert main(["--catalog", url, "curate", "g1", "--checks", "video.*", "--video",
                 "off"]) == 3  # nothing checkable: the only checks chosen are off
    real_dataset.catalog.create_dataset("empty")  # type: ignore[attr-defined]
    assert main(["--catalog", url, "curate", "empty"]) == 3


def test_annotate_cli_and_sql(real_dataset: DatasetEntry,
                              capsys: pytest.CaptureFixture[str]) -> None:
    url = real_dataset.catalog.url
    assert main(["--catalog", url, "annotate", "g1", "episode_000029", "30", "90", "grasp",
                 "--attr", "who=alice"]) == 0
    real_dataset.annotate("episode_000030", 0, 10, "reach", note="slow")
    rows = real_dataset.catalog.sql(
        "SELECT segment, label, start_row, end_row, start_ns, attrs FROM g1.annotations "
        "ORDER BY segment").to_arrow_table().to_pylist()
    assert [(r["segment"], r["label"], r["start_row"], r["end_row"]) for r in rows] == [
        ("episode_000029", "grasp", 30, 90), ("episode_000030", "reach", 0, 10)]
    assert rows[0]["start_ns"] == pytest.approx(1e9, abs=1e5)
    assert json.loads(rows[0]["attrs"]) == {"who": "alice"}
    assert main(["--catalog", url, "annotate", "g1", "episode_000029", "9", "3", "x"]) == 1
    assert "must be after start" in capsys.readouterr().err
