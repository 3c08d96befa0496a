"""Downloads left by a killed pull (``.part`` files in the cache's ``tmp/``) are swept by the
next process that downloads: at once when their writer no longer runs, else after a day."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rayform.storage._cache import ObjectCache


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _part(tmp: Path, pid: int, *, age_s: float) -> Path:
    path = tmp / f"{'a' * 64}.{pid}.{int(age_s):08x}.part"
    path.write_bytes(b"x" * 4096)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_parts_of_dead_writers_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    tmp = tmp_path / "cache" / "tmp"
    tmp.mkdir(parents=True)
    dead = _part(tmp, _dead_pid(), age_s=120)
    dead_but_fresh = _part(tmp, _dead_pid(), age_s=0)
    alive = _part(tmp, os.getpid(), age_s=3600)
    ancient = _part(tmp, os.getpid(), age_s=2 * 24 * 3600)
    ObjectCache(tmp_path / "cache").tmp_dir()
    assert not dead.exists() and not ancient.exists()
    assert alive.exists() and dead_but_fresh.exists()
