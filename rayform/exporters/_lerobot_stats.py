"""LeRobot feature statistics: per episode, and aggregated over episodes (meta/stats.json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

QUANTILES: Final = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
Stats = dict[str, npt.NDArray[np.float64]]


def numeric_stats(values: npt.NDArray[np.generic]) -> Stats:
    """``min, max, mean, std, count`` and quantiles of ``[N, D]`` values, per dimension."""
    data = np.asarray(values, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    stats: Stats = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        "count": np.asarray([len(data)], dtype=np.float64),
    }
    for name, q in QUANTILES.items():
        stats[name] = np.quantile(data, q, axis=0)
    return stats


def image_stats(frames: Sequence[npt.NDArray[np.uint8]]) -> Stats:
    """Per-channel stats of ``uint8[H, W, 3]`` RGB frames scaled to ``[0, 1]``, each shaped
    ``[3, 1, 1]`` like LeRobot's; computed exactly from 256-bin histograms (quantiles are the
    lowest value whose cumulative share reaches the quantile)."""
    hist = np.zeros((3, 256), dtype=np.int64)
    for frame in frames:
        pixels = np.asarray(frame, dtype=np.uint8).reshape(-1, 3)
        for c in range(3):
            hist[c] += np.bincount(pixels[:, c], minlength=256)
    levels = np.arange(256, dtype=np.float64) / 255.0
    total = hist.sum(axis=1).astype(np.float64)
    mean = (hist * levels).sum(axis=1) / total
    var = (hist * levels ** 2).sum(axis=1) / total - mean ** 2
    present = hist > 0
    cumulative = np.cumsum(hist, axis=1) / total[:, None]
    out: Stats = {
        "min": np.array([levels[np.argmax(p)] for p in present]),
        "max": np.array([levels[255 - np.argmax(p[::-1])] for p in present]),
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
    }
    for name, q in QUANTILES.items():
        out[name] = np.array([levels[int(np.searchsorted(cum, q))] for cum in cumulative])
    shaped = {name: value.reshape(3, 1, 1) for name, value in out.items()}
    shaped["count"] = np.asarray([len(frames)], dtype=np.float64)
    return shaped


def aggregate_stats(per_episode: Sequence[Stats]) -> Stats:
    """Combine episode stats: exact min/max/mean/std/count; quantiles as count-weighted means."""
    counts = np.asarray([float(s["count"][0]) for s in per_episode])
    total = counts.sum()
    weights = counts / total
    shape = per_episode[0]["mean"].shape

    def weighted(name: str) -> npt.NDArray[np.float64]:
        acc = np.zeros(shape)
        for w, s in zip(weights, per_episode, strict=True):
            acc = acc + w * s[name]
        return acc

    mean = weighted("mean")
    second = np.zeros(shape)
    for w, s in zip(weights, per_episode, strict=True):
        second = second + w * (s["std"] ** 2 + s["mean"] ** 2)
    out: Stats = {
        "min": np.min(np.stack([s["min"] for s in per_episode]), axis=0),
        "max": np.max(np.stack([s["max"] for s in per_episode]), axis=0),
        "mean": mean,
        "std": np.sqrt(np.maximum(second - mean ** 2, 0.0)),
        "count": np.asarray([total]),
    }
    for name in QUANTILES:
        if all(name in s for s in per_episode):
            out[name] = weighted(name)
    return out


def stats_json(stats: Stats) -> dict[str, list[float] | list[int] | list[list[list[float]]]]:
    """Stats as JSON-ready lists (``count`` as integers)."""
    out: dict[str, list[float] | list[int] | list[list[list[float]]]] = {}
    for name, value in stats.items():
        out[name] = [int(v) for v in value] if name == "count" else value.tolist()
    return out
