"""Bad configurations give clear errors; skipping limits; snapshot pinning; pickling; public API."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dataloader_factories import GRIPPER, JOINTS, Episode, write_episode

import rayform.dataloader
import rayform.decoders
from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    StableOrder,
)
from rayform.errors import ColumnNotFoundError, ConfigError, SegmentNotFoundError

Q = Field(JOINTS, NumericDecoder())


def test_unknown_column_and_timeline(robots_dataset: DatasetEntry) -> None:
    src = DataSource(robots_dataset)
    with pytest.raises(ColumnNotFoundError, match=r"unknown column '/joint:Scalars:scalars'"):
        RerunMapDataset(src, "frame_index", {"q": Field("/joint:Scalars:scalars",
                                                        NumericDecoder())})
    with pytest.raises(ColumnNotFoundError, match="unknown index timeline 'frame'"):
        RerunIterableDataset(src, "frame", {"q": Q})


def test_window_and_sampling_errors(robots_dataset: DatasetEntry) -> None:
    src = DataSource(robots_dataset)
    with pytest.raises(ValueError, match=r"Field 'a'.*sequence timeline 'frame_index'.*0\.5"):
        RerunMapDataset(src, "frame_index", {"a": Field(JOINTS, NumericDecoder(),
                                                        window=(-1, 0.5))})
    with pytest.raises(TypeError, match="timeline_sampling=FixedRateSampling"):
        RerunMapDataset(src, "real_time", {"q": Q})
    ds = RerunMapDataset(src, "real_time", {"a": Field(JOINTS, NumericDecoder(),
                                                       window=(-0.05, 0.025))},
                         timeline_sampling=FixedRateSampling(rate_hz=10))
    assert len(ds) > 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"window": ()}, "at least one offset"),
    ({"window": (0, math.inf)}, "finite numbers"),
    ({"window": (0, True)}, "finite numbers"),
    ({"window": "0,1"}, "tuple of offsets"),
    ({"max_staleness": -1}, r"Field\.max_staleness"),
    ({"max_staleness": math.nan}, r"Field\.max_staleness"),
    ({"max_staleness": math.inf}, r"Field\.max_staleness"),
])
def test_field_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Field(JOINTS, NumericDecoder(), **kwargs)


def test_other_argument_errors(robots_dataset: DatasetEntry) -> None:
    src = DataSource(robots_dataset)
    with pytest.raises(ColumnNotFoundError, match="column name"):  # checked against the dataset
        RerunMapDataset(src, "frame_index", {"q": Field("nothing_here", NumericDecoder())})
    with pytest.raises(TypeError, match="ColumnDecoder instance"):
        Field(JOINTS, NumericDecoder)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DatasetEntry, DatasetView or Slice"):
        DataSource("robots")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="edge must be"):
        RerunMapDataset(src, "frame_index", {"q": Q}, edge="clamp")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="decode_threads"):
        RerunMapDataset(src, "frame_index", {"q": Q}, decode_threads=0)
    with pytest.raises(ConfigError, match="fetch_block_size"):
        RerunIterableDataset(src, "frame_index", {"q": Q}, fetch_block_size=0)
    with pytest.raises(ConfigError, match="max_consecutive_skipped_samples"):
        RerunIterableDataset(src, "frame_index", {"q": Q}, max_consecutive_skipped_samples=-1)
    with pytest.raises(TypeError, match="shuffle_strategy"):
        RerunIterableDataset(src, "frame_index", {"q": Q},
                             shuffle_strategy="block")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="collide"):
        RerunMapDataset(src, "frame_index", {"meta": Q}, sample_metadata=True)
    with pytest.raises(ConfigError, match="collide"):
        RerunMapDataset(src, "frame_index",
                        {"a": Field(JOINTS, NumericDecoder(), window=(0, 1)), "a_is_pad": Q},
                        edge="pad")
    with pytest.raises(ConfigError, match="at least one Field"):
        RerunMapDataset(src, "frame_index", {})
    with pytest.raises(IndexError):
        RerunMapDataset(src, "frame_index", {"q": Q})[-1]


def test_skip_limit(robots_dataset: DatasetEntry) -> None:
    fields = {"q": Q, "gripper": Field(GRIPPER, NumericDecoder())}

    def run(limit: int | None, stable: StableOrder | None = None) -> list[Any]:
        return list(RerunIterableDataset(DataSource(robots_dataset), "frame_index", fields,
                                         shuffle_strategy=NoShuffle(), stable_order=stable,
                                         max_consecutive_skipped_samples=limit))

    for stable in (None, StableOrder(batch_size=4)):
        with pytest.warns(RuntimeWarning, match="'gripper' has no value"):
            assert len(run(2, stable)) == len(run(None, stable)) > 0
        with pytest.warns(RuntimeWarning), \
                pytest.raises(RuntimeError, match=r"max_consecutive_skipped_samples=1.*gripper="):
            run(1, stable)


def test_datasets_pin_their_snapshot(fresh_dataset: tuple[DatasetEntry, list[Episode]],
                                     tmp_path: Path) -> None:
    dataset, _ = fresh_dataset
    ds = RerunMapDataset(DataSource(dataset), "frame_index", {"q": Q})
    before = len(ds)
    extra = write_episode(tmp_path / "more.rfr", "ep9", seed=9, num_frames=12)
    dataset.register([tmp_path / "more.rfr"])
    assert extra.segment_id in dataset.segment_ids()
    assert len(ds) == before
    clone = pickle.loads(pickle.dumps(ds))
    assert len(clone) == before
    assert clone[3]["q"].tolist() == ds[3]["q"].tolist()
    assert len(RerunMapDataset(DataSource(dataset), "frame_index", {"q": Q})) == before + 12


def test_public_api_is_sorted_and_importable() -> None:
    for module in (rayform.dataloader, rayform.decoders):
        assert module.__all__ == sorted(module.__all__)
        for name in module.__all__:
            if name not in ("VideoFrameDecoder", "Yuv420Collator", "Yuv420Frame") and \
                    name not in getattr(module, "_LAZY", {}):
                assert getattr(module, name) is not None
    code = ("import sys, rayform.dataloader, rayform.decoders; "
            "assert 'rayform.decoders._video' not in sys.modules; assert 'av' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_empty_selection_yields_nothing(robots_dataset: DatasetEntry) -> None:
    with pytest.raises(SegmentNotFoundError, match=r"DataSource: dataset 'robots' has no "
                                                   r"segment\(s\) \['no-such-segment'\]"):
        DataSource(robots_dataset, segments=["ep0", "no-such-segment"])
    src = DataSource(robots_dataset, segments=[])
    for strategy in (None, NoShuffle()):
        ds = RerunIterableDataset(src, "frame_index", {"q": Q}, shuffle_strategy=strategy)
        assert len(ds) == 0 and list(ds) == []
    assert len(RerunMapDataset(src, "frame_index", {"q": Q})) == 0
