"""Coordinate conventions of pose-valued data and conversions between them (numpy, no torch).

A convention names which way the axes point. Both the reference frame and the body frame of a
pose follow the recording's convention, so converting from convention ``a`` to ``b`` with the
axis change ``C`` (``v_b = C v_a``) maps a position ``p`` to ``C p`` and a rotation ``R`` to
``C R Cᵀ``. Quaternions are ``(x, y, z, w)``.

========== ============================================ ================
name       axes                                         also known as
========== ============================================ ================
``ros``    x forward, y left, z up (REP 103)            ``flu``
``opencv`` x right, y down, z forward (camera optical)  ``rdf``
========== ============================================ ================
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayform.errors import ConfigError

# Rows: the convention's axes written in ROS axes (v_conv = M @ v_ros).
_FROM_ROS: dict[str, npt.NDArray[np.float64]] = {
    "ros": np.eye(3),
    "opencv": np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]]),
}
_ALIASES = {"flu": "ros", "rdf": "opencv"}
FRAME_CONVENTIONS: tuple[str, ...] = tuple(sorted([*_FROM_ROS, *_ALIASES]))


def canonical_frame(name: object, *, what: str = "frame") -> str:
    """The canonical name of a convention (aliases resolved).

    Raises:
        ConfigError: not a known convention.
    """
    if isinstance(name, str):
        key = name.strip().lower()
        key = _ALIASES.get(key, key)
        if key in _FROM_ROS:
            return key
    raise ConfigError(
        f"{what} {name!r} is not a known coordinate convention; use one of "
        f"{list(FRAME_CONVENTIONS)} ('ros': x forward, y left, z up; 'opencv': x right, y down, "
        "z forward)"
    )


def axis_change(source: str, target: str) -> npt.NDArray[np.float64]:
    """``C`` with ``v_target = C @ v_source``."""
    return _FROM_ROS[canonical_frame(target)] @ _FROM_ROS[canonical_frame(source)].T


def quat_to_matrix(q: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[..., 4]`` (x, y, z, w) quaternions to ``[..., 3, 3]`` rotation matrices."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def matrix_to_quat(m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[..., 3, 3]`` rotation matrices to ``[..., 4]`` (x, y, z, w) quaternions with w >= 0."""
    flat = m.reshape(-1, 3, 3)
    out = np.empty((len(flat), 4))
    for i, r in enumerate(flat):
        trace = r[0, 0] + r[1, 1] + r[2, 2]
        if trace > 0:
            s = 2.0 * np.sqrt(trace + 1.0)
            out[i] = [(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s,
                      (r[1, 0] - r[0, 1]) / s, 0.25 * s]
        elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
            s = 2.0 * np.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
            out[i] = [0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s,
                      (r[2, 1] - r[1, 2]) / s]
        elif r[1, 1] > r[2, 2]:
            s = 2.0 * np.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
            out[i] = [(r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s,
                      (r[0, 2] - r[2, 0]) / s]
        else:
            s = 2.0 * np.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
            out[i] = [(r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s,
                      (r[1, 0] - r[0, 1]) / s]
    out[out[:, 3] < 0] *= -1
    return out.reshape((*m.shape[:-2], 4))


def convert_pose(pose: npt.NDArray[np.float64], source: str, target: str
                 ) -> npt.NDArray[np.float64]:
    """Re-express ``[..., 3]`` positions or ``[..., 7]`` poses (position, quaternion xyzw).

    Raises:
        ConfigError: an unknown convention, or a last dimension other than 3 or 7.
    """
    c = axis_change(source, target)
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape[-1] not in (3, 7):
        raise ConfigError(
            f"a pose must have 3 (position) or 7 (position + quaternion xyzw) values, got shape "
            f"{pose.shape}"
        )
    if np.array_equal(c, np.eye(3)):
        return pose
    out = pose.copy()
    out[..., :3] = pose[..., :3] @ c.T
    if pose.shape[-1] == 7:
        out[..., 3:] = matrix_to_quat(c @ quat_to_matrix(pose[..., 3:]) @ c.T)
    return out
