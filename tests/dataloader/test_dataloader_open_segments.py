"""A block opens the files of all its segments together, each segment once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset, _segment_columns


def test_a_block_opens_its_segments_concurrently_once(robots_dataset: DatasetEntry,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    schema = robots_dataset.schema()
    column = next(c for c in schema.component_columns() if c.endswith("Scalars:scalars"))
    index = schema.index_columns()[0]
    if schema.timeline_kind(index) != "sequence":
        pytest.skip("fixture's first timeline is temporal")
    ds = RerunMapDataset(DataSource(robots_dataset), index, {"x": Field(column, NumericDecoder())})
    opened: list[tuple[str, str]] = []
    original = type(robots_dataset).open_segment

    def recording(self: DatasetEntry, segment_id: str) -> object:
        opened.append((segment_id, threading.current_thread().name))
        return original(self, segment_id)

    monkeypatch.setattr(type(ds.pipeline.view), "open_segment", recording)
    monkeypatch.setattr(_segment_columns, "_open_pool",
                        _segment_columns.ThreadPool(4, name="test-open", helpers=True))
    offsets = ds.sample_index.segment_offsets
    one_per_segment = [int(o) for o in offsets[:-1]]
    assert len(one_per_segment) >= 3
    ds.__getitems__(one_per_segment + one_per_segment)
    threads = {name for _, name in opened}
    assert any(name.startswith("test-open") for name in threads), "opened on the pool"
    first_opens = [sid for sid, name in opened if name.startswith("test-open")
                   or name == threading.current_thread().name]
    assert sorted(set(first_opens)) == sorted(robots_dataset.segment_ids())
    before = len(opened)
    ds.__getitems__(np.array(one_per_segment[::-1]))
    pool_opens = [sid for sid, name in opened[before:] if name.startswith("test-open")]
    assert pool_opens == [], "segments already opened are not opened again"
