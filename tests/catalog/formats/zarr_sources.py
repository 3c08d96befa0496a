"""Zarr replay buffers written with zarr-python for the tests: Diffusion Policy's ``ReplayBuffer``
layout (``data/*`` concatenated over episodes, ``meta/episode_ends``) and UMI's (the same, in a
``.zarr.zip``, with ``camera0_rgb`` uint8 pixels and ``robot0_*`` arrays), per
``diffusion_policy/common/replay_buffer.py`` and UMI's ``scripts_slam_pipeline/
07_generate_replay_buffer.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def replay_arrays(lengths: list[int], *, seed: int = 0, umi: bool = False,
                  timestamps: bool = False) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    if umi:
        arrays: dict[str, np.ndarray[Any, Any]] = {
            "camera0_rgb": rng.integers(0, 255, size=(n, 6, 8, 3), dtype=np.uint8),
            "robot0_eef_pos": rng.normal(size=(n, 3)).astype(np.float32),
            "robot0_eef_rot_axis_angle": rng.normal(size=(n, 3)).astype(np.float32),
            "robot0_gripper_width": rng.uniform(0, 0.08, size=(n, 1)).astype(np.float32),
        }
    else:
        arrays = {
            "img": rng.integers(0, 256, size=(n, 6, 8, 3)).astype(np.float32),  # PushT: float32
            "state": rng.normal(size=(n, 5)).astype(np.float32),
            "action": rng.normal(size=(n, 2)).astype(np.float32),
            "keypoint": rng.normal(size=(n, 9, 2)).astype(np.float32),
            "n_contacts": rng.integers(0, 3, size=(n, 1)).astype(np.float32),
        }
    if timestamps:
        arrays["timestamp"] = 1.7e9 + np.arange(n) / 10.0
    return arrays


def write_replay_buffer(store: Any, lengths: list[int], *, zarr_format: int = 2,
                        chunk_rows: int = 3, **kwargs: Any) -> dict[str, np.ndarray[Any, Any]]:
    """Write a replay buffer into ``store`` (a path or a zarr store); returns the data arrays."""
    import zarr

    arrays = replay_arrays(lengths, **kwargs)
    root = zarr.open_group(store=store, mode="w", zarr_format=zarr_format)
    data = root.create_group("data")
    meta = root.create_group("meta")
    for name, values in arrays.items():
        data.create_array(name, data=values,
                          chunks=(chunk_rows, *values.shape[1:]))
    meta.create_array("episode_ends", data=np.cumsum(lengths).astype(np.int64), chunks=(1000,))
    return arrays


def write_zip_buffer(path: Path, lengths: list[int], **kwargs: Any) -> dict[str, Any]:
    import zarr

    store = zarr.storage.ZipStore(path, mode="w")
    try:
        return write_replay_buffer(store, lengths, **kwargs)
    finally:
        store.close()
