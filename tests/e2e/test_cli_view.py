"""Looking at the data: ``rayform view`` (a .rrd and the Rerun viewer), ``stats --plot``, ``demo``."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_support import RunCli

from rayform.catalog import Catalog
from rayform.cli import main


def test_view_without_a_display_writes_a_recording_rerun_reads(robots: str, tmp_path: Path,
                                                               run_cli: RunCli) -> None:
    rerun_chunk = pytest.importorskip("rerun.chunk")
    cache = tmp_path / "cache"
    proc = run_cli("--catalog", robots, "view", "robots", "e1",
                   env={"DISPLAY": None, "WAYLAND_DISPLAY": None, "RAYFORM_CACHE_DIR": str(cache)})
    rrd = cache / "view" / "robots" / "e1.rrd"
    assert (proc.returncode, proc.stdout) == (0, f"{rrd}\n"), proc.stderr
    assert proc.stderr == ("wrote the recording (no display: DISPLAY and WAYLAND_DISPLAY are "
                           f"unset); open it where there is a display with: rerun {rrd}\n")
    assert [r.recording_id for r in rerun_chunk.RrdReader(rrd).recordings()] == ["e1"]
    back = Catalog.open(robots).create_dataset("back")
    back.register([str(rrd)])
    column = "/joints/position:Scalars:scalars"
    original = Catalog.open(robots).get_dataset("robots").open_segment("e1")
    assert (back.open_segment("e1").column(column, "frame_index").values.to_pylist()
            == original.column(column, "frame_index").values.to_pylist())


def test_view_with_a_display_starts_the_viewer_on_the_file(robots: str, tmp_path: Path,
                                                           run_cli: RunCli) -> None:
    pytest.importorskip("rerun")
    called = tmp_path / "viewer-args.txt"
    viewer = tmp_path / "viewer.py"
    viewer.write_text(f"import sys\nopen({str(called)!r}, 'w').write(' '.join(sys.argv[1:]))\n")
    out = tmp_path / "e0.rrd"
    proc = run_cli("--catalog", robots, "view", "robots", "e0", "--out", str(out),
                   env={"DISPLAY": ":0", "RAYFORM_VIEWER": f"{sys.executable} {viewer}"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, f"{out}\n", "opening it in the Rerun viewer\n")
    deadline = time.monotonic() + 60
    while not called.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert called.read_text() == str(out)
    proc = run_cli("--catalog", robots, "view", "robots", "e0", "--out", str(out), "--no-spawn")
    assert (proc.returncode, proc.stderr) == (
        1, f"rayform view: error: {out} exists; pass --force to overwrite it\n")


def test_stats_plot_writes_a_png(robots: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "plots" / "stats.png"
    assert main(["--catalog", robots, "stats", "robots", "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"wrote {png}\n" and "/joints/position:Scalars:scalars" in captured.out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    height, width, _ = imread(png).shape
    assert (width, height) == (800, 320)  # 8 x (2.6 + 0.6 for the legend) inches at 100 dpi


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start):text.index(end)]


def test_demo_keeps_or_rewrites_and_its_next_steps_run(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("av")
    cat = tmp_path / "demo"
    assert main(["--catalog", str(cat), "demo", "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "the SQL behind this summary:\n  SELECT \"property:task\" AS task," in out
    assert "  warm epoch: " in out and "  cold first epoch: " in out

    sql_line = _between(out, "  1. query it from the shell:\n", "\n  2.").strip()
    python = textwrap.dedent(_between(out, "  2. load it in Python (README.md, docs/dataloader.md):\n",
                                      "  3. look at an episode"))
    view_line = out.split("  3. look at an episode in the Rerun viewer:\n")[1].strip()
    assert view_line == f"rayform --catalog {cat} view demo episode_000"
    words = shlex.split(sql_line)
    assert words[0] == "rayform" and main(words[1:]) == 0
    assert "episode_001" in capsys.readouterr().out
    exec(compile(python, "next-steps", "exec"), {})
    assert capsys.readouterr().out == "torch.Size([32, 16, 7])\n"

    assert main(["--catalog", str(cat), "demo", "--episodes", "6"]) == 0
    again = capsys.readouterr()  # one line, and none of the work again
    assert (again.out, again.err) == ("", (
        f"kept the existing demo dataset at {cat}: 2 episodes (not 6); --replace rewrites it "
        "with --episodes N\n"))
    assert len(Catalog.open(cat).get_dataset("demo").segment_ids()) == 2
    assert main(["--catalog", str(cat), "demo", "--episodes", "1", "--replace"]) == 0
    assert Catalog.open(cat).get_dataset("demo").segment_ids() == ["episode_000"]


def test_view_with_a_dead_viewer_says_so_and_keeps_the_recording(robots: str, tmp_path: Path,
                                                                 run_cli: RunCli) -> None:
    pytest.importorskip("rerun")
    viewer = tmp_path / "viewer.py"
    viewer.write_text("import sys\nprint('Error: failed to open a window: no X server', "
                      "file=sys.stderr)\nsys.exit(3)\n")
    out = tmp_path / "e0.rrd"
    proc = run_cli("--catalog", robots, "view", "robots", "e0", "--out", str(out),
                   env={"DISPLAY": ":99", "RAYFORM_VIEWER": f"{sys.executable} {viewer}"})
    assert (proc.returncode, proc.stdout) == (1, f"{out}\n")
    assert proc.stderr == (
        "rayform view: error: the Rerun viewer exited with status 3: Error: failed to open a "
        f"window: no X server; the recording is kept at {out}; open it where a viewer can run "
        f"with: rerun {out}\n")
    assert out.stat().st_size > 0
    missing = tmp_path / "no-such-viewer"
    proc = run_cli("--catalog", robots, "view", "robots", "e0", "--out", str(out), "--force",
                   env={"DISPLAY": ":99", "RAYFORM_VIEWER": str(missing)})
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"rayform view: error: the Rerun viewer did not start "
                                  f"({missing}: No such file or directory); the recording is "
                                  f"kept at {out}"), proc.stderr


def test_demo_shows_progress_and_cleans_up_after_a_killed_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("av")
    import subprocess
    import tempfile

    from rayform.demo import DemoSpec, build_demo, loader_pass

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    killed = tmp_path / "tmp" / f"rayform-demo-{int(gone.stdout)}-abc"  # a SIGKILLed run's
    (killed / "episode_000.rfr").parent.mkdir()
    (killed / "episode_000.rfr").write_bytes(b"partial")
    running = tmp_path / "tmp" / f"rayform-demo-{os.getpid()}-def"  # a run still going
    running.mkdir()
    dataset = build_demo(str(tmp_path / "cat"), DemoSpec(num_episodes=1), progress=True)
    assert not killed.exists() and running.is_dir()
    assert list((tmp_path / "tmp").iterdir()) == [running]  # and its own staging is gone
    assert "write episodes" in capsys.readouterr().err
    loader_pass(dataset, progress=True)
    err = capsys.readouterr().err
    assert "cold epoch" in err and "warm epoch" in err
