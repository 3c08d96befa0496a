"""PooledBatchCollator in the main process: batch buffers come back once a batch is dropped."""

from __future__ import annotations

import torch

from rayform.dataloader import PooledBatchCollator


def _samples(value: int) -> list[dict[str, torch.Tensor]]:
    return [{"image": torch.full((3, 64, 64), value + i, dtype=torch.uint8),
             "state": torch.full((7,), float(i))} for i in range(16)]


def test_a_dropped_batch_buffer_is_reused_and_a_held_one_never() -> None:
    collate = PooledBatchCollator()
    first = collate(_samples(0))
    assert first["image"].shape == (16, 3, 64, 64) and first["image"].dtype == torch.uint8
    assert first["image"][5, 0, 0, 0].item() == 5
    held = first["image"]
    second = collate(_samples(100))
    assert second["image"].data_ptr() != held.data_ptr(), "a held batch is never overwritten"
    assert held[5, 0, 0, 0].item() == 5 and second["image"][5, 0, 0, 0].item() == 105
    where = second["image"].data_ptr()
    del second
    third = collate(_samples(50))
    assert third["image"].data_ptr() == where, "the dropped batch's buffer is reused"
    assert torch.equal(third["image"], torch.stack([s["image"] for s in _samples(50)]))
    assert torch.equal(third["state"], torch.stack([s["state"] for s in _samples(50)]))
