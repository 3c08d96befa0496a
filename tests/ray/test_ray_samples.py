"""rayform.ray.read_samples on a local cluster: the same samples as RerunMapDataset, by segment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray_episodes import ACTIONS, CAMERA, JOINTS

from rayform import ray as rf_ray
from rayform.catalog import Catalog
from rayform.ray._samples import META_COLUMNS

pytest.importorskip("ray")
pytest.importorskip("torch")

pytestmark = [
    pytest.mark.ray,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]


def test_read_samples_equal_the_map_dataset(
        ray_cluster: Any, episode_files: list[Path], make_catalog: Callable[..., Catalog]) -> None:
    from rayform.dataloader import DataSource, Field, ImageDecoder, NumericDecoder, RerunMapDataset

    ds = make_catalog().create_dataset("robots")
    ds.register(episode_files).wait()
    fields = {"state": Field(JOINTS, NumericDecoder()),
              "action": Field(ACTIONS, NumericDecoder(), window=(0, 1, 2, 3)),
              "image": Field(CAMERA, ImageDecoder())}
    source = DataSource(ds, segments=["ep0", "ep2", "ep3"])
    expected = RerunMapDataset(source, "frame_index", fields, sample_metadata=True)
    dataset = rf_ray.read_samples(source, "frame_index", fields, sample_metadata=True,
                                  samples_per_block=32,
                                  options=rf_ray.TaskOptions(segments_per_task=2))
    rows = dataset.take_all()
    assert len(rows) == len(expected) > 0
    assert sorted(r["meta.sample_index"] for r in rows) == list(range(len(expected)))
    for row in rows[::7]:
        sample = expected[row["meta.sample_index"]]
        assert row["meta.segment_id"] == sample["meta"]["segment_id"]
        assert row["meta.index_value"] == sample["meta"]["index_value"]
        for key in fields:
            np.testing.assert_array_equal(row[key], sample[key].numpy(), err_msg=key)
    batch = next(iter(dataset.drop_columns([f"meta.{n}" for n in META_COLUMNS])
                      .iter_torch_batches(batch_size=8)))
    assert tuple(batch["action"].shape) == (8, 4, 7)
    assert tuple(batch["image"].shape) == (8, 3, 12, 16)
