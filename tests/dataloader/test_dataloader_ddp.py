"""A real torch.distributed gloo group of two processes on loopback shares each epoch."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from dataloader_ddp_worker import run_rank
from dataloader_factories import JOINTS

from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunIterableDataset, StableOrder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_gloo_ranks_see_disjoint_parts_of_each_epoch(robots_dataset: DatasetEntry,
                                                         tmp_path: Path) -> None:
    mp.spawn(run_rank, args=(2, _free_port(), robots_dataset.catalog.url, str(tmp_path)),
             nprocs=2, join=True)
    ranks = json.loads((tmp_path / "ranks.json").read_text())
    total = len(RerunIterableDataset(DataSource(robots_dataset), "frame_index",
                                     {"state": Field(JOINTS, NumericDecoder())}))
    for epoch in ("epoch0", "epoch1"):
        a, b = ranks[0][epoch], ranks[1][epoch]
        assert not set(a) & set(b), "ranks are disjoint"
        assert sorted(a + b) == list(range(total)), "together they cover the epoch"
        assert abs(len(a) - len(b)) <= 1
    assert ranks[0]["epoch0"] != ranks[0]["epoch1"], "set_epoch reshuffles"
    a, b = ranks[0]["sampler"], ranks[1]["sampler"]
    assert not set(a) & set(b) and sorted(a + b) == list(range(total))
    # StableOrder: the two ranks' chunks interleave into the single-process sequence.
    single = [s["meta"]["sample_index"] for s in RerunIterableDataset(
        DataSource(robots_dataset), "frame_index", {"state": Field(JOINTS, NumericDecoder())},
        sample_metadata=True, seed=5, stable_order=StableOrder(batch_size=4))]
    chunks = [single[i:i + 4] for i in range(0, len(single), 4)]
    assert ranks[0]["stable"] == [x for c in chunks[0::2] for x in c]
    assert ranks[1]["stable"] == [x for c in chunks[1::2] for x in c]
