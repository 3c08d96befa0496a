"""The ``rayform`` command end to end: init, register, listings, SQL, stats, exports, slices, demo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rayform.catalog import Catalog, RecordingWriter
from rayform.cli import main


def _recording(path: Path, recording_id: str, *, success: bool) -> Path:
    with RecordingWriter(path, recording_id=recording_id) as rec:
        rec.set_properties(task="pick", success=success)
        rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(5)},
                        values=np.arange(35, dtype=np.float64).reshape(5, 7))
    return path


def test_init_register_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = str(tmp_path / "cat")
    assert main(["--catalog", cat, "init"]) == 0
    recs = [str(_recording(tmp_path / f"e{i}.rfr", f"e{i}", success=i == 0)) for i in range(2)]
    assert main(["--catalog", cat, "register", "robots", *recs, "--create"]) == 0
    assert Catalog.open(cat).get_dataset("robots").segment_ids() == ["e0", "e1"]
    capsys.readouterr()

    assert main(["--catalog", cat, "datasets"]) == 0
    out = capsys.readouterr().out
    assert "robots" in out and "| 2 " in out

    assert main(["--catalog", cat, "segments", "robots"]) == 0
    out = capsys.readouterr().out
    assert "e0" in out and "e1" in out and "property:task" in out

    assert main(["--catalog", cat, "schema", "robots"]) == 0
    out = capsys.readouterr().out
    assert "/joints/position:Scalars:scalars" in out and "frame_index" in out

    query = 'SELECT rerun_segment_id FROM robots.segments WHERE "property:success" = $ok'
    assert main(["--catalog", cat, "sql", query, "--param", "ok=true"]) == 0
    out = capsys.readouterr().out
    assert out == "rerun_segment_id\n----------------\ne0\n(1 row)\n"


def test_errors_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = str(tmp_path / "cat")
    main(["--catalog", cat, "init"])
    capsys.readouterr()
    assert main(["--catalog", cat, "sql", "SELEC nonsense"]) == 1
    assert "SQL" in capsys.readouterr().err
    assert main(["--catalog", cat, "register", "robots", str(tmp_path / "missing.rfr"),
                 "--create"]) == 1
    assert "missing.rfr" in capsys.readouterr().err
    assert main(["--catalog", cat, "segments", "nope"]) == 1
    assert "nope" in capsys.readouterr().err
    missing = str(tmp_path / "not-a-catalog")
    assert main(["--catalog", missing, "datasets"]) == 1
    err = capsys.readouterr().err
    assert "`rayform init PATH`" in err and "Traceback" not in err
    assert main(["init", missing]) == 0  # the command the message names works as written
    assert main(["--catalog", missing, "datasets"]) == 0


def test_demo_writes_catalog_and_prints_summary(tmp_path: Path) -> None:
    pytest.importorskip("av")
    pytest.importorskip("PIL")
    cat = tmp_path / "demo-cat"
    proc = subprocess.run([sys.executable, "-m", "rayform.cli", "--catalog", str(cat), "demo"],
                          capture_output=True, text=True, check=False, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "pick up the red cube" in proc.stdout and "open the drawer" in proc.stdout
    # 4 episodes x 4 s on a 15 Hz grid, trimmed by the 15-step action window: 4 x (60 - 15)
    assert "a shuffled epoch on a 15 Hz grid: 180 samples" in proc.stdout
    assert "  warm epoch: " in proc.stdout and "  cold first epoch: " in proc.stdout
    # episode 3 ("open the drawer") is the one failure: 1 of 2 drawer episodes succeed
    assert any(line.startswith("open the drawer") and "| 1 " in line
               for line in proc.stdout.splitlines())
    assert "action  (32, 16, 7) float32" in proc.stdout
    assert "wrist   (32, 3, 224, 224) uint8" in proc.stdout
    dataset = Catalog.open(cat).get_dataset("demo")
    assert len(dataset.segment_ids()) == 4
    columns = set(dataset.schema().component_columns())
    assert {"/joints/position:Scalars:scalars", "/cam0/rgb:EncodedImage:blob",
            "/wrist/rgb:VideoStream:sample", "/wrist/rgb:VideoStream:is_keyframe"} <= columns
    seg = dataset.open_segment(dataset.segment_ids()[0])
    joints = seg.column("/joints/position:Scalars:scalars", "real_time")
    cam = seg.column("/cam0/rgb:EncodedImage:blob", "real_time")
    keyframes = seg.column("/wrist/rgb:VideoStream:is_keyframe", "real_time")
    assert len(joints) == 400 and len(cam) == 120 and len(keyframes) == 120
    # 100 Hz joints, 30 Hz cameras
    assert np.all(np.diff(joints.index) == 10_000_000)
    assert abs(float(np.median(np.diff(cam.index))) - 1e9 / 30) < 1
    flags = [row[0] for row in keyframes.values.to_pylist()]
    assert flags[0] is True and sum(flags) == 4  # GOP 30 over 120 frames


def test_stats_and_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = str(tmp_path / "cat")
    main(["--catalog", cat, "init"])
    recs = [str(_recording(tmp_path / f"e{i}.rfr", f"e{i}", success=True)) for i in range(2)]
    main(["--catalog", cat, "register", "robots", *recs, "--create"])
    capsys.readouterr()

    assert main(["--catalog", cat, "stats", "robots", "--per-segment"]) == 0
    out = capsys.readouterr().out
    # both recordings hold 0..34 as a 5x7 matrix: column minima 0..6, maxima 28..34
    for dim in range(7):
        assert f"\n{dim}   | {dim}.0 | {28 + dim}.0 |" in out
    assert out.count("(7 rows)") == 3  # overall + two segments, a row per dimension

    out_dir = tmp_path / "lerobot"
    assert main(["--catalog", cat, "export", "lerobot", "robots", str(out_dir), "--fps", "10"]) == 0
    assert "2 episodes" in capsys.readouterr().out
    assert (out_dir / "meta" / "info.json").is_file()

    assert main(["--catalog", cat, "export", "lerobot", "robots", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == ("rayform export: error: export lerobot needs --fps, the "
                                       "frame rate of the LeRobot dataset's grid (no segment has "
                                       "property:fps)\n")
    pytest.importorskip("rerun")
    rrd = tmp_path / "e0.rrd"
    assert main(["--catalog", cat, "export", "rrd", "robots", str(rrd), "--segment", "e0"]) == 0
    assert rrd.is_file() and rrd.stat().st_size > 0


def test_slices_and_pull(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = str(tmp_path / "cat")
    main(["--catalog", cat, "init"])
    recs = [str(_recording(tmp_path / f"e{i}.rfr", f"e{i}", success=i == 1)) for i in range(3)]
    main(["--catalog", cat, "register", "robots", *recs, "--create"])
    capsys.readouterr()

    assert main(["--catalog", cat, "slices", "create", "robots", "--where",
                 '"property:success" = $ok', "--param", "ok=true", "--name", "good"]) == 0
    slice_id = capsys.readouterr().out.strip()
    assert slice_id.startswith("slc_")
    assert main(["--catalog", cat, "slices", "list"]) == 0
    listing = capsys.readouterr().out
    assert slice_id in listing and "good" in listing
    assert main(["--catalog", cat, "slices", "show", slice_id]) == 0
    shown = capsys.readouterr().out
    assert "e1" in shown and "e0" not in shown
    assert main(["--catalog", cat, "pull", slice_id]) == 0
    assert slice_id in capsys.readouterr().out
    assert main(["--catalog", cat, "slices", "show", "slc_00000000"]) == 1
    assert "slc_00000000" in capsys.readouterr().err


def test_export_picks_the_timeline_every_stream_shares(tmp_path: Path) -> None:
    """Joints only on ``real_time``, a camera-like stream on ``real_time`` and ``frame_index``."""
    cat = tmp_path / "cat"
    ds = Catalog.create(cat).create_dataset("mixed")
    t_fast = (np.arange(100) * 10_000_000).astype("datetime64[ns]")
    t_slow = (np.arange(30) * 33_333_333).astype("datetime64[ns]")
    with RecordingWriter(tmp_path / "m.rfr", recording_id="m0") as rec:
        rec.log_scalars("/joints", timelines={"real_time": t_fast}, values=np.ones((100, 3)))
        rec.log_scalars("/slow", timelines={"real_time": t_slow, "frame_index": np.arange(30)},
                        values=np.arange(30.0))
    ds.register([str(tmp_path / "m.rfr")]).wait()
    out = tmp_path / "out"
    assert main(["--catalog", str(cat), "export", "lerobot", "mixed", str(out), "--fps", "10"]) == 0
    import json

    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 1 and info["total_frames"] >= 9
