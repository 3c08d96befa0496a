"""The command fits the shell: help, version, output formats, terminals, pipes, option order."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import RunCli, env_with_checkout

import rayform
from rayform.catalog import Catalog, RecordingWriter
from rayform.cli import build_parser, main


def _sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _sub_parsers(sub).items()})
    return found


def test_version_and_bare_command_print_and_exit_cleanly(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"rayform {rayform.__version__}\n"
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rayform") and "demo" in out and "sql" in out


def test_every_command_and_option_has_help_and_every_command_an_example() -> None:
    commands = _sub_parsers(build_parser())
    assert {"init", "index", "register", "datasets", "segments", "schema", "sql", "stats",
            "export", "view", "slices create", "slices list", "slices show", "pull",
            "demo", "check", "gc"} <= set(commands)
    for name, parser in commands.items():
        assert parser.epilog and parser.epilog.startswith("example:\n  rayform "), name
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


def test_catalog_is_accepted_after_the_command(robots: str, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    assert main(["datasets", "--catalog", robots, "--format", "csv"]) == 0
    assert capsys.readouterr().out == "dataset,segments,version\nrobots,2,1\n"
    assert main(["slices", "list", "--catalog", robots, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("command", [
    ["sql", "SELECT rerun_segment_id, \"property:success\" FROM robots.segments ORDER BY 1"],
    ["segments", "robots"],
    ["datasets"],
    ["schema", "robots"],
    ["stats", "robots", "--per-segment"],
    ["slices", "list"],
])
def test_every_listing_prints_csv_and_json(robots: str, capsys: pytest.CaptureFixture[str],
                                           command: list[str]) -> None:
    if command[0] == "slices":
        assert main(["--catalog", robots, "slices", "create", "robots", "--name", "all"]) == 0
        capsys.readouterr()
    assert main(["--catalog", robots, *command, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert main(["--catalog", robots, *command, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and len(table) == len(rows)
    assert list(table[0]) == list(rows[0])  # same columns, same order
    if command[0] == "sql":
        assert rows == [{"rerun_segment_id": "e0", "property:success": True},
                        {"rerun_segment_id": "e1", "property:success": False}]
        assert table == [{"rerun_segment_id": "e0", "property:success": "true"},
                         {"rerun_segment_id": "e1", "property:success": "false"}]
    if command[0] == "stats":  # a row per dimension
        assert [r["min"] for r in rows[:7]] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert float(table[0]["min"]) == rows[0]["min"]


def test_a_pipe_gets_every_cell_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_entity = "/arm/" + "forearm_" * 8 + "torque"
    cat = str(tmp_path / "cat")
    with RecordingWriter(tmp_path / "r.rfr", recording_id="r0") as rec:
        rec.log_scalars(long_entity, timelines={"frame_index": np.arange(3)},
                        values=np.arange(30.0).reshape(3, 10))
    Catalog.create(cat).create_dataset("d").register([str(tmp_path / "r.rfr")])
    assert main(["--catalog", cat, "schema", "d"]) == 0
    out = capsys.readouterr().out
    column = f"{long_entity}:Scalars:scalars"
    assert len(column) > 48 and f"{column} | component" in out
    assert main(["--catalog", cat, "sql", f'SELECT * FROM d."{long_entity}" LIMIT 1']) == 0
    assert "| [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]\n" in capsys.readouterr().out  # all 10 items


def _in_terminal(args: list[str], *, columns: int) -> str:
    """Run the command with its standard output on a pseudo-terminal ``columns`` wide."""
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = env_with_checkout({"COLUMNS": str(columns), "TERM": "dumb"})
    proc = subprocess.Popen([sys.executable, "-m", "rayform.cli", *args], stdout=follower,
                            stderr=subprocess.PIPE, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command finished
            break
        if not data:
            break
        chunks.append(data)
    status = proc.wait(timeout=120)
    assert proc.stderr is not None
    with proc.stderr:
        assert status == 0, proc.stderr.read()
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_segments_fit_a_terminal(robots: str) -> None:
    out = _in_terminal(["--catalog", robots, "segments", "robots"], columns=80)
    lines = out.splitlines()
    assert any("e0" in line for line in lines) and any("e1" in line for line in lines)
    assert "rerun_storage_urls" not in out  # the wide columns wait for --all-columns
    assert max(len(line) for line in lines) <= 80, out


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    cat = str(tmp_path / "cat")
    Catalog.create(cat)
    env = env_with_checkout()
    proc = subprocess.Popen([sys.executable, "-m", "rayform.cli", "--catalog", cat, "sql",
                             "SELECT value FROM range(300000)", "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"value\n"
    proc.stdout.close()  # like `| head -1`
    assert proc.wait(timeout=120) == 0
    with proc.stderr:
        assert proc.stderr.read() == b""


def test_a_query_that_stops_early_exits_cleanly(robots: str, run_cli: RunCli) -> None:
    """LIMIT over an entity table of several segments once aborted the interpreter at exit."""
    for _ in range(3):
        proc = run_cli("--catalog", robots, "sql", 'SELECT * FROM robots."/joints/position" LIMIT 2')
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.endswith("(2 rows)\n")
