"""The command uses what the catalog knows: recorded frame rates, LeRobot feature keys, vector
widths and joint names, SQL introspection."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cli_support import REPO

from rayform.catalog import Catalog, RecordingWriter, compute_statistics
from rayform.cli import main

G1 = REPO.parent / "shared" / "realdata" / "unitree-g1-lerobot-v21"


def _catalog(tmp_path: Path, *, fps: list[float | None]) -> str:
    cat = tmp_path / "cat"
    paths = []
    for i, rate in enumerate(fps):
        path = tmp_path / f"r{i}.rfr"
        with RecordingWriter(path, recording_id=f"r{i}") as rec:
            if rate is not None:
                rec.set_properties(fps=rate)
            rec.log_scalars("/arm", timelines={"frame_index": np.arange(6)},
                            values=np.arange(18.0).reshape(6, 3))
            rec.log_static("/arm", components={"SeriesLines:names": pa.array([["a", "b", "c"]])})
        paths.append(str(path))
    Catalog.create(cat).create_dataset("arm").register(paths)
    return str(cat)


def test_export_lerobot_takes_the_recorded_frame_rate(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cat = _catalog(tmp_path, fps=[10.0, 10.0])
    assert main(["--catalog", cat, "export", "lerobot", "arm", str(tmp_path / "out")]) == 0
    assert "using --fps 10: every segment's property:fps" in capsys.readouterr().err
    info = json.loads((tmp_path / "out" / "meta" / "info.json").read_text())
    assert info["fps"] == 10


@pytest.mark.parametrize(("fps", "why"), [
    ([None, None], "no segment has property:fps"),
    ([10.0, 15.0], "the segments' property:fps differ: ['10.0', '15.0']"),
])
def test_export_lerobot_asks_for_fps_only_when_the_catalog_cannot_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fps: list[float | None],
        why: str) -> None:
    cat = _catalog(tmp_path, fps=fps)
    assert main(["--catalog", cat, "export", "lerobot", "arm", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"rayform export: error: export lerobot needs --fps, the frame rate of the LeRobot "
        f"dataset's grid ({why})\n")


def test_schema_shows_vector_widths_and_dimension_names(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    cat = _catalog(tmp_path, fps=[None])
    assert main(["--catalog", cat, "schema", "arm", "--format", "json"]) == 0
    rows = {r["column"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["/arm:Scalars:scalars"]["type"] == "list<double>[3]"
    assert rows["/arm:Scalars:scalars"]["names"] == "a, b, c"
    assert rows["/arm:SeriesLines:names"]["type"] == "list<string>"
    assert rows["frame_index"]["names"] is None


def test_information_schema_lists_the_datasets_tables(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cat = _catalog(tmp_path, fps=[None])
    assert main(["--catalog", cat, "sql", "SELECT table_schema, table_name FROM "
                 "information_schema.tables WHERE table_schema = 'arm' ORDER BY 2",
                 "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [{"table_schema": "arm", "table_name": t}
                                        for t in ("/arm", "annotations", "findings",
                                                  "index_ranges", "segments")]
    assert captured.err == ""  # DataFusion printed "Unable to get table_names" here


@pytest.mark.realdata
def test_real_lerobot_stats_export_and_schema_use_its_metadata(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not G1.is_dir():
        pytest.skip(f"real data not found at {G1}")
    cat = Catalog.create(tmp_path / "cat")
    with pytest.warns(Warning, match="partial LeRobot dataset"):
        cat.create_dataset("g1").register([str(G1)])
    stats = compute_statistics(cat.get_dataset("g1"))
    lerobot = stats.to_lerobot()  # no feature_names: the keys come from the import
    assert set(lerobot) == {"observation.state", "action", "timestamp"}  # raw times kept
    assert lerobot["action"]["count"] == [221 + 277] and len(lerobot["action"]["mean"]) == 26
    assert main(["--catalog", str(tmp_path / "cat"), "schema", "g1"]) == 0
    out = capsys.readouterr().out
    assert "list<float>[26]" in out and "kLeftShoulderPitch, kLeftShoulderRoll" in out
    assert main(["--catalog", str(tmp_path / "cat"), "export", "lerobot", "g1",
                 str(tmp_path / "out")]) == 0
    assert "using --fps 30" in capsys.readouterr().err
