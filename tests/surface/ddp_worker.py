"""One rank of the DDP test: reads a slice directly, through a DistributedSampler, and through
the guide's plain ``DataLoader(shuffle=True)`` (no sampler: the dataset shards by rank).

Usage: ``python ddp_worker.py RANK WORLD INIT_FILE CATALOG SLICE_ID OUT_JSON``.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import rayform


def main() -> None:
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    init_file, catalog, slice_id, out = sys.argv[3:7]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    slice_ = rayform.Client(catalog).slices.get(slice_id)
    # The guide's distributed snippet (num_workers kept at 0 on this small machine).
    dataset = rayform.torch.EpisodeDataset(slice_, obs=["cam0/rgb"],
                                           action="joints/position_delta", fps=15)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=0)

    assert isinstance(sampler, DistributedSampler)
    dataset.set_epoch(1)
    sampler.set_epoch(1)
    direct = [[s["meta"]["segment"], int(s["t_ns"])] for s in dataset]
    via_sampler = [[seg, int(t)] for batch in loader
                   for seg, t in zip(batch["meta"]["segment"], batch["t_ns"], strict=True)]
    # The guide's five-line loader, without a DistributedSampler: the dataset shards itself.
    plain = rayform.torch.EpisodeDataset(slice_, obs=["cam0/rgb"],
                                         action="joints/position_delta", fps=15)
    plain.set_epoch(1)
    guide_loader = DataLoader(plain, batch_size=64, num_workers=1, shuffle=True,
                              persistent_workers=True)
    via_plain = [[seg, int(t)] for batch in guide_loader
                 for seg, t in zip(batch["meta"]["segment"], batch["t_ns"], strict=True)]
    plain_len = len(plain)
    sizes: list[int] = [0] * world
    dist.all_gather_object(sizes, len(direct))
    dist.barrier()
    dist.destroy_process_group()
    with open(out, "w") as fh:
        json.dump({"len": len(dataset), "direct": direct, "sampler": via_sampler,
                   "sizes": sizes, "plain": via_plain, "plain_len": plain_len,
                   "num_samples": plain.num_samples}, fh)


if __name__ == "__main__":
    main()
