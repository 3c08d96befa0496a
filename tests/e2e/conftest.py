"""Fixtures of the command-line tests: a small catalog, and the command in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import RunCli, write_recording
from cli_support import run_cli as run_cli_process

from rayform.cli import main


@pytest.fixture
def robots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A catalog holding dataset 'robots' with segments e0 (a success) and e1."""
    cat = str(tmp_path / "cat")
    recs = [str(write_recording(tmp_path / f"e{i}.rfr", f"e{i}", success=i == 0))
            for i in range(2)]
    assert main(["init", cat]) == 0
    assert main(["--catalog", cat, "register", "robots", *recs, "--create"]) == 0
    capsys.readouterr()
    return cat


@pytest.fixture
def run_cli() -> RunCli:
    return run_cli_process
