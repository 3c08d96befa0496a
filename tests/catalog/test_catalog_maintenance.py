"""Housekeeping: stale listings repaired by the next write, ``check_catalog`` finding damage,
``gc_catalog`` removing only what nothing references, and the ``check`` / ``gc`` / ``index``
sub-commands."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from recording_factories import RecordingFactory

import rayform
from rayform.catalog import Catalog, DatasetEntry, check_catalog, gc_catalog
from rayform.cli import main
from rayform.errors import CorruptMetadataError
from rayform.storage import LocalStore, object_key
from rayform.storage._listing import LocalListings, decode_listing

DAY_S = 24 * 3600.0


@pytest.fixture
def root(robots: DatasetEntry) -> Path:
    return Path(robots.catalog.url)


def _listed(root: Path, folder: str) -> list[str]:
    path = root / folder / ".listing.json"
    return decode_listing(path.read_bytes(), source=str(path))


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def _run(root: Path, *argv: str) -> int:
    return main(["--catalog", str(root), *argv])


def _killed_before_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next metadata write links its file, then its writer dies before the listings."""
    real = LocalListings.refresh_above
    calls = [0]

    def refresh_above(self: LocalListings, key: str) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise KeyboardInterrupt("killed")
        real(self, key)

    monkeypatch.setattr(LocalListings, "refresh_above", refresh_above)


def test_stale_listing_is_reported_and_repaired_by_the_next_write(
        robots: DatasetEntry, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _killed_before_listing(monkeypatch)
    catalog = Catalog.open(root)
    with pytest.raises(KeyboardInterrupt):
        catalog.create_dataset("more")
    assert _listed(root, "entries") == ["robots"]  # an HTTPS reader would not see "more"
    report = check_catalog(root)
    assert not report.ok
    assert any(p.where.endswith("entries/.listing.json") and "lacks ['more']" in p.message
               for p in report.problems), report.summary()
    assert _run(root, "check") == 1
    catalog.create_dataset("more", exist_ok=True)  # the next write there repairs it
    assert _listed(root, "entries") == ["more", "robots"]
    assert check_catalog(root).ok


def test_index_command_repairs_every_listing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "entries" / "robots" / "versions" / ".listing.json").unlink()
    (root / "entries" / ".listing.json").write_bytes(b'{"format": "rayform-listing"}')
    assert not check_catalog(root).ok
    assert _run(root, "index") == 0
    assert "wrote the listing files of" in capsys.readouterr().out
    assert check_catalog(root).ok


def test_check_finds_damaged_and_missing_objects(robots: DatasetEntry, root: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    report = check_catalog(root)
    assert report.ok, report.summary()
    # three recordings (too small for block-hash objects) and one segment index
    assert report.objects_checked == 4
    assert _run(root, "check") == 0
    bent = root / object_key(robots.segment_record("ep0").layers["base"].object)
    bent.chmod(0o644)
    data = bytearray(bent.read_bytes())
    data[len(data) // 2] ^= 1
    bent.write_bytes(bytes(data))
    gone = root / object_key(robots.segment_record("ep1").layers["base"].object)
    gone.unlink()
    report = check_catalog(root)
    messages = {p.where: p.message for p in report.problems}
    assert messages[f"{root}/{object_key(bent.name)}"].startswith("damaged: its content hashes")
    assert messages[f"{root}/{object_key(gone.name)}"].startswith("missing or unreadable")
    assert _run(root, "check") == 1
    assert "2 problem(s)" in capsys.readouterr().out


def test_check_reports_unreadable_metadata(root: Path) -> None:
    snapshot = sorted((root / "entries" / "robots" / "versions").glob("*.json"))[-1]
    snapshot.chmod(0o644)
    snapshot.write_text("{")
    report = check_catalog(root)
    assert [p.where for p in report.problems] == [f"{root}/entries/robots/versions/{snapshot.name}"]
    assert "not valid JSON" in report.problems[0].message


def test_gc_removes_only_old_unreferenced_things(robots: DatasetEntry, root: Path,
                                                 recording_factory: RecordingFactory,
                                                 tmp_path: Path) -> None:
    rayform.Client(robots.catalog).slices.create("robots", segments=["ep0"])
    robots.unregister(segments_to_drop="ep2")  # ep2's recording stays named by snapshot 1
    store = LocalStore(root)
    orphan, _ = store.put_object(recording_factory("orphan", seed=9))  # stored, never committed
    young, _ = store.put_object(recording_factory("young", seed=10))
    _age(root / object_key(orphan), 2 * DAY_S)
    staging = root / ".staging"
    (staging / "object.dead.tmp").write_bytes(b"x" * 100)
    (staging / "tmpkilled").mkdir()
    (staging / "tmpkilled" / "000000").mkdir()
    (staging / "fresh.tmp").write_bytes(b"in flight")
    for path in (staging / "object.dead.tmp", staging / "tmpkilled"):
        _age(path, 2 * DAY_S)
    before = {p.name for p in (root / "objects").rglob("*") if p.is_file()}

    dry = gc_catalog(root, dry_run=True)
    assert (dry.removed_objects, dry.removed_staging, dry.kept_recent) == (1, 2, 1)
    assert {p.name for p in (root / "objects").rglob("*") if p.is_file()} == before

    report = gc_catalog(root)
    assert (report.removed_objects, report.removed_staging, report.kept_recent) == (1, 2, 1)
    assert report.removed_bytes > 0
    after = {p.name for p in (root / "objects").rglob("*") if p.is_file()}
    assert after == before - {orphan}
    assert young in after
    assert sorted(os.listdir(staging)) == ["fresh.tmp"]
    assert check_catalog(root).ok
    old = Catalog.open(root).get_dataset("robots").at_version(1)
    assert len(old.open_segment("ep2").column("/joints/position:Scalars:scalars", "frame_index"))


def test_gc_keeps_an_old_object_a_writer_reuses(robots: DatasetEntry, root: Path,
                                                recording_factory: RecordingFactory) -> None:
    path = recording_factory("again", seed=11)
    digest, _ = LocalStore(root).put_object(path)
    _age(root / object_key(digest), 2 * DAY_S)
    LocalStore(root).put_object(path)  # a registration finds it stored: it is in use again
    assert gc_catalog(root).removed_objects == 0
    assert (root / object_key(digest)).exists()


def test_gc_removes_nothing_while_metadata_is_damaged(root: Path,
                                                      recording_factory: RecordingFactory) -> None:
    digest, _ = LocalStore(root).put_object(recording_factory("orphan", seed=12))
    _age(root / object_key(digest), 2 * DAY_S)
    entry = root / "entries" / "robots" / "entry.json"
    entry.write_text("{")
    with pytest.raises(CorruptMetadataError, match=r"nothing was removed — run `rayform check`"):
        gc_catalog(root)
    assert (root / object_key(digest)).exists()


def test_gc_command(root: Path, recording_factory: RecordingFactory,
                    capsys: pytest.CaptureFixture[str]) -> None:
    digest, _ = LocalStore(root).put_object(recording_factory("orphan", seed=13))
    assert _run(root, "gc", "--grace-hours", "0", "--dry-run") == 0
    assert "would remove 1 unreferenced object(s)" in capsys.readouterr().out
    assert (root / object_key(digest)).exists()
    assert _run(root, "gc", "--grace-hours", "0") == 0
    assert not (root / object_key(digest)).exists()
