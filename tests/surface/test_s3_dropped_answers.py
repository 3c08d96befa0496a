"""Lost answers over the network: moto's S3 server in its own process, behind a proxy that lets
a chosen request reach the server and then loses its answer (the connection closes). The retry
finds the write applied and must recognise it as its own: every commit below succeeds once,
with one snapshot, instead of ``DuplicateSegmentError`` / ``EntryExistsError`` or a second
snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from answer_dropper import AnswerDropper
from moto_process import CREDENTIALS, create_bucket
from surface_data import write_episode

import rayform
from rayform.storage import _s3

_buckets = iter(range(1_000_000))


@pytest.fixture
def dropper(moto_process: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[AnswerDropper]:
    proxy = AnswerDropper(int(moto_process.rsplit(":", 1)[1]))
    for name, value in {"AWS_ENDPOINT_URL": proxy.endpoint, **CREDENTIALS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAYFORM_S3_SINGLE_WRITER", raising=False)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Each time a retried create found its key there: (key, whether it was this very write)."""
    seen: list[tuple[str, bool]] = []
    real = _s3.S3Transport._holds

    def holds(self: _s3.S3Transport, key: str, data: bytes) -> bool:
        ours = real(self, key, data)
        seen.append((key, ours))
        return ours

    monkeypatch.setattr(_s3.S3Transport, "_holds", holds)
    return seen


@pytest.fixture
def url(dropper: AnswerDropper, moto_process: str) -> str:
    bucket = f"lost-{next(_buckets)}"
    create_bucket(moto_process, bucket)
    return f"s3://{bucket}/team/catalog"


def test_catalog_json_whose_answer_is_lost_is_created_once(
        url: str, dropper: AnswerDropper, held: list[tuple[str, bool]]) -> None:
    dropper.arm(b"/catalog.json")
    rayform.Catalog.create(url)
    assert dropper.dropped == 1
    assert held == [("catalog.json", True)]  # the server had applied it: the retry saw it
    assert rayform.Catalog.open(url).dataset_names() == []


def test_an_entry_whose_answer_is_lost_is_not_an_existing_entry(
        url: str, dropper: AnswerDropper, held: list[tuple[str, bool]]) -> None:
    catalog = rayform.Catalog.create(url)
    dropper.arm(b"/entry.json")
    catalog.create_dataset("robots")
    assert dropper.dropped == 1
    assert held == [("entries/robots/entry.json", True)]
    assert rayform.Catalog.open(url).dataset_names() == ["robots"]


@pytest.mark.parametrize("on_duplicate", ["error", "replace"])
def test_a_snapshot_whose_answer_is_lost_is_one_commit(
        url: str, dropper: AnswerDropper, held: list[tuple[str, bool]], tmp_path: Path,
        on_duplicate: str) -> None:
    robots = rayform.Catalog.create(url).create_dataset("robots")
    dropper.arm(b"/versions/")
    robots.register(write_episode(tmp_path / "ep0.rfr", "ep0", seed=0),
                    on_duplicate=on_duplicate).wait()
    assert dropper.dropped == 1
    assert held == [("entries/robots/versions/000000000001.json", True)]
    fresh = rayform.Catalog.open(url).get_dataset("robots")
    assert fresh.segment_ids() == ["ep0"]
    assert fresh.snapshot_version == 1  # one commit, not a second "replace"


def test_an_object_upload_whose_answer_is_lost_is_stored_once(url: str, dropper: AnswerDropper,
                                                              tmp_path: Path) -> None:
    robots = rayform.Catalog.create(url).create_dataset("robots")
    dropper.arm(b"/objects/", count=2)  # the recording and the segment index
    robots.register(write_episode(tmp_path / "ep0.rfr", "ep0", seed=0)).wait()
    assert dropper.dropped == 2
    assert rayform.catalog.check_catalog(url).ok
    assert rayform.Catalog.open(url).get_dataset("robots").segment_ids() == ["ep0"]
