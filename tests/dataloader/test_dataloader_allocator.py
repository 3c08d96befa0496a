"""The glibc tuning is opt-in: off by default, on with RAYFORM_TUNE_MALLOC=1 when a dataset is built."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from rayform.catalog import DatasetEntry

PROBE = textwrap.dedent("""
    import ctypes
    import numpy as np
    from rayform.dataloader._allocator import tune_allocator_if_asked

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    tuned = tune_allocator_if_asked()
    before = libc.mallinfo2().hblkhd
    batch = np.empty(4 << 20, np.uint8)   # a batch-sized buffer
    mapped = libc.mallinfo2().hblkhd - before
    print(int(tuned), mapped)
""")

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt only")


def _probe(env_value: str | None) -> tuple[bool, int]:
    env = dict(os.environ)
    env.pop("RAYFORM_TUNE_MALLOC", None)
    if env_value is not None:
        env["RAYFORM_TUNE_MALLOC"] = env_value
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             env=env, check=True, timeout=60).stdout.split()
    except subprocess.CalledProcessError as err:
        pytest.skip(f"mallinfo2 unavailable (not glibc >= 2.33): {err.stderr[-200:]}")
    return bool(int(out[0])), int(out[1])


@linux_only
def test_allocator_is_left_alone_by_default() -> None:
    tuned, mapped = _probe(None)
    assert not tuned and mapped >= 4 << 20


@linux_only
def test_opt_in_puts_batches_on_the_heap() -> None:
    tuned, mapped = _probe("1")
    assert tuned and mapped == 0


@linux_only
def test_building_a_dataset_tunes_only_when_asked(robots_dataset: DatasetEntry,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset, _allocator

    schema = robots_dataset.schema()
    column = next(c for c in schema.component_columns() if c.endswith("Scalars:scalars"))
    index = next(i for i in schema.index_columns() if schema.timeline_kind(i) == "sequence")
    fields = {"x": Field(column, NumericDecoder())}
    monkeypatch.setattr(_allocator, "_tuned_pid", -1)
    monkeypatch.delenv("RAYFORM_TUNE_MALLOC", raising=False)
    RerunMapDataset(DataSource(robots_dataset), index, fields)
    assert _allocator._tuned_pid == -1
    monkeypatch.setenv("RAYFORM_TUNE_MALLOC", "1")
    RerunMapDataset(DataSource(robots_dataset), index, fields)
    assert _allocator._tuned_pid == os.getpid()
