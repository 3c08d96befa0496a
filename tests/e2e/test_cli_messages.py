"""The command speaks in its own terms: options not keyword arguments, suggestions, what it did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_support import REPO, RunCli

from rayform.catalog import Catalog, RecordingWriter
from rayform.cli import main
from rayform.cli._output import printable
from rayform.importers._base import NativeImporter
from rayform.storage._store import object_key

G1 = REPO.parent / "shared" / "realdata" / "unitree-g1-lerobot-v21"
needs_g1 = pytest.mark.skipif(not G1.is_dir(), reason=f"real data not found at {G1}")


def _sources(robots: str) -> list[str]:
    return [str(Path(robots).parent / f"e{i}.rfr") for i in range(2)]


def test_a_duplicate_names_the_option_and_is_found_before_converting(
        robots: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_conversion(self: object, path: Path, staging: Path) -> list[Path]:
        raise AssertionError(f"{path} was converted although it is registered")

    monkeypatch.setattr(NativeImporter, "convert", no_conversion)
    assert main(["--catalog", robots, "register", "robots", *_sources(robots)]) == 1
    err = capsys.readouterr().err
    assert err == ("rayform register: error: segment 'e0' layer 'base' is already registered; "
                   "pass --on-duplicate replace to overwrite it, or --on-duplicate skip to keep "
                   "it\n")
    assert main(["--catalog", robots, "register", "robots", *_sources(robots),
                 "--on-duplicate", "skip"]) == 0
    out, err = capsys.readouterr()
    assert f"skipped {_sources(robots)[0]}: already registered in layer 'base' (e0)\n" in err
    assert f"skipped {_sources(robots)[1]}: already registered in layer 'base' (e1)\n" in err
    assert out == ("registered nothing into 'robots': all 2 source(s) are there already; "
                   "--on-duplicate replace overwrites them\n")
    # the Python API skips before converting too, and lists the skipped segments (as Rerun does)
    dataset = Catalog.open(robots).get_dataset("robots")
    handle = dataset.register(_sources(robots), on_duplicate="skip")
    assert handle.wait().segment_ids == ["e0", "e1"]
    assert [r.uri for r in handle.iter_results()] == _sources(robots)


def test_skip_registers_the_new_and_names_the_skipped(robots: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    new = tmp_path / "e2.rfr"
    with RecordingWriter(new, recording_id="e2") as rec:
        rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(5)},
                        values=np.zeros((5, 7)))
    assert main(["--catalog", robots, "register", "robots", _sources(robots)[0], str(new),
                 "--on-duplicate", "skip"]) == 0
    out, err = capsys.readouterr()
    assert "already registered in layer 'base' (e0)" in err
    assert out == "registered 1 segment(s) into 'robots': e2\n"


@needs_g1
def test_warnings_are_lines_of_the_command(tmp_path: Path, run_cli: RunCli) -> None:
    cat = tmp_path / "cat"
    Catalog.create(cat)
    proc = run_cli("--catalog", str(cat), "register", "g1", str(G1), "--create")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"warning: {G1}: partial LeRobot dataset: registering the 2 "
                               "episodes present"), proc.stderr
    assert "ConversionWarning" not in proc.stderr and ".py:" not in proc.stderr
    # registered again with skip: found before converting, so no conversion warning either
    proc = run_cli("--catalog", str(cat), "register", "g1", str(G1), "--on-duplicate", "skip")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert "episode_000029, episode_000030" in proc.stderr


def test_a_mistyped_command_or_choice_gets_a_suggestion(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    for args, wrong, meant in ((["segmnts"], "segmnts", "segments"),
                               (["export", "lerobo", "d", "out"], "lerobo", "lerobot"),
                               (["slices", "lst"], "lst", "list")):
        with pytest.raises(SystemExit) as stop:
            main(args)
        assert stop.value.code == 2
        assert f"no such choice {wrong!r}; did you mean {meant!r}?" in capsys.readouterr().err


def test_sql_on_a_missing_table_lists_what_there_is(robots: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--catalog", robots, "sql", "SELECT * FROM robot.segments"]) == 1
    err = capsys.readouterr().err
    assert "table 'datafusion.robot.segments' not found; datasets: ['robots'], each a schema " \
           "with the tables DATASET.segments, DATASET.index_ranges" in err


def test_check_names_the_dataset_and_segment_of_a_damaged_object(
        robots: str, capsys: pytest.CaptureFixture[str]) -> None:
    record = Catalog.open(robots).get_dataset("robots").segment_record("e1")
    damaged = Path(robots) / object_key(record.layers["base"].object)
    damaged.chmod(0o644)
    damaged.write_bytes(damaged.read_bytes() + b"x")
    assert main(["--catalog", robots, "check"]) == 1
    out = capsys.readouterr().out
    assert "damaged: its content hashes to" in out
    assert "it holds dataset 'robots': segment 'e1' (layer 'base')" in out


def test_nanosecond_times_print_exactly_without_python_time_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Arrow's Python values of ns durations are pandas objects, or without pandas a crash
    ("Nanosecond duration … not safely convertible"): times are printed from Arrow instead."""
    cat = tmp_path / "cat"
    with RecordingWriter(tmp_path / "r.rfr", recording_id="r0") as rec:
        rec.log_scalars("/x", timelines={"t": np.array([0, 7_333_333_333], "timedelta64[ns]")},
                        values=np.zeros((2, 1)))
    Catalog.create(cat).create_dataset("d").register([str(tmp_path / "r.rfr")])
    table = Catalog.open(cat).get_dataset("d").segment_table_arrow()
    for text in (True, False):
        kinds = [f.type for f in printable(table, text=text).schema]
        assert not any(pa.types.is_temporal(k) for k in kinds), kinds
    for fmt, expected in (("table", "| 7.333333333s"), ("csv", ",0.0,7.333333333"),
                          ("json", '"t:start": 0.0, "t:end": 7.333333333')):
        assert main(["--catalog", str(cat), "segments", "d", "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert expected in out, out
