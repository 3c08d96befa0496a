"""Allocator tuning: batch-sized buffers come from the heap once a dataset is built."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rayform.catalog import DatasetEntry

PROBE = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    from rayform.dataloader._allocator import tune_allocator

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    tuned = tune_allocator()
    before = libc.mallinfo2().hblkhd
    frame = np.empty(4 << 20, np.uint8)   # a batch-sized buffer
    mapped = libc.mallinfo2().hblkhd - before
    print(int(tuned), mapped)
""")


def _probe(env_value: str | None) -> tuple[bool, int]:
    import os

    env = dict(os.environ)
    env.pop("RAYFORM_TUNE_MALLOC", None)
    if env_value is not None:
        env["RAYFORM_TUNE_MALLOC"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, check=True, timeout=60).stdout.split()
    return bool(int(out[0])), int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt only")
def test_tuned_process_allocates_batches_on_the_heap() -> None:
    try:
        tuned, mapped = _probe(None)
    except subprocess.CalledProcessError as err:
        pytest.skip(f"mallinfo2 unavailable (not glibc >= 2.33): {err.stderr[-200:]}")
    assert tuned and mapped == 0
    untuned, mapped_default = _probe("0")
    assert not untuned and mapped_default >= 4 << 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt only")
def test_building_a_dataset_tunes_this_process(robots_dataset: DatasetEntry,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset, _allocator

    monkeypatch.setattr(_allocator, "_tuned_pid", -1)
    column = next(c for c in robots_dataset.schema().component_columns()
                  if c.endswith("Scalars:scalars"))
    index = robots_dataset.schema().index_columns()[0]
    kind = robots_dataset.schema().timeline_kind(index)
    if kind != "sequence":
        pytest.skip("fixture's first timeline is temporal")
    RerunMapDataset(DataSource(robots_dataset), index, {"x": Field(column, NumericDecoder())})
    assert _allocator._tuned_pid == os.getpid()
