"""Coordinate conventions: axis changes, quaternion round trips, unknown names."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rayform._frames import (
    axis_change,
    canonical_frame,
    convert_pose,
    matrix_to_quat,
    quat_to_matrix,
)
from rayform.errors import ConfigError

finite = st.floats(-100, 100, allow_nan=False)
unit = st.floats(-1, 1, allow_nan=False)


def test_axes_of_the_two_conventions() -> None:
    c = axis_change("ros", "opencv")
    forward, left, up = np.eye(3)
    np.testing.assert_array_equal(c @ forward, [0, 0, 1])  # OpenCV z is forward
    np.testing.assert_array_equal(c @ left, [-1, 0, 0])  # OpenCV x is right
    np.testing.assert_array_equal(c @ up, [0, -1, 0])  # OpenCV y is down
    np.testing.assert_array_equal(axis_change("opencv", "ros") @ c, np.eye(3))
    assert canonical_frame("FLU") == "ros" and canonical_frame("rdf") == "opencv"
    with pytest.raises(ConfigError, match="'enu' is not a known"):
        canonical_frame("enu")


@settings(max_examples=50, deadline=None)
@given(st.tuples(finite, finite, finite), st.tuples(unit, unit, unit, unit))
def test_round_trip_and_rotation_consistency(p: tuple[float, ...], q: tuple[float, ...]) -> None:
    quat = np.asarray(q)
    if np.linalg.norm(quat) < 1e-3:
        quat = np.array([0.0, 0.0, 0.0, 1.0])
    quat = quat / np.linalg.norm(quat)
    pose = np.concatenate([np.asarray(p), quat])
    cv = convert_pose(pose, "ros", "opencv")
    back = convert_pose(cv, "opencv", "ros")
    np.testing.assert_allclose(back[:3], pose[:3], atol=1e-9)
    # A quaternion and its negation are the same rotation.
    np.testing.assert_allclose(quat_to_matrix(back[3:]), quat_to_matrix(quat), atol=1e-9)
    c = axis_change("ros", "opencv")
    np.testing.assert_allclose(quat_to_matrix(cv[3:]), c @ quat_to_matrix(quat) @ c.T,
                               atol=1e-9)
    np.testing.assert_allclose(quat_to_matrix(matrix_to_quat(quat_to_matrix(quat))),
                               quat_to_matrix(quat), atol=1e-9)


def test_positions_and_bad_shapes() -> None:
    np.testing.assert_allclose(convert_pose(np.array([1.0, 2.0, 3.0]), "ros", "opencv"),
                               [-2.0, -3.0, 1.0])
    with pytest.raises(ConfigError, match=r"3 .* or 7"):
        convert_pose(np.zeros(4), "ros", "opencv")
