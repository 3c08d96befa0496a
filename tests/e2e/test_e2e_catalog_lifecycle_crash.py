"""Crash safety of the lifecycle: a process SIGKILLed in the middle of deleting or renaming a
dataset leaves the catalog as it was or as it would be after, never between, and the next
operation works."""

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
from rayform.catalog import Catalog, check_catalog

# The child deletes or renames dataset 'robots', stopping (sleeping) at a chosen write so the
# parent can SIGKILL it there; it writes the marker file just before it stops. A point is
# "<when>:<n>": before or after the n-th exclusive create of a metadata file (1-based).
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import rayform.storage._local as store_mod
    from rayform.catalog import Catalog

    action, point, url, marker = sys.argv[1:5]
    when, nth = point.split(":")
    real_create = store_mod.LocalStore.create_exclusive
    count = 0

    def stop():
        Path(marker).write_text(point)
        time.sleep(120)

    def create_exclusive(self, key, data):
        global count
        count += 1
        if when == "before" and count == int(nth):
            stop()
        created = real_create(self, key, data)
        if when == "after" and count == int(nth):
            stop()
        return created

    store_mod.LocalStore.create_exclusive = create_exclusive
    dataset = Catalog.open(url).get_dataset("robots")
    if action == "delete":
        dataset.delete()
    else:
        dataset.set_name("fleet")
    Path(marker).write_text("finished")
""")


def _write(path: Path, recording_id: str, seed: int) -> Path:
    with rayform.RecordingWriter(path, recording_id=recording_id) as rec:
        rec.log_scalars("/joints", timelines={"frame_index": np.arange(20)},
                        values=np.full((20, 3), float(seed)))
    return path


def _visible(url: str) -> dict[str, list[str]]:
    """What a reader sees: each live dataset with its segments (and every row readable)."""
    out = {}
    for ds in Catalog.open(url).datasets():
        assert ds.reader("frame_index").to_arrow_table().num_rows == 20 * len(ds.segment_ids())
        out[ds.name] = ds.segment_ids()
    return out


def _kill_at(action: str, point: str, url: str, tmp_path: Path) -> bool:
    """Run the child to ``point`` and SIGKILL it there; False when it finished first."""
    marker = tmp_path / f"{action}-{point.replace(':', '-')}.marker"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, action, point, url, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            if proc.poll() is not None:
                raise AssertionError(f"child exited early: {proc.communicate()[1].decode()}")
            if time.monotonic() > deadline:
                raise AssertionError("child never reached the crash point")
            time.sleep(0.01)
        if marker.read_text() == "finished":
            return False
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        return True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()


def _robots(tmp_path: Path) -> tuple[str, dict[str, list[str]], str]:
    catalog = Catalog.create(tmp_path / "cat")
    ds = catalog.create_dataset("robots")
    ds.register([_write(tmp_path / "a.rfr", "a", 1), _write(tmp_path / "b.rfr", "b", 2)]).wait()
    slice_id = rayform.Client(catalog).slices.create("robots", segments=["a"]).id
    return catalog.url, _visible(catalog.url), slice_id


# delete writes one file (its tombstone); rename writes three: the pending snapshot of the new
# name, the new name's entry file, and the tombstone of the old name (the commit point).
@pytest.mark.parametrize(("action", "point", "landed"), [
    ("delete", "before:1", False), ("delete", "after:1", True),
    ("rename", "before:1", False), ("rename", "after:1", False), ("rename", "after:2", False),
    ("rename", "before:3", False), ("rename", "after:3", True),
])
def test_kill_mid_lifecycle_leaves_before_or_after(tmp_path: Path, action: str, point: str,
                                                   landed: bool) -> None:
    url, before, slice_id = _robots(tmp_path)
    done = {} if action == "delete" else {"fleet": before["robots"]}
    assert _kill_at(action, point, url, tmp_path)
    expected = done if landed else before
    assert _visible(url) == expected
    assert check_catalog(url).ok
    slice_ = rayform.Client(url).slices.get(slice_id)
    assert slice_.view().segment_ids() == ["a"]  # pinned slices read either way
    if expected == before:  # the operation can simply run again, and completes
        ds = Catalog.open(url).get_dataset("robots")
        ds.delete() if action == "delete" else ds.set_name("fleet")
        assert _visible(url) == done
    # and the names stay usable: 'robots' can be created again
    Catalog.open(url).create_dataset("robots").register(tmp_path / "b.rfr").wait()
    assert _visible(url) == {**done, "robots": ["b"]}
    assert slice_.view().segment_ids() == ["a"]
