"""``gc`` on an ``s3://`` catalog: a registration SIGKILLed right after an upload leaves objects
nobody references; ``gc`` keeps them through its grace period (a registration in progress looks
the same), then removes exactly them, and the catalog checks clean. A writer reusing an old
unreferenced object stores it again, so a concurrent ``gc`` keeps it. (moto in its own process.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from surface_data import write_episode

import rayform
from rayform.catalog import check_catalog, gc_catalog
from rayform.cli import main
from rayform.errors import ReadOnlyCatalogError
from rayform.storage import _remote

REPO = Path(__file__).resolve().parents[2]

# Registers one recording and SIGKILLs itself right after its N-th upload has landed.
KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import rayform
    from rayform.storage import _s3

    url, recording, kill_after = sys.argv[2], sys.argv[3], int(sys.argv[4])
    real_upload = _s3.S3Transport.upload
    uploads = [0]

    def upload(self, key, src):
        real_upload(self, key, src)
        uploads[0] += 1
        if uploads[0] == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    _s3.S3Transport.upload = upload
    rayform.Catalog.open(url).get_dataset("robots").register(recording).wait()
    print("finished without being killed")
""")


def _stored(url: str) -> set[str]:
    return {o.digest for o in rayform.Catalog.open(url).store.stored_objects()}


def _killed_registration(url: str, recording: Path, *, kill_after: int) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(REPO), url, str(recording),
                           str(kill_after)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr[-2000:]


@pytest.mark.parametrize("kill_after", [1, 2], ids=["after-recording", "after-segment-index"])
def test_gc_removes_exactly_what_a_killed_registration_uploaded(
        moto_process_url: str, tmp_path: Path, kill_after: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = moto_process_url
    robots = rayform.Catalog.create(url).create_dataset("robots")
    robots.register(write_episode(tmp_path / "ep0.rfr", "ep0", seed=0)).wait()
    before = _stored(url)
    ep1 = write_episode(tmp_path / "ep1.rfr", "ep1", seed=1)
    _killed_registration(url, ep1, kill_after=kill_after)
    leftovers = _stored(url) - before
    assert len(leftovers) == kill_after  # the recording (and the new segment index)
    report = check_catalog(url)
    assert report.ok and report.unreferenced_objects == kill_after, report.summary()

    # Within the grace period they may be a registration in progress: kept.
    kept = gc_catalog(url)
    assert (kept.removed_objects, kept.kept_recent) == (0, kill_after)
    dry = gc_catalog(url, grace_s=0, dry_run=True)
    assert dry.removed_objects == kill_after and _stored(url) - before == leftovers
    assert main(["--catalog", url, "gc", "--grace-hours", "0"]) == 0
    assert f"removed {kill_after} unreferenced object(s)" in capsys.readouterr().out

    assert _stored(url) == before
    after = check_catalog(url)
    assert after.ok and after.unreferenced_objects == 0, after.summary()
    fresh = rayform.Catalog.open(url).get_dataset("robots")
    assert fresh.segment_ids() == ["ep0"]
    fresh.register(ep1).wait()  # the retried registration stores its objects again
    assert rayform.Catalog.open(url).get_dataset("robots").segment_ids() == ["ep0", "ep1"]
    assert check_catalog(url).ok


def test_a_writer_reusing_an_old_leftover_renews_it_so_gc_keeps_it(
        moto_process_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = moto_process_url
    rayform.Catalog.create(url).create_dataset("robots")
    ep1 = write_episode(tmp_path / "ep1.rfr", "ep1", seed=1)
    _killed_registration(url, ep1, kill_after=2)  # recording + segment index left over
    recording, index = sorted(_stored(url), key=lambda d: d != rayform.storage.sha256_file(ep1))
    monkeypatch.setattr(_remote, "RENEW_AFTER_S", 1.0)
    time.sleep(6.0)  # both older than the renewal age and gc's grace (S3 times: whole seconds)
    store = rayform.Catalog.open(url).store
    stamp = store.stored_object(recording)
    assert stamp is not None
    store.put_object(ep1)  # what the retried registration does first: reuse the recording
    renewed = store.stored_object(recording)
    assert renewed is not None and renewed.stamp != stamp.stamp and renewed.age_s < 1.0
    report = gc_catalog(url, grace_s=4.0)  # slack for a loaded machine
    assert (report.removed_objects, report.kept_recent) == (1, 1)
    assert _stored(url) == {recording}
    assert index not in _stored(url)
    monkeypatch.setattr(_remote, "RENEW_AFTER_S", 3600.0)
    fresh = store.put_object(ep1)  # young now: found, not uploaded again
    again = store.stored_object(recording)
    assert fresh[0] == recording and again is not None and again.stamp == renewed.stamp


def test_gc_refuses_a_read_only_catalog(https_catalog: object) -> None:
    url = https_catalog.url  # type: ignore[attr-defined]
    with pytest.raises(ReadOnlyCatalogError, match=r"read-only here; run gc on the machine"):
        gc_catalog(url)
    assert np.isfinite(check_catalog(url).objects_checked)
