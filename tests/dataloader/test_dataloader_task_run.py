"""TaskRun.take_all: the calling thread takes its share of a block's decode tasks and returns while
the pool's threads finish theirs (the pipeline makes the columns that need no task meanwhile);
``finish`` waits for them and raises the first error only once they have stopped."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rayform.dataloader import Field
from rayform.dataloader._pipeline import FieldJob, FieldPlan, TaskRun
from rayform.decoders import ColumnDecoder, DecodeRequest, FieldBatch, RequestArrays
from rayform.decoders._base import DecodeConcurrency
from rayform.decoders._thread_pool import ThreadPool


class _Gate(ColumnDecoder):
    """The calling thread's task waits until a pool thread holds the other task, which waits
    for ``release``; with ``fail_here`` the calling thread's task raises."""

    def __init__(self, caller: threading.Thread, *, fail_here: bool) -> None:
        self.caller = caller
        self.fail_here = fail_here
        self.helper_started = threading.Event()
        self.release = threading.Event()
        self.helper_done = threading.Event()

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        return "requests"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        if threading.current_thread() is self.caller:
            assert self.helper_started.wait(10)
            if self.fail_here:
                raise ValueError("this thread's task failed")
        else:
            self.helper_started.set()
            assert self.release.wait(10)
            self.helper_done.set()
        return [r.sample_position for r in requests]


def _tasks(decoder: ColumnDecoder) -> list[tuple[FieldJob, RequestArrays]]:
    field = Field("/x:Scalars:scalars", decoder)
    plan = FieldPlan(key="x", field=field, offsets=np.zeros(1, dtype=np.int64),
                     keyframe_path=None, column_type=pa.list_(pa.float64()))
    requests = RequestArrays(sample_positions=np.arange(2, dtype=np.int64),
                             segment_ids=["a", "a"], index_values=np.arange(2, dtype=np.int64),
                             output_rows=np.zeros((2, 1), dtype=np.int64))
    job = FieldJob(plan=plan, batch=FieldBatch(column=pa.array([[0.0]], pa.list_(pa.float64()))),
                   requests=requests, missing=np.zeros(2, dtype=np.bool_))
    return [(job, requests[0:1]), (job, requests[1:2])]


@pytest.mark.parametrize("fail_here", [False, True])
def test_take_all_returns_while_the_pool_finishes(fail_here: bool) -> None:
    decoder = _Gate(threading.current_thread(), fail_here=fail_here)
    run = TaskRun(ThreadPool(2, name="test-task-run", background=True), threads=2, pooled=False)
    run.add(_tasks(decoder))
    run.take_all()  # this thread's task is done (or failed): the other is still running
    assert decoder.helper_started.is_set() and not decoder.helper_done.is_set()
    decoder.release.set()
    if fail_here:
        with pytest.raises(ValueError, match="this thread's task failed"):
            run.finish()
        assert decoder.helper_done.is_set()  # raised once the pool's thread had stopped
        return
    done = run.finish()
    assert [list(result) for _, result in done] == [[0], [1]]
