"""Worker benchmark: DataLoader workers with and without PooledBatchCollator (JPEG camera).

Run ``python benchmarks/bench_workers.py`` (``BENCH_QUICK=1`` for a seconds-long smoke run).

The workload is ``bench_dataloader``'s: state, a 16-step action window and one 224x224 JPEG
camera on a 15 Hz grid, batch 32, through ``RerunMapDataset`` (``shuffle=True``) and
``RerunIterableDataset`` (``SampleShuffle``). Printed for ``num_workers`` 0 and 2, with
``default_collate`` and with ``PooledBatchCollator``: samples/s (persistent workers, worker
start-up excluded), samples per CPU-second, and the limit measured in the same run right before:
bare decode of the same JPEG bytes on as many threads as there are CPUs (the loader's workers use
all of them), with the ratio. A last line measures the move alone: the main process receiving
already-decoded image batches from 2 workers that do nothing else.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from bench_dataloader import (
    BATCH,
    IMAGE,
    QUICK,
    REPEATS,
    SAMPLING,
    all_fields,
    bare_decode_rate,
    cpu_seconds,
    median,
    report,
    write_workload,
)
from torch.utils.data import DataLoader, IterableDataset, default_collate

from rayform.dataloader import (
    DataSource,
    PooledBatchCollator,
    RerunIterableDataset,
    RerunMapDataset,
)

EPOCHS = 1 if QUICK else 3
MOVE_BATCHES = 60 if QUICK else 400


def live_children_cpu() -> float:
    """CPU seconds of this process's live child processes (persistent DataLoader workers)."""
    me, tick, total = os.getpid(), os.sysconf("SC_CLK_TCK"), 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # ppid; then utime and stime are fields 14 and 15 of stat
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def all_cpu_seconds() -> float:
    return cpu_seconds() + live_children_cpu()


def timed_epochs(loader: DataLoader[Any], epochs: int) -> tuple[float, float]:
    """(samples/s wall, samples per CPU-second of this process and its workers) over ``epochs``
    after one warm-up batch (persistent workers: their start-up is not timed)."""
    warm = iter(loader)
    next(warm)
    del warm
    c0, t0 = all_cpu_seconds(), time.perf_counter()
    samples = 0
    for _ in range(epochs):
        for batch in loader:
            samples += len(batch["state"])
    wall = time.perf_counter() - t0
    return samples / wall, samples / max(all_cpu_seconds() - c0, 1e-9)


class _DecodedImages(IterableDataset[dict[str, torch.Tensor]]):
    """Already-decoded frames: what a worker hands over once the decoding is done."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        frame = torch.zeros(3, IMAGE, IMAGE, dtype=torch.uint8)
        for _ in range(self._count):
            yield {"state": torch.zeros(7), "image": frame}


def move_rate(collate: Callable[[list[Any]], Any]) -> float:
    """Batches of 32 decoded images per second moved from 2 workers to the main process."""
    per_worker = MOVE_BATCHES * BATCH // 2
    loader = DataLoader(_DecodedImages(per_worker), batch_size=BATCH, num_workers=2,
                        collate_fn=collate)
    batches = 0
    it = iter(loader)
    next(it)  # workers started
    t0 = time.perf_counter()
    for batch in it:
        batch["image"][:, 0, 0, 0].sum()  # touch each image, as training would
        batches += 1
    return batches / (time.perf_counter() - t0)


def main() -> None:
    torch.set_num_threads(1)
    cpus = len(os.sched_getaffinity(0))
    print(f"rayform worker benchmark{' (quick)' if QUICK else ''}: batch {BATCH}, "
          f"{cpus} CPUs, python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"sharing strategy {torch.multiprocessing.get_sharing_strategy()}")
    with tempfile.TemporaryDirectory(prefix="rayform-bench-workers-") as tmp:
        dataset, blobs = write_workload(Path(tmp))
        sample = blobs[:: max(1, len(blobs) // 1200)]
        source = DataSource(dataset)
        for kind in ("map", "iterable"):
            if kind == "map":
                ds: Any = RerunMapDataset(source, "real_time", all_fields(),
                                          timeline_sampling=SAMPLING)
            else:
                ds = RerunIterableDataset(source, "real_time", all_fields(),
                                          timeline_sampling=SAMPLING)
            print(f"{kind} dataset, {len(ds):,} samples, 224x224 JPEG camera:")
            for workers in (0, 2):
                for name, collate in (("default_collate", default_collate),
                                      ("PooledBatchCollator", PooledBatchCollator())):
                    extra: dict[str, Any] = {"persistent_workers": True} if workers else {}
                    loader = DataLoader(ds, batch_size=BATCH, shuffle=kind == "map",
                                        num_workers=workers, collate_fn=collate, **extra)
                    runs = []
                    for _ in range(REPEATS):
                        limit = bare_decode_rate(sample, cpus)
                        rate, per_cpu = timed_epochs(loader, EPOCHS)
                        runs.append((rate, per_cpu, limit))
                    rate = median(r[0] for r in runs)
                    per_cpu = median(r[1] for r in runs)
                    limit = median(r[2] for r in runs)
                    report(f"num_workers={workers}, {name}", f"{rate:,.0f} samples/s",
                           f"{limit:,.0f}/s", median(r[0] / r[2] for r in runs),
                           f"({per_cpu:,.0f} per CPU-second; limit: bare decode, {cpus} threads)")
                    del loader
        plain = median(move_rate(default_collate) for _ in range(REPEATS))
        pooled = median(move_rate(PooledBatchCollator()) for _ in range(REPEATS))
        print(f"moving decoded batches of {BATCH} 3x{IMAGE}x{IMAGE} images from 2 workers: "
              f"default_collate {plain:,.0f} batches/s, PooledBatchCollator {pooled:,.0f} "
              f"batches/s ({pooled / plain:.1f}x; {cpus} CPUs)")


if __name__ == "__main__":
    main()
