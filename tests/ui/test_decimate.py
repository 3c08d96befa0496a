"""The min/max envelope the plots draw: every extreme kept, bounded size, chunking invisible."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rayform.ui import _decimate
from rayform.ui._decimate import decimate, svg_paths


def test_a_one_sample_spike_survives_decimation() -> None:
    t = np.linspace(0, 10, 100_000)
    values = np.zeros((100_000, 2))
    values[54_321, 1] = 7.5
    values[12_345, 0] = -3.0
    env = decimate(t, values, width=300, span_s=(0.0, 10.0))
    assert env.low.shape == env.high.shape == (300, 2)
    assert env.high[:, 1].max() == 7.5 and env.low[:, 0].min() == -3.0
    assert np.all(np.diff(env.t_s) > 0)


def test_short_signals_are_kept_as_they_are() -> None:
    t = np.arange(10, dtype=np.float64)
    values = np.arange(20, dtype=np.float64).reshape(10, 2)
    env = decimate(t, values, width=100, span_s=(0.0, 9.0))
    assert np.array_equal(env.low, values) and np.array_equal(env.t_s, t)


@given(n=st.integers(50, 3000), width=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_chunks_give_the_envelope_of_the_whole(n: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 5, n))
    values = rng.normal(size=(n, 3))
    values[rng.integers(0, n, 5), 1] = np.nan
    whole = decimate(t, values, width=width, span_s=(0.0, 5.0))
    saved = _decimate.CHUNK_ROWS
    _decimate.CHUNK_ROWS = 17
    try:
        chunked = decimate(t, values, width=width, span_s=(0.0, 5.0))
    finally:
        _decimate.CHUNK_ROWS = saved
    np.testing.assert_array_equal(whole.low, chunked.low)
    np.testing.assert_array_equal(whole.high, chunked.high)
    if n > 2 * width:  # each column's extremes are those of its samples
        column = np.clip((t * width / 5.0).astype(int), 0, width - 1)
        for c, lo in zip(np.unique(column), whole.low[:, 0], strict=True):
            assert lo == values[column == c, 0].min()


def test_svg_paths_lift_the_pen_over_nan() -> None:
    t = np.arange(6, dtype=np.float64)
    values = np.array([[0.0], [1.0], [np.nan], [np.nan], [1.0], [0.0]])
    env = decimate(t, values, width=100, span_s=(0.0, 5.0))
    (path,) = svg_paths(env, span_s=(0.0, 5.0), width=100, height=50, y_range=(0.0, 1.0))
    assert path.count("M") == 2 and path.startswith("M0.0 48.0")


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError, match="width"):
        decimate(np.zeros(1), np.zeros((1, 1)), width=0, span_s=(0.0, 1.0))
