"""HDF5 fixtures written from the layouts' own documentation (no public sample is small enough).

- ALOHA/ACT: the datasets and attributes that ACT's ``record_sim_episodes.py`` (tonyzhaozh/act)
  and ALOHA's ``record_episodes.py`` (tonyzhaozh/aloha, with ``COMPRESS``: JPEG rows zero-padded
  to the longest, ``compress_len`` of shape (cameras, T)) create.
- robomimic: robomimic's documentation, "Dataset structure" (``data`` attrs ``total`` and
  ``env_args``; ``data/demo_N`` with ``num_samples``, ``actions``, ``rewards``, ``dones``,
  ``states``, ``obs/*``, ``next_obs/*``; ``mask/<split>`` of demo names); LIBERO's
  ``problem_info`` attribute (``language_instruction``) and RoboCasa's per-demo ``ep_meta`` (``lang``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

ALOHA_CAMERAS = ("top", "left_wrist")


def frames(count: int, height: int, width: int, seed: int) -> np.ndarray:
    """Deterministic ``uint8 (count, height, width, 3)`` frames."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (count, height, width, 3), dtype=np.uint8)
    return base


def jpeg(frame: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(frame).save(out, format="JPEG", quality=80)
    return out.getvalue()


def write_aloha(path: Path, *, count: int = 12, compress: bool = False, sim: bool = True,
                height: int = 24, width: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    """An ALOHA episode file; returns what was written (image rows as stored)."""
    import h5py

    rng = np.random.default_rng(seed)
    written: dict[str, np.ndarray] = {
        "observations/qpos": rng.standard_normal((count, 14)),
        "observations/qvel": rng.standard_normal((count, 14)),
        "observations/effort": rng.standard_normal((count, 14)).astype(np.float32),
        "action": rng.standard_normal((count, 14)),
    }
    with h5py.File(path, "w", rdcc_nbytes=1024 ** 2 * 2) as root:
        root.attrs["sim"] = sim
        if compress:
            root.attrs["compress"] = True
        for name, values in written.items():
            root.create_dataset(name, data=values)
        lengths = []
        for i, cam in enumerate(ALOHA_CAMERAS):
            pixels = frames(count, height, width, seed + 10 + i)
            if compress:
                blobs = [jpeg(f) for f in pixels]
                lengths.append([len(b) for b in blobs])
                padded = np.zeros((count, max(len(b) for b in blobs) + 7), dtype=np.uint8)
                for row, blob in enumerate(blobs):
                    padded[row, :len(blob)] = np.frombuffer(blob, np.uint8)
                root.create_dataset(f"observations/images/{cam}", data=padded,
                                    chunks=(1, padded.shape[1]))
                written[f"observations/images/{cam}"] = padded
            else:
                root.create_dataset(f"observations/images/{cam}", data=pixels,
                                    chunks=(1, height, width, 3))
                written[f"observations/images/{cam}"] = pixels
        if compress:
            # ALOHA creates it with h5py's default dtype (float32), in its camera list's order.
            root.create_dataset("compress_len", data=np.asarray(lengths[::-1], np.float32))
    return written


def write_robomimic(path: Path, *, lengths: dict[int, int], masks: dict[str, list[int]] | None = None,
                    control_freq: int | None = 20, libero_task: str | None = None,
                    robocasa_lang: dict[int, str] | None = None, image: bool = True,
                    seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    """A robomimic-layout file with demos ``demo_<N>`` of the given lengths; returns the arrays."""
    import h5py

    rng = np.random.default_rng(seed)
    env_kwargs: dict[str, object] = {"robots": ["Panda"], "has_renderer": False}
    if control_freq is not None:
        env_kwargs["control_freq"] = control_freq
    env_args = {"env_name": "Lift", "type": 1, "env_kwargs": env_kwargs}
    written: dict[int, dict[str, np.ndarray]] = {}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = sum(lengths.values())
        data.attrs["env_args"] = json.dumps(env_args)
        if libero_task is not None:
            data.attrs["problem_info"] = json.dumps({
                "problem_name": "libero_tabletop_manipulation", "domain_name": "robosuite",
                "language_instruction": libero_task})
        for n, count in lengths.items():
            demo = data.create_group(f"demo_{n}")
            demo.attrs["num_samples"] = count
            demo.attrs["model_file"] = "<mujoco model='base'></mujoco>"
            if robocasa_lang and n in robocasa_lang:
                demo.attrs["ep_meta"] = json.dumps({"lang": robocasa_lang[n], "layout_id": 3})
            arrays = {
                "actions": rng.uniform(-1, 1, (count, 7)),
                "rewards": (np.arange(count) == count - 1).astype(np.float64),
                "dones": (np.arange(count) == count - 1).astype(np.int64),
                "states": rng.standard_normal((count, 32)),
                "obs/robot0_eef_pos": rng.standard_normal((count, 3)),
                "obs/robot0_joint_pos": rng.standard_normal((count, 7)).astype(np.float32),
                "next_obs/robot0_eef_pos": rng.standard_normal((count, 3)),
            }
            if image:
                arrays["obs/agentview_image"] = frames(count, 8, 8, seed + n)
            for key, values in arrays.items():
                demo.create_dataset(key, data=values, compression="gzip")
            written[n] = arrays
        if masks:
            group = f.create_group("mask")
            for split, members in masks.items():
                group.create_dataset(split, data=np.asarray([f"demo_{m}".encode() for m in members],
                                                            dtype="S8"))
    return written
