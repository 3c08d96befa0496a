"""Downloads left by a killed pull are swept by the next process that downloads: ``.part`` files
in the cache's ``tmp/`` at once when their writer no longer runs, else after a day; sparse block
downloads (``sparse/``) after a day untouched, unless a fetch is filling them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from rayform.storage._block_hashes import BlockHashes
from rayform.storage._cache import ObjectCache
from rayform.storage._parts import PartPlan, RangeReply
from rayform.storage._retry import RetryPolicy
from rayform.storage._sparse import VERIFIED, fetch_blocks, sparse_paths


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


def _sparse_download(cache: ObjectCache, digest: str, *, age_s: float) -> list[Path]:
    """A sparse download of ``digest`` left by a killed fetch: data file and block record."""
    data, record = sparse_paths(cache, digest)
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(b"\0" * 4096)
    record.write_bytes(VERIFIED)
    then = time.time() - age_s
    for path in (data, record):
        os.utime(path, (then, then))
    return [data, record]


def test_stale_sparse_downloads_are_swept_unless_fresh_or_being_filled(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "cache")
    two_days = 2 * 24 * 3600
    stale = _sparse_download(cache, "b" * 64, age_s=two_days)
    fresh = _sparse_download(cache, "c" * 64, age_s=3600)
    filling = _sparse_download(cache, "d" * 64, age_s=two_days)
    orphan_record = _sparse_download(cache, "e" * 64, age_s=two_days)[1]
    orphan_record.with_name("e" * 64).unlink()
    touched_record = _sparse_download(cache, "f" * 64, age_s=two_days)
    os.utime(touched_record[1])  # a fetch marked a block a moment ago
    stranger = stale[0].with_name("notes.txt")
    stranger.write_text("not ours")
    os.utime(stranger, (time.time() - two_days,) * 2)
    with cache.object_lock("d" * 64):  # another fetch is filling it right now
        assert cache.sweep_abandoned() == 3
    assert not any(p.exists() for p in [*stale, orphan_record])
    assert all(p.exists() for p in [*fresh, *filling, *touched_record, stranger])


def test_the_first_block_fetch_of_a_process_sweeps(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "cache")
    stale = _sparse_download(cache, "b" * 64, age_s=2 * 24 * 3600)
    hashes = BlockHashes(block_bytes=64 << 10, size_bytes=0, digests=b"")
    with contextlib.suppress(Exception):  # the fetch itself fails: there is no server
        fetch_blocks(cache, "a" * 64, lambda: hashes, _NoServer(), "objects/aa/x",
                     plan=PartPlan(), retry=RetryPolicy(max_attempts=1, backoff_s=0.0),
                     what="fetch")
    assert not any(p.exists() for p in stale)


class _NoServer:
    url = "https://nowhere.invalid"

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply:
        raise OSError("no server in this test")
