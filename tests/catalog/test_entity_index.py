"""Entity ranges found for all spans at once are those slicing each span finds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rayform.catalog._entity_index import int64_values, timeline_bounds


def _sliced(values: np.ndarray, valid: np.ndarray | None, start: int, stop: int
            ) -> tuple[int, int] | None:
    part = values[start:stop]
    if valid is not None:
        part = part[valid[start:stop]]
    return (int(part.min()), int(part.max())) if len(part) else None


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.integers(-2**63, 2**63 - 1), max_size=40),
       nulls=st.sampled_from(["none", "some", "all"]), seed=st.integers(0, 2**32 - 1),
       spans=st.lists(st.tuples(st.integers(-3, 45), st.integers(-3, 45)), max_size=12))
def test_bounds_of_every_span_are_those_of_its_slice(
        values: list[int], nulls: str, seed: int, spans: list[tuple[int, int]]) -> None:
    rng = np.random.default_rng(seed)
    mask = {"none": np.zeros(len(values), bool), "all": np.ones(len(values), bool),
            "some": rng.random(len(values)) < 0.4}[nulls]
    column = pa.chunked_array([pa.array(values, pa.int64(), mask=mask)])
    array, valid = int64_values(column)
    assert (valid is None) == (not mask.any())
    assert timeline_bounds(array, valid, spans) == [_sliced(array, valid, a, b) for a, b in spans]


def test_consecutive_spans_as_the_writer_lays_them_out() -> None:
    values = np.array([5, 1, 9, 2, 2, 7, 0, 3], np.int64)
    valid = np.array([True, True, True, False, False, True, True, False])
    spans = [(0, 3), (3, 5), (5, 8), (8, 8)]
    assert timeline_bounds(values, None, spans) == [(1, 9), (2, 2), (0, 7), None]
    assert timeline_bounds(values, valid, spans) == [(1, 9), None, (0, 7), None]
