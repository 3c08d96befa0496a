"""Video defects in copies of the real Unitree episodes: a dropped frame and a duplicated frame
(packets remuxed), a frozen camera (re-encoded); the real files' own identical pairs stay quiet.

The dataset: ``video_defects.build_video_dataset`` (the ``video_dataset`` fixture)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rayform.catalog import DatasetEntry
from rayform.curation import CurationResult, curate

pytestmark = pytest.mark.realdata
CAMERA = "/observation.images.cam_high:VideoFrameReference:timestamp"


@pytest.fixture(scope="module")
def dataset(video_dataset: DatasetEntry) -> DatasetEntry:
    return video_dataset


@pytest.fixture(scope="module")
def result(dataset: DatasetEntry) -> CurationResult:
    return curate(dataset, video="full")


def _rows(result: CurationResult, segment: str, check: str) -> list[dict[str, Any]]:
    return [r for r in result.findings.to_pylist()
            if r["segment"] == segment and r["check"] == check]


def test_dropped_frame_named(result: CurationResult) -> None:
    found = _rows(result, "episode_000002", "video.frames")
    assert any("220 frames for 221 rows" in r["message"] for r in found)
    # registration pointed row 101 at the frame before (the latest at its time): the grid
    # check names it, repeated, and the gap after it
    grid = _rows(result, "episode_000002", "bookkeeping.video_grid")
    assert [(r["start_row"], r["end_row"]) for r in grid] == [(100, 102), (101, 103)]
    assert all(r["column"] == CAMERA for r in grid)


def test_duplicated_frame_counted(result: CurationResult) -> None:
    found = _rows(result, "episode_000004", "video.frames")
    assert any("222 frames for 221 rows" in r["message"] for r in found)


def test_frozen_camera(result: CurationResult) -> None:
    [frozen] = _rows(result, "episode_000005", "video.identical")
    assert abs(frozen["start_row"] - 100) <= 1 and abs(frozen["end_row"] - 130) <= 1


def test_clean_copies_quiet(result: CurationResult) -> None:
    loud = [r for r in result.at_least("warning").to_pylist()
            if r["segment"] in ("episode_000000", "episode_000001", "episode_000003")]
    assert loud == []


def test_sampled_heads_find_the_frozen_camera(dataset: DatasetEntry) -> None:
    sampled = curate(dataset, checks=["video.*"], video="sample", persist=False)
    [frozen] = _rows(sampled, "episode_000005", "video.identical")
    assert 100 - 1 <= frozen["start_row"] < frozen["end_row"] <= 130 + 1  # inside the stretch
    loud = [r for r in sampled.at_least("warning").to_pylist()
            if r["segment"] in ("episode_000000", "episode_000001", "episode_000003")]
    assert loud == []


def test_sample_heads_plan() -> None:
    from rayform.curation._checks_video import HEAD_FRAMES, SAMPLE_HEADS, sample_heads

    stamps = (np.arange(300) * 33_333_333).astype(np.int64)
    keys = np.zeros(300, dtype=bool)
    keys[::2] = True  # GOP 2, as the Unitree files
    heads = sample_heads(stamps, keys, 0, 300, "sample")
    assert len(heads) == SAMPLE_HEADS and all(b - a == HEAD_FRAMES for a, b in heads)
    assert all(keys[a] for a, _ in heads) and heads[0][0] == 0 and heads[-1][1] <= 300
    assert sample_heads(stamps, keys, 0, 300, "full") == [(0, 300)]
    keys[:] = False
    keys[[0, 150]] = True  # long GOPs: heads share a keyframe only once
    assert sample_heads(stamps, keys, 0, 300, "sample") == [(0, 3), (150, 153)]
