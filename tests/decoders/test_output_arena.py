"""OutputArena: one block-ordered buffer whose rows the decode tasks of a field's block share."""

from __future__ import annotations

import numpy as np
import torch

from rayform.decoders._output_arena import OutputArena


def test_tasks_write_their_requests_at_their_block_positions() -> None:
    positions = np.array([5, 0, 3, 1, 4, 2], dtype=np.int64)  # block positions, request order
    arena = OutputArena(7, positions)  # block of 7 samples; sample 6 has no request
    first = arena.rows(positions[:2], (3, 2))
    second = arena.rows(positions[2:], (3, 2))
    assert first is not None and second is not None
    buffer, rows = first
    assert buffer is second[0], "one buffer for the block"
    assert buffer.shape == (7, 3, 2) and buffer.dtype == torch.uint8
    assert rows.tolist() == [5, 0] and second[1].tolist() == [3, 1, 4, 2]
    buffer[rows] = 1
    buffer[second[1]] = 2
    assert int((buffer[[5, 0]] == 1).sum()) == 12, "the tasks' rows do not overlap"


def test_rows_refused_for_other_shapes_and_unknown_positions() -> None:
    positions = np.array([0, 2, 3], dtype=np.int64)
    arena = OutputArena(4, positions)
    assert arena.rows(positions[:2], (5,)) is not None
    assert arena.rows(positions[2:], (6,)) is None, "the buffer is already shaped [4, 5]"
    assert arena.rows(np.array([1], dtype=np.int64), (5,)) is None, "not a request here"
    assert arena.rows(np.array([9], dtype=np.int64), (5,)) is None, "outside the block"
    assert arena.rows(np.zeros(0, dtype=np.int64), (5,)) is None


def test_derived_views_are_made_once_per_block() -> None:
    """The tasks of a block share one view of the buffer (made by the first to ask), so that
    they make no torch calls of their own between decodes."""
    positions = np.array([1, 0, 2], dtype=np.int64)
    arena = OutputArena(3, positions)
    assert arena.rows(positions[:1], (2, 4)) is not None
    made: list[int] = []

    def view(buffer: torch.Tensor) -> torch.Tensor:
        made.append(1)
        return buffer.permute(0, 2, 1)

    first = arena.derived("t", view)
    assert arena.rows(positions[1:], (2, 4)) is not None
    assert arena.derived("t", view) is first and len(made) == 1
    assert first.shape == (3, 4, 2) and first.data_ptr() == arena.rows(positions, (2, 4))[0].data_ptr()
    assert arena.derived("other", lambda b: b[:, 0]) is not first and len(made) == 1
