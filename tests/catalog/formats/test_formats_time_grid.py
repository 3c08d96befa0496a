"""Timelines on the exact frame grid: LeRobot float32 timestamps snapped within LeRobot's
tolerance, the raw values kept, and the ``time_grid`` property that says what was done."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from format_sources import write_lerobot_v21

from rayform.catalog import Catalog
from rayform.errors import ConversionWarning
from rayform.importers._time_grid import GRID_SNAPPED, GRID_SOURCE, step_ns

G1 = "unitree-g1-lerobot-v21"
RAW = "/timestamp:Scalars:scalars"


def _properties(ds: object, segment: str) -> dict[str, object]:
    rows = {r["rerun_segment_id"]: r for r in ds.segment_table_arrow().to_pylist()}  # type: ignore[attr-defined]
    return {k.removeprefix("property:"): v for k, v in rows[segment].items()
            if k.startswith("property:")}


@pytest.mark.realdata
def test_unitree_samples_land_on_their_own_frame_with_tolerance_0(realdata: Path,
                                                                   catalog: Catalog) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("av")
    from rayform.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        NumericDecoder,
        RerunMapDataset,
    )

    torch.set_num_threads(1)
    ds = catalog.create_dataset("g1")
    with pytest.warns(ConversionWarning, match="have no data file"):
        ds.register(realdata / G1)
    loader = RerunMapDataset(DataSource(ds), "timestamp", {
        "raw": Field(RAW, NumericDecoder()),
        "state": Field("/observation.state:Scalars:scalars", NumericDecoder()),
    }, timeline_sampling=FixedRateSampling(rate_hz=30), sample_metadata=True)
    samples = [loader[i] for i in range(len(loader))]
    assert len(samples) == 221 + 277  # one sample per frame (497 before: the last fell short)
    # The row a sample took is the one whose raw timestamp is its own instant: none took the
    # previous frame (before the fix, 317 of 497 did).
    off = [s for s in samples
           if abs(float(s["raw"][0]) - int(s["meta"]["index_value"]) / 1e9) > 1e-4]
    assert off == []
    for segment in ("episode_000029", "episode_000030"):
        props = _properties(ds, segment)
        assert props["time_grid"] == GRID_SNAPPED
        assert 0 < float(props["time_grid_max_error_s"]) < 1e-4  # type: ignore[arg-type]
        source = pq.read_table(realdata / G1 / f"data/chunk-000/{segment}.parquet")
        seg = ds.open_segment(segment)
        raw = seg.column(RAW, "timestamp")
        np.testing.assert_array_equal(np.concatenate(raw.values.to_pylist()).astype(np.float32),
                                      source.column("timestamp").to_numpy())
        frames = source.column("frame_index").to_numpy()
        np.testing.assert_array_equal(np.asarray(raw.index, dtype=np.int64),
                                      frames * step_ns(30))


def test_timestamps_off_the_grid_are_kept_as_they_are(tmp_path: Path, catalog: Catalog) -> None:
    root = tmp_path / "ds"
    write_lerobot_v21(root, lengths={0: 4}, video=False)
    data = root / "data/chunk-000/episode_000000.parquet"
    table = pq.read_table(data)
    fps = json.loads((root / "meta/info.json").read_text())["fps"]
    jittered = (np.arange(4) / fps + np.array([0, 4e-4, 0, 0])).astype(np.float32)  # frame 1: 0.4 ms
    table = table.set_column(table.column_names.index("timestamp"), "timestamp",
                             pa.array(jittered))
    pq.write_table(table, data)
    ds = catalog.create_dataset("x")
    ds.register(root)
    assert _properties(ds, "episode_000000")["time_grid"] == GRID_SOURCE
    seg = ds.open_segment("episode_000000")
    assert RAW not in ds.schema().component_columns()
    index = np.asarray(seg.column("/observation.state:Scalars:scalars", "timestamp").index,
                       dtype=np.int64)
    np.testing.assert_array_equal(index, np.rint(jittered.astype(np.float64) * 1e9))
