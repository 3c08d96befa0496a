"""Fixtures of the command-line tests: a small catalog, and the command run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rayform.catalog import RecordingWriter
from rayform.cli import main

REPO = Path(__file__).resolve().parents[2]


def write_recording(path: Path, recording_id: str, *, success: bool) -> Path:
    with RecordingWriter(path, recording_id=recording_id) as rec:
        rec.set_properties(task="pick", success=success)
        rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(5)},
                        values=np.arange(35, dtype=np.float64).reshape(5, 7))
    return path


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


RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_cli() -> RunCli:
    """Run ``rayform ARGS`` in a fresh interpreter; ``blocked`` modules fail to import there and
    ``env`` values of ``None`` are unset."""
    def run(*args: str, blocked: tuple[str, ...] = (), env: dict[str, str | None] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        code = ("import sys\n"
                f"for name in {blocked!r}:\n"
                "    sys.modules[name] = None\n"
                "from rayform.cli import main\n"
                "sys.exit(main(sys.argv[1:]))\n")
        merged = {**os.environ, **(env or {}),
                  "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        full_env = {k: v for k, v in merged.items() if v is not None}  # None: unset
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=full_env, timeout=240, check=False)
    return run
