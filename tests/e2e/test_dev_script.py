"""``./dev.sh`` says what each stage does and how long it takes, and shows pip's progress in a
terminal (run here against a stand-in virtual environment that records what it is asked)."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from cli_support import REPO

STUB = "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> \"$(dirname \"$0\")/calls.log\"\n"


def _fake_venv(root: Path) -> Path:
    for name in ("python", "pip"):
        tool = root / "bin" / name
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text(STUB)
        tool.chmod(0o755)
    return root


def _run(venv: Path, *, terminal: bool) -> tuple[str, list[str]]:
    env = {**os.environ, "RAYFORM_VENV": str(venv)}
    if terminal:
        leader, follower = pty.openpty()
        proc = subprocess.run([str(REPO / "dev.sh"), "test", "-x"], stderr=follower,
                              stdout=subprocess.DEVNULL, env=env, timeout=60, check=False)
        os.close(follower)
        err = os.read(leader, 65536).decode()
        os.close(leader)
    else:
        proc = subprocess.run([str(REPO / "dev.sh"), "test", "-x"], capture_output=True,
                              text=True, env=env, timeout=60, check=False)
        err = proc.stderr
    assert proc.returncode == 0, err
    return err, (venv / "bin" / "calls.log").read_text().splitlines()


def test_each_stage_says_how_long_and_pip_is_quiet_in_a_pipe(tmp_path: Path) -> None:
    err, calls = _run(_fake_venv(tmp_path / "venv"), terminal=False)
    stages = [line for line in err.splitlines() if line.startswith("dev.sh: ")]
    assert any("installing rayform[" in s and "(about 1-2 minutes)" in s for s in stages), err
    assert any(s.startswith("dev.sh: running the tests (about 15 minutes") for s in stages), err
    pip = [c for c in calls if c.startswith("pip install")]
    assert pip and all(" -q " in c for c in pip), calls
    assert calls[-1] == "python -m pytest -x"


def test_a_terminal_gets_pips_progress(tmp_path: Path) -> None:
    _, calls = _run(_fake_venv(tmp_path / "venv"), terminal=True)
    pip = [c for c in calls if c.startswith("pip install")]
    assert pip and all("--progress-bar on" in c and " -q " not in c for c in pip), calls
