"""The per-rank body of the torch.distributed test (imported by spawned processes)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from dataloader_factories import JOINTS

from rayform.catalog import Catalog
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    ResumableSampler,
    StableOrder,
)


def _ids(samples: Any) -> list[int]:
    return [int(s["meta"]["sample_index"]) for s in samples]


def run_rank(rank: int, world_size: int, port: int, catalog_url: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        dataset = Catalog.open(catalog_url).get_dataset("robots")
        fields = {"state": Field(JOINTS, NumericDecoder())}
        result: dict[str, Any] = {}
        ds = RerunIterableDataset(DataSource(dataset), "frame_index", fields,
                                  fetch_block_size=8, sample_metadata=True,
                                  shuffle_strategy=BlockShuffle(buffer_size=4))
        for epoch in (0, 1):
            ds.set_epoch(epoch)
            result[f"epoch{epoch}"] = _ids(ds)
        stable = RerunIterableDataset(DataSource(dataset), "frame_index", fields,
                                      sample_metadata=True, seed=5,
                                      stable_order=StableOrder(batch_size=4))
        result["stable"] = _ids(stable)
        mds = RerunMapDataset(DataSource(dataset), "frame_index", fields)
        result["sampler"] = list(ResumableSampler(mds, seed=2))
        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, result)
        if rank == 0:
            Path(out_dir, "ranks.json").write_text(json.dumps(gathered))
    finally:
        dist.destroy_process_group()
