"""The command's errors: one line each, naming the problem and the fix, and side effects that match.

Each test checks the exit status and the exact standard error; none may show a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import REPO, RunCli, env_with_checkout, write_recording

from rayform.catalog import Catalog
from rayform.cli import main


def _hint(extra: str) -> str:
    return f"pip install -e '{REPO}[{extra}]'"


@pytest.mark.parametrize(("filename", "head", "blocked", "message"), [
    ("x.rrd", b"RRF2", ("rerun", "rerun.chunk"),
     f"Reading .rrd files needs the 'rerun' package: {_hint('rerun')}"),
    ("x.mcap", b"\x89MCAP0\r\n", ("mcap", "mcap.reader"),
     f"Reading MCAP files needs the 'mcap' package: {_hint('mcap')}"),
])
def test_register_without_its_extra_is_one_line(tmp_path: Path, run_cli: RunCli, filename: str,
                                                head: bytes, blocked: tuple[str, ...],
                                                message: str) -> None:
    cat = tmp_path / "cat"
    Catalog.create(cat)
    source = tmp_path / filename
    source.write_bytes(head + b"\x00" * 64)
    proc = run_cli("--catalog", str(cat), "register", "robots", str(source), "--create",
                   blocked=blocked)
    assert (proc.returncode, proc.stderr) == (1, f"rayform register: error: {message}\n")
    assert Catalog.open(cat).dataset_names() == []  # and --create created nothing


def test_export_view_ray_and_plot_without_their_extras(robots: str, tmp_path: Path,
                                                       run_cli: RunCli) -> None:
    rerun = ("rerun", "rerun.chunk")
    cases = [
        (["export", "rrd", "robots", str(tmp_path / "e0.rrd"), "--segment", "e0"], rerun,
         f"rayform export: error: Writing .rrd files needs the 'rerun' package: {_hint('rerun')}"),
        (["view", "robots", "e0", "--no-spawn"], rerun,
         f"rayform view: error: Writing .rrd files needs the 'rerun' package: {_hint('rerun')}"),
        (["stats", "robots", "--ray"], ("ray",),
         f"rayform stats: error: rayform.ray needs the 'ray' package: {_hint('ray')}"),
        (["stats", "robots", "--plot", str(tmp_path / "p.png")], ("matplotlib",),
         f"rayform stats: error: rayform stats --plot needs the 'matplotlib' package: "
         f"{_hint('plot')}"),
    ]
    for args, blocked, message in cases:
        proc = run_cli("--catalog", robots, *args, blocked=blocked)
        assert (proc.returncode, proc.stderr) == (1, message + "\n"), args
    assert not (tmp_path / "e0.rrd").exists() and not (tmp_path / "p.png").exists()


@pytest.mark.parametrize(("blocked", "named"), [
    (("av",), "PyAV ('av')"),
    (("av", "PIL"), "Pillow ('PIL'), PyAV ('av')"),
    (("torch", "PIL", "av"), "PyTorch ('torch'), Pillow ('PIL'), PyAV ('av')"),
])
def test_demo_without_its_packages_names_one_extra_and_writes_nothing(
        tmp_path: Path, run_cli: RunCli, blocked: tuple[str, ...], named: str) -> None:
    cat = tmp_path / "demo"
    proc = run_cli("--catalog", str(cat), "demo", "--episodes", "1", blocked=blocked)
    assert proc.returncode == 1
    assert proc.stderr == (f"rayform demo: error: rayform demo needs {named}: {_hint('torch')} "
                           "brings PyTorch, Pillow, PyAV\n")
    assert not cat.exists()


@pytest.mark.parametrize("module", ["rayform.torch", "rayform.dataloader", "rayform.decoders"])
def test_the_torch_surfaces_without_torch_name_the_extra(module: str) -> None:
    code = f"import sys\nsys.modules['torch'] = None\nimport {module}\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env_with_checkout(), timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (f"ImportError: {module} needs the 'torch' package: "
                                            "pip install 'rayform[torch]'")


@pytest.mark.parametrize(("args", "message"), [
    (["demo", "--episodes", "0"], "rayform demo: error: argument --episodes: must be 1 or more, "
                                  "got '0'"),
    (["sql", "SELECT 1", "--limit", "-1"], "rayform sql: error: argument --limit: must be 0 or "
                                           "more, got '-1'"),
])
def test_impossible_numbers_are_usage_errors(args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_time_ranges_take_iso_dates(robots: str, capsys: pytest.CaptureFixture[str]) -> None:
    cat = Catalog.open(robots)
    ds = cat.create_dataset("timed")
    import numpy as np

    from rayform.catalog import RecordingWriter

    t = np.datetime64("2026-01-01T00:00:00", "ns") + np.arange(5) * np.timedelta64(1, "s")
    with RecordingWriter(Path(robots).parent / "t.rfr", recording_id="t0") as rec:
        rec.log_scalars("/x", timelines={"real_time": t}, values=np.arange(5.0))
    ds.register([str(Path(robots).parent / "t.rfr")])
    assert main(["--catalog", robots, "slices", "create", "timed", "--time-range", "real_time",
                 "2026-01-01", "2026-01-01T01:00:00+01:00"]) == 0
    slice_id = capsys.readouterr().out.strip()
    assert main(["--catalog", robots, "slices", "show", slice_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["time_range"]
    midnight = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
    assert shown == {"timeline": "real_time", "start": midnight, "end": midnight}

    assert main(["--catalog", robots, "slices", "create", "timed", "--time-range", "real_time",
                 "2026-01-01", "yesterday"]) == 2
    assert capsys.readouterr().err == (
        "rayform slices create: error: --time-range: 'yesterday' is not a time: give an integer "
        "(sequence timelines, or ns), an ISO date or time such as 2026-01-01 or "
        "2026-01-01T00:01:40Z, or a duration such as 1.5s\n")


def test_sql_is_read_only_and_says_so(robots: str, capsys: pytest.CaptureFixture[str]) -> None:
    tail = ("SQL over a rayform catalog is read-only: change datasets with register / unregister "
            "(`rayform register`), or pass allow_statements=True (`rayform sql --allow-statements`) "
            "to run it with DataFusion's defaults, which may read and write any file this process "
            "can (see docs/security.md)\n")
    assert main(["--catalog", robots, "sql", "DROP TABLE robots.segments"]) == 1
    assert capsys.readouterr() == ("", "rayform sql: error: SQL query 'DROP TABLE robots.segments' "
                                       f"is a DDL statement (DropTable); {tail}")
    assert main(["--catalog", robots, "sql", "CREATE TABLE t AS SELECT 1"]) == 1
    assert capsys.readouterr() == ("", "rayform sql: error: SQL query 'CREATE TABLE t AS SELECT 1' "
                                       f"is a DDL statement (CreateMemoryTable); {tail}")
    assert main(["--catalog", robots, "sql", "CREATE TABLE t AS SELECT 1",
                 "--allow-statements"]) == 0
    assert capsys.readouterr() == ("", "statement ran (in this process's SQL session only)\n")
    assert Catalog.open(robots).table_names() == []


def test_an_upper_case_dataset_name_gets_a_hint(robots: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    rec = write_recording(tmp_path / "u.rfr", "u0", success=True)
    assert main(["--catalog", robots, "register", "Arms", str(rec), "--create"]) == 0
    capsys.readouterr()
    assert main(["--catalog", robots, "sql", "SELECT * FROM Arms.segments"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rayform sql: error: SQL query 'SELECT * FROM Arms.segments' failed: ")
    assert err.endswith('; hint: dataset names are case-sensitive and SQL folds unquoted names to '
                        'lower case: write "Arms" in double quotes, e.g. SELECT * FROM '
                        '"Arms".segments\n')
    assert main(["--catalog", robots, "sql", 'SELECT rerun_segment_id FROM "Arms".segments',
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out == "rerun_segment_id\nu0\n"


def test_export_names_the_missing_segment_and_keeps_existing_files(
        robots: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rerun")
    out = tmp_path / "e0.rrd"
    assert main(["--catalog", robots, "export", "rrd", "robots", str(out), "--segment", "nope"]) == 1
    assert capsys.readouterr().err == ("rayform export: error: no segment 'nope' in dataset "
                                       "'robots'; its segments: e0, e1 (all of them: rayform "
                                       "segments robots)\n")
    assert main(["--catalog", robots, "export", "rrd", "robots", str(out)]) == 2
    assert capsys.readouterr().err == ("rayform export: error: export rrd writes one segment; name "
                                       "it with --segment ID (dataset 'robots' has 2: e0, e1)\n")
    out.write_bytes(b"mine")
    assert main(["--catalog", robots, "export", "rrd", "robots", str(out), "--segment", "e0"]) == 1
    assert capsys.readouterr().err == (f"rayform export: error: {out} exists; pass --force to "
                                       "overwrite it\n")
    assert out.read_bytes() == b"mine"
    assert main(["--catalog", robots, "export", "rrd", "robots", str(out), "--segment", "e0",
                 "--force"]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n" and out.read_bytes()[:3] == b"RRF"


def test_a_failed_register_create_leaves_no_dataset(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cat = str(tmp_path / "cat")
    assert main(["init", cat]) == 0
    good = write_recording(tmp_path / "good.rfr", "good", success=True)
    damaged = tmp_path / "damaged.rfr"
    damaged.write_bytes(write_recording(tmp_path / "d.rfr", "d", success=True).read_bytes()[:200])
    capsys.readouterr()
    assert main(["--catalog", cat, "register", "robots", str(good), str(damaged), "--create"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rayform register: error: ") and "damaged.rfr" in err
    assert Catalog.open(cat).dataset_names() == []
    assert main(["--catalog", cat, "register", "robots", str(good), str(good), "--create"]) == 1
    assert "appears twice" in capsys.readouterr().err
    assert Catalog.open(cat).dataset_names() == []
    assert main(["--catalog", cat, "register", "robots", str(good)]) == 1
    assert capsys.readouterr().err == (f"rayform register: error: catalog {Catalog.open(cat).url} "
                                       "has no dataset 'robots'; add --create to create it, "
                                       "datasets: []\n")
    assert main(["--catalog", cat, "register", "robots", str(good), "--create"]) == 0
    assert Catalog.open(cat).get_dataset("robots").segment_ids() == ["good"]


def test_init_and_index_take_the_path_the_messages_name(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    cat = tmp_path / "published"
    assert main(["init", str(cat)]) == 0
    assert capsys.readouterr().out == f"catalog ready at {cat}\n"
    listings = sorted(cat.rglob(".listing.json"))
    assert listings
    for listing in listings:
        listing.unlink()
    assert main(["index", str(cat)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote the listing files of {len(listings)} folders")
    assert sorted(cat.rglob(".listing.json")) == listings
    assert main(["index", str(tmp_path / "nothing")]) == 1
    assert "`rayform init PATH`" in capsys.readouterr().err
