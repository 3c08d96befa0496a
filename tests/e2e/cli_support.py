"""Helpers of the command-line tests: a small recording, and the command run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rayform.catalog import RecordingWriter

REPO = Path(__file__).resolve().parents[2]

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def write_recording(path: Path, recording_id: str, *, success: bool) -> Path:
    with RecordingWriter(path, recording_id=recording_id) as rec:
        rec.set_properties(task="pick", success=success)
        rec.log_scalars("/joints/position", timelines={"frame_index": np.arange(5)},
                        values=np.arange(35, dtype=np.float64).reshape(5, 7))
    return path


def env_with_checkout(env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The environment with this checkout first on PYTHONPATH; ``None`` values are unset."""
    merged = {**os.environ, **(env or {}),
              "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return {k: v for k, v in merged.items() if v is not None}


def run_cli(*args: str, blocked: tuple[str, ...] = (), env: dict[str, str | None] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """Run ``rayform ARGS`` in a fresh interpreter where the ``blocked`` modules fail to import."""
    code = ("import sys\n"
            f"for name in {blocked!r}:\n"
            "    sys.modules[name] = None\n"
            "from rayform.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env_with_checkout(env), timeout=240, check=False)
