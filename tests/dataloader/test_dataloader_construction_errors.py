"""Errors at construction: an empty sample space (naming why, instead of ``len 0``), a near-miss column."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataloader_factories import JOINTS, make_dataset

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
)
from rayform.errors import ConfigError


@pytest.fixture
def short(tmp_path: Path) -> DatasetEntry:
    """Episodes of 5, 9 and 7 frames (~10 ms apart): ep1 is the longest."""
    return make_dataset(tmp_path, num_episodes=3, frames=[5, 9, 7], with_camera=False)[0]


@pytest.mark.parametrize("kind", [RerunMapDataset, RerunIterableDataset])
def test_steps_written_as_seconds_on_a_time_timeline(short: DatasetEntry, kind: type) -> None:
    fields = {"action": Field(JOINTS, NumericDecoder(), window=tuple(range(16)))}
    with pytest.raises(ConfigError) as err:
        kind(DataSource(short), "real_time", fields,
             timeline_sampling=FixedRateSampling(rate_hz=15))
    text = str(err.value)
    assert text.startswith(f"{kind.__name__} has no samples")
    assert "span 15 s" in text and "'ep1'" in text and "of the 3 segments" in text
    assert "window offsets are seconds" in text and "tuple(k / 15 for k in range(16))" in text


def test_a_window_longer_than_every_segment_in_steps(short: DatasetEntry) -> None:
    fields = {"state": Field(JOINTS, NumericDecoder(), window=(-2, 0)),
              "action": Field(JOINTS, NumericDecoder(), window=tuple(range(8)))}
    with pytest.raises(ConfigError, match=r"span 9 steps on sequence timeline 'frame_index'.*"
                                          r"'ep1' \(8 steps\).*edge='pad'") as err:
        RerunMapDataset(DataSource(short), "frame_index", fields)
    assert "seconds" not in str(err.value)
    # what the message offers works: a padded space, or a window that fits the longest segment
    assert len(RerunMapDataset(DataSource(short), "frame_index", fields, edge="pad")) == 21
    fits = {"action": Field(JOINTS, NumericDecoder(), window=tuple(range(9)))}
    assert len(RerunMapDataset(DataSource(short), "frame_index", fits)) == 1



def test_an_entity_path_gets_its_columns(short: DatasetEntry) -> None:
    from rayform.errors import ColumnNotFoundError

    for path in ("/joints", "joints"):
        with pytest.raises(ColumnNotFoundError, match=r"Field 'state': '/?joints' is an entity "
                                                      r"path, not a column; name one of its "
                                                      r"columns, e.g. Field\('/joints:Scalars:"
                                                      r"scalars', decode=NumericDecoder\(\)\)"):
            RerunMapDataset(DataSource(short), "frame_index",
                            {"state": Field(path, NumericDecoder())})


@pytest.mark.realdata
def test_a_frame_decoder_on_a_video_file_column_points_to_its_frames(tmp_path: Path) -> None:
    g1 = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "unitree-g1-lerobot-v21"
    if not g1.is_dir():
        pytest.skip(f"real data not found at {g1}")
    import rayform
    from rayform.dataloader import VideoFrameDecoder

    dataset = rayform.Catalog.create(tmp_path / "cat").create_dataset("g1")
    with pytest.warns(Warning, match="partial LeRobot dataset"):
        dataset.register([str(g1)])
    cam = "/observation.images.cam_high"
    with pytest.raises(ConfigError, match=rf"VideoFrameDecoder decodes frames through the "
                                          rf"video's frame references, not its 'AssetVideo:asset' "
                                          rf"column .*use Field\('{cam}:VideoFrameReference:"
                                          rf"timestamp', decode=VideoFrameDecoder\(\)\)"):
        RerunMapDataset(DataSource(dataset), "frame_index",
                        {"cam": Field(f"{cam}:AssetVideo:asset", VideoFrameDecoder())})
