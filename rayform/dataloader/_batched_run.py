"""The batched pass of ``RerunIterableDataset(batch_size=…)``: emission order cut into batches.

The per-sample pass yields one dict per sample and leaves batching to ``DataLoader``; for numeric
fields that per-sample work (a tensor object per value, a dict per sample, a stack per batch)
costs more than resolving and decoding. This pass takes the same emission order, the same screen
(skipping or refusing incomplete samples) and the same decoded blocks, but keeps each block by
field (:class:`~rayform.dataloader._block_columns.BlockColumns`) and cuts batches straight out of
the columns: a run of consecutive rows of a block is a view, anything else one ``index_select``
(:func:`~rayform.dataloader._block_columns.assemble_batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rayform.dataloader._block_columns import BlockColumns, Collate, assemble_batch, cat_rows
from rayform.dataloader._order_source import SampleScreen


def batched_run(blocks: Sequence[npt.NDArray[np.int64]], produced: Iterator[BlockColumns],
                todo: npt.NDArray[np.int64], sample_ids: npt.NDArray[np.int64], *,
                batch_size: int, screen: SampleScreen, keys: Sequence[str],
                collate_fn: Collate | None, consumed: Callable[[int], None]) -> Iterator[Any]:
    """Yield batches of ``batch_size`` admitted samples (the last one may be smaller).

    A batch whose samples all lie in blocks whose columns are all stacked and complete
    (:attr:`BlockColumns.dense`) is cut with one slice (consecutive rows) or one ``index_select``
    per key and block, with no per-sample work; any other batch is assembled piece by piece
    through the screen.

    Args:
        blocks: the fetch blocks, as stream positions, in the order ``produced`` decodes them.
        produced: the decoded blocks, in order.
        todo: stream positions in emission order (what this pass still has to consume).
        sample_ids: per stream position, the global sample index (for the screen's messages).
        consumed: told, before each batch is yielded and at the end, how many positions of
            ``todo`` this pass has consumed.
    """
    total, n = len(sample_ids), len(todo)
    block_of = np.full(total, -1, dtype=np.int64)
    local_of = np.zeros(total, dtype=np.int64)
    for k, block in enumerate(blocks):
        block_of[block] = k
        local_of[block] = np.arange(len(block), dtype=np.int64)
    todo_block, todo_local = block_of[todo], local_of[todo]
    same_block = np.diff(todo_block) == 0
    block_end = _run_ends(same_block, n)  # per emission position: end of its one-block run
    slice_end = _run_ends(same_block & (np.diff(todo_local) == 1), n)  # ... of consecutive rows
    todo_local_t = torch.from_numpy(todo_local)
    remaining = np.bincount(todo_block, minlength=len(blocks))
    decoded: dict[int, BlockColumns] = {}
    ready = 0
    pieces: list[tuple[BlockColumns, npt.NDArray[np.int64]]] = []
    filled = cursor = 0
    while cursor < n:
        if not filled and collate_fn is None:  # the fast path: dense blocks only
            stop = min(cursor + batch_size, n)
            parts: list[dict[str, torch.Tensor]] = []
            used: list[tuple[int, int]] = []  # (block, samples taken from it)
            at = cursor
            while at < stop:
                end = min(int(block_end[at]), stop)
                bid = int(todo_block[at])
                while ready <= bid:
                    decoded[ready] = next(produced)
                    ready += 1
                columns = decoded[bid]
                if not columns.dense:
                    break
                if slice_end[at] >= end:
                    first = int(todo_local[at])
                    parts.append(columns.slice(first, first + end - at))
                else:
                    parts.append(columns.select(todo_local_t[at:end]))
                used.append((bid, end - at))
                at = end
            if at == stop:
                screen.admit_complete(stop - cursor)
                for bid, count in used:
                    remaining[bid] -= count
                for bid, _ in used:
                    if not remaining[bid]:
                        decoded.pop(bid, None)
                cursor = stop
                consumed(cursor)
                yield parts[0] if len(parts) == 1 else {
                    key: cat_rows([part[key] for part in parts]) for key in parts[0]}
                continue
        chunk = todo[cursor:cursor + batch_size - filled]
        cursor += len(chunk)
        bids = block_of[chunk]
        top = int(bids.max())
        while ready <= top:
            decoded[ready] = next(produced)
            ready += 1
        cuts = np.flatnonzero(np.diff(bids)) + 1
        for run in np.split(chunk, cuts) if len(cuts) else (chunk,):
            columns = decoded[int(block_of[run[0]])]
            local = local_of[run]
            keep = screen.admit_many(columns.missing(keys, local), sample_ids[run])
            if not keep.all():
                local = local[keep]
            if len(local):
                pieces.append((columns, local))
                filled += len(local)
        remaining -= np.bincount(bids, minlength=len(blocks))
        if filled == batch_size or (cursor == n and filled):
            batch = assemble_batch(pieces, collate_fn)
            pieces, filled = [], 0
            for bid in [b for b in decoded if remaining[b] == 0]:
                del decoded[bid]
            consumed(cursor)
            yield batch
    consumed(cursor)


def _run_ends(continues: npt.NDArray[np.bool_], n: int) -> npt.NDArray[np.int64]:
    """Per position ``i`` of ``n``, the end (exclusive) of the run containing it, where
    ``continues[i]`` says that position ``i + 1`` is in the same run as ``i``."""
    breaks = np.append(np.flatnonzero(~continues) + 1, n).astype(np.int64)
    return breaks[np.searchsorted(breaks, np.arange(n, dtype=np.int64), side="right")]
