"""Crash safety: a process SIGKILLed in the middle of ``register`` leaves the catalog as it was
(or, killed after the commit point, with the registration complete), and the next open and
registration work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import rayform
from rayform.catalog import Catalog

# The child registers one recording, stopping (sleeping) at a chosen point so the parent can
# SIGKILL it there. It writes the marker file just before it stops.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import rayform.storage._local as store_mod
    from rayform.catalog import Catalog

    point, url, recording, marker = sys.argv[1:5]

    def stop():
        Path(marker).write_text(point)
        time.sleep(120)

    real_link, real_replace = os.link, os.replace
    real_create = store_mod.LocalStore.create_exclusive

    def create_exclusive(self, key, data):
        if point == "before_commit" and "/versions/" in key:
            stop()
        return real_create(self, key, data)

    def link(src, dst, *args, **kwargs):
        if "/versions/" in str(dst):
            if point == "at_link":
                stop()
            real_link(src, dst, *args, **kwargs)
            if point == "after_link":
                stop()
            return None
        return real_link(src, dst, *args, **kwargs)

    def replace(src, dst, *args, **kwargs):
        if point == "object_copy" and "/objects/" in str(dst):
            stop()
        return real_replace(src, dst, *args, **kwargs)

    store_mod.LocalStore.create_exclusive = create_exclusive
    os.link, os.replace = link, replace
    Catalog.open(url).get_dataset("robots").register(recording).wait()
    Path(marker).write_text("finished")
""")


def _write(path: Path, recording_id: str, seed: int) -> Path:
    with rayform.RecordingWriter(path, recording_id=recording_id) as rec:
        rec.set_properties(seed=seed)
        rec.log_scalars("/joints", timelines={"frame_index": np.arange(50)},
                        values=np.full((50, 3), float(seed)))
    return path


def _metadata(root: Path) -> dict[str, bytes]:
    """catalog.json and everything below entries/: the committed, visible state."""
    files = {"catalog.json": (root / "catalog.json").read_bytes()}
    for path in sorted((root / "entries").rglob("*")):
        if path.is_file():
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def _kill_at(point: str, url: str, recording: Path, tmp_path: Path) -> None:
    marker = tmp_path / f"{point}.marker"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, point, url, str(recording),
                             str(marker)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if proc.poll() is not None:
                raise AssertionError(f"child exited early: {proc.communicate()[1].decode()}")
            if time.monotonic() > deadline:
                raise AssertionError("child never reached the crash point")
            time.sleep(0.01)
        assert marker.read_text() == point
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()


@pytest.mark.parametrize("point", ["object_copy", "before_commit", "at_link"])
def test_kill_before_commit_point_leaves_catalog_as_before(tmp_path: Path, point: str) -> None:
    catalog = Catalog.create(tmp_path / "cat")
    ds = catalog.create_dataset("robots")
    ds.register([_write(tmp_path / "a.rfr", "a", 1), _write(tmp_path / "b.rfr", "b", 2)]).wait()
    root = Path(catalog.url)
    before = _metadata(root)
    before_table = ds.segment_table_arrow()

    _kill_at(point, catalog.url, _write(tmp_path / "c.rfr", "c", 3), tmp_path)

    assert _metadata(root) == before
    reopened = Catalog.open(root).get_dataset("robots")
    assert reopened.snapshot_version == ds.snapshot_version
    assert reopened.segment_table_arrow().equals(before_table)
    table = reopened.reader("frame_index").to_arrow_table()
    assert table.num_rows == 100
    # The next registration works, and it can register the very file the dead process held.
    reopened.register(tmp_path / "c.rfr").wait()
    assert reopened.segment_ids() == ["a", "b", "c"]
    assert Catalog.open(root).get_dataset("robots").snapshot_version == ds.snapshot_version + 1
    rows = reopened.filter_segments("c").reader("frame_index").to_arrow_table()
    assert rows.column("/joints:Scalars:scalars").to_pylist()[0] == [3.0, 3.0, 3.0]


def test_kill_after_commit_point_keeps_the_registration(tmp_path: Path) -> None:
    catalog = Catalog.create(tmp_path / "cat")
    ds = catalog.create_dataset("robots")
    ds.register(_write(tmp_path / "a.rfr", "a", 1)).wait()
    _kill_at("after_link", catalog.url, _write(tmp_path / "c.rfr", "c", 3), tmp_path)
    reopened = Catalog.open(catalog.url).get_dataset("robots")
    assert reopened.segment_ids() == ["a", "c"]
    assert reopened.snapshot_version == 2
    reopened.register(_write(tmp_path / "d.rfr", "d", 4)).wait()
    assert reopened.segment_ids() == ["a", "c", "d"]
    assert reopened.reader("frame_index").to_arrow_table().num_rows == 150
