"""Concurrency: two processes registering into the same dataset at the same moment both land."""

from __future__ import annotations

import multiprocessing as mp
import tempfile
from multiprocessing.synchronize import Barrier
from pathlib import Path

import numpy as np

import rayform
from rayform.catalog import Catalog

ROUNDS = 15
WORKERS = 2


def _worker(url: str, worker: int, barrier: Barrier) -> None:
    """Register one new segment per round, every round starting at a shared barrier."""
    catalog = Catalog.open(url)
    ds = catalog.create_dataset("shared", exist_ok=True)  # both may race to create it
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for r in range(ROUNDS):
            paths.append(Path(tmp) / f"{r}.rfr")
            with rayform.RecordingWriter(paths[-1], recording_id=f"w{worker}-r{r:02d}") as rec:
                rec.set_properties(worker=worker, round=r)
                rec.log_scalars("/x", timelines={"t": np.arange(5)},
                                values=np.full(5, worker * 100 + r, np.int64))
        for path in paths:
            barrier.wait(timeout=120)
            ds.register(path).wait()


def test_two_processes_register_at_once(tmp_path: Path) -> None:
    url = Catalog.create(tmp_path / "cat").url
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=_worker, args=(url, w, barrier)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WORKERS

    catalog = Catalog.open(url)
    assert catalog.dataset_names() == ["shared"]
    ds = catalog.get_dataset("shared")
    expected = sorted(f"w{w}-r{r:02d}" for w in range(WORKERS) for r in range(ROUNDS))
    assert ds.segment_ids() == expected
    # One snapshot per registration, each extending the previous one: no update was lost.
    assert ds.snapshot_version == WORKERS * ROUNDS
    previous: set[str] = set()
    for number in range(1, ds.snapshot_version + 1):
        ids = set(ds.at_version(number).segment_ids())
        assert previous < ids and len(ids - previous) == 1, number
        previous = ids
    table = ds.reader("t").to_arrow_table()
    assert table.num_rows == WORKERS * ROUNDS * 5
    values = {(s, v[0]) for s, v in zip(table.column("rerun_segment_id").to_pylist(),
                                        table.column("/x:Scalars:scalars").to_pylist(),
                                        strict=True)}
    assert values == {(f"w{w}-r{r:02d}", w * 100 + r) for w in range(WORKERS)
                      for r in range(ROUNDS)}
