"""OutputArena: the rows of one buffer shared out to the decode tasks of a field's block."""

from __future__ import annotations

import numpy as np
import torch

from rayform.decoders._output_arena import OutputArena


def test_tasks_get_disjoint_rows_of_one_buffer_in_request_order() -> None:
    positions = np.array([5, 0, 3, 1, 4, 2], dtype=np.int64)  # block positions, request order
    arena = OutputArena(positions)
    first = arena.rows(positions[:2], (3, 2))
    second = arena.rows(positions[2:], (3, 2))
    assert first is not None and second is not None
    assert first.shape == (2, 3, 2) and second.shape == (4, 3, 2) and first.dtype == torch.uint8
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    assert second.storage_offset() == first.storage_offset() + first.numel()
    first.fill_(1)
    second.fill_(2)
    assert int(first.sum()) == first.numel(), "the tasks' rows do not overlap"


def test_rows_refused_for_other_shapes_and_non_runs() -> None:
    positions = np.arange(4, dtype=np.int64)
    arena = OutputArena(positions)
    assert arena.rows(positions[:2], (5,)) is not None
    assert arena.rows(positions[2:], (6,)) is None, "the buffer is already shaped [4, 5]"
    assert arena.rows(np.array([1, 3], dtype=np.int64), (5,)) is None, "not consecutive"
    assert arena.rows(np.array([9], dtype=np.int64), (5,)) is None, "not a request here"
    assert arena.rows(np.zeros(0, dtype=np.int64), (5,)) is None
