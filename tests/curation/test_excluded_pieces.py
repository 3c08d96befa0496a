"""The sample grid around excluded ranges: exactly the samples whose window touches none."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rayform.dataloader._sample_index import _allowed_pieces


@given(lo=st.integers(-50, 50), count=st.integers(0, 80), step=st.integers(1, 7),
       window=st.tuples(st.integers(-9, 0), st.integers(0, 9)),
       ranges=st.lists(st.tuples(st.integers(-100, 700), st.integers(0, 40)), max_size=4))
def test_pieces_are_the_untouched_samples(lo: int, count: int, step: int,
                                          window: tuple[int, int],
                                          ranges: list[tuple[int, int]]) -> None:
    spans = [(a, a + n) for a, n in ranges]
    values = lo + step * np.arange(count)
    touched = np.zeros(count, dtype=bool)
    for a, b in spans:
        touched |= (values + window[1] >= a) & (values + window[0] <= b)
    pieces = _allowed_pieces(lo, count, step, window, spans)
    got = np.zeros(count, dtype=bool)
    for k, n in pieces:
        assert n > 0 and not got[k:k + n].any()
        got[k:k + n] = True
    np.testing.assert_array_equal(got, ~touched)
    assert [k for k, _ in pieces] == sorted(k for k, _ in pieces)
