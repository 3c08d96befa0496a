"""Rows gathered and joined in their memory layout: channels-last views stay channels-last."""

from __future__ import annotations

import torch

from rayform.dataloader._block_columns import cat_rows, gather_rows


def _channels_last(n: int, *, window: int = 0) -> torch.Tensor:
    shape = (n, window, 5, 6, 3) if window else (n, 5, 6, 3)
    interleaved = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.int32).reshape(shape)
    return interleaved.movedim(-1, -3)  # [..., C, H, W] over [..., H, W, C]


def test_gather_rows_equals_index_select_and_keeps_the_layout() -> None:
    for tensor in (_channels_last(7), _channels_last(7, window=2)):
        rows = torch.tensor([5, 0, 0, 3])
        got = gather_rows(tensor, rows)
        assert torch.equal(got, tensor.index_select(0, rows))
        assert got.stride(-3) == 1 and got.stride(-1) == 3, "still channels last"
    plain = torch.arange(24).reshape(4, 3, 2)
    got = gather_rows(plain, torch.tensor([3, 1]))
    assert torch.equal(got, plain[[3, 1]]) and got.is_contiguous()


def test_cat_rows_equals_cat_and_keeps_the_layout() -> None:
    a, b = _channels_last(3), _channels_last(4)[1:]
    got = cat_rows([a, b])
    assert torch.equal(got, torch.cat([a, b])) and got.is_contiguous(memory_format=torch.channels_last)
    assert cat_rows([a]) is a
    mixed = cat_rows([a, b.contiguous()])  # layouts differ: torch.cat decides
    assert torch.equal(mixed, torch.cat([a, b]))
    plain = [torch.arange(6).reshape(2, 3), torch.arange(3).reshape(1, 3)]
    assert torch.equal(cat_rows(plain), torch.cat(plain))
