"""The statistics a LeRobot dataset stores, kept as segment properties for ``rayform curate``.

LeRobot keeps per-feature ``min``/``max``/``mean``/``std``/``count`` per episode (v2.1:
``meta/episodes_stats.jsonl``; v3.0: the ``stats/<feature>/<stat>`` columns of
``meta/episodes/*.parquet``) and over the whole dataset (``meta/stats.json``), which is what
training normalises with. Registration keeps those of the numeric, non-visual features as list
properties, ``source_stats:<feature>:<stat>`` (the episode's) and
``source_dataset_stats:<feature>:<stat>`` (the dataset's), so that the ``bookkeeping.stats``
check can compare them with figures recomputed from the rows. Values are untrusted: a figure that
is not a flat list of finite-or-NaN numbers of the feature's size is dropped with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Final

from rayform.errors import ConversionWarning
from rayform.importers.lerobot._metadata import (
    DatasetInfo,
    EpisodeInfo,
    FeatureSpec,
    iter_jsonl,
    load_json,
)
from rayform.recording._file import PropertyValue

EPISODE_PREFIX: Final = "source_stats"
DATASET_PREFIX: Final = "source_dataset_stats"
STAT_NAMES: Final = ("min", "max", "mean", "std", "count")
EPISODES_STATS_PATH: Final = "meta/episodes_stats.jsonl"
DATASET_STATS_PATH: Final = "meta/stats.json"

Stats = dict[str, dict[str, list[float]]]  # feature -> stat -> values


def property_name(prefix: str, feature: str, stat: str) -> str:
    """``source_stats:observation.state:mean``."""
    return f"{prefix}:{feature}:{stat}"


def _flat(value: Any) -> list[float] | None:
    out: list[float] = []

    def walk(v: Any) -> bool:
        if isinstance(v, list):
            return all(walk(x) for x in v)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out.append(float(v))
            return True
        return False

    return out if walk(value) and all(not math.isinf(x) for x in out) else None


def _size(spec: FeatureSpec) -> int:
    size = 1
    for s in spec.shape:
        size *= s
    return size


def parse_stats(raw: Any, info: DatasetInfo, *, where: str) -> Stats:
    """The checkable figures of one ``{feature: {stat: values}}`` mapping (see module docs)."""
    if not isinstance(raw, Mapping):
        warnings.warn(f"{where}: statistics are not an object; not kept", ConversionWarning,
                      stacklevel=3)
        return {}
    out: Stats = {}
    for feature, figures in raw.items():
        spec = info.features.get(feature) if isinstance(feature, str) else None
        if spec is None or spec.is_visual or spec.dtype in ("string", "image", "video") \
                or not isinstance(figures, Mapping):
            continue
        kept: dict[str, list[float]] = {}
        for stat in STAT_NAMES:
            if stat not in figures:
                continue
            values = _flat(figures[stat])
            size = 1 if stat == "count" else _size(spec)
            if values is None or len(values) != size:
                warnings.warn(f"{where}: statistic {stat!r} of feature {feature!r} is not "
                              f"{size} number(s) ({str(figures[stat])[:80]}); not kept",
                              ConversionWarning, stacklevel=3)
                continue
            kept[stat] = values
        if kept:
            out[feature] = kept
    return out


def stats_properties(prefix: str, stats: Stats) -> dict[str, PropertyValue]:
    """The properties of ``stats``: a list per figure, a scalar where it is one number (the
    count, a one-dimensional feature), as a Rerun property of one value reads back."""
    props: dict[str, PropertyValue] = {}
    for feature, figures in stats.items():
        for stat, values in figures.items():
            items: list[float] | list[int] = \
                [int(v) for v in values] if stat == "count" else list(values)
            props[property_name(prefix, feature, stat)] = \
                items[0] if len(items) == 1 else list(items)
    return props


def read_episode_stats(info: DatasetInfo) -> dict[int, Stats]:
    """v2.1's ``meta/episodes_stats.jsonl`` by episode index (empty when absent)."""
    path = info.root / EPISODES_STATS_PATH
    if info.is_v3 or not path.is_file():
        return {}
    out = {}
    for row in iter_jsonl(path):
        index = row.get("episode_index")
        if isinstance(index, int) and not isinstance(index, bool):
            out[index] = parse_stats(row.get("stats"), info,
                                     where=f"{path} (episode {index})")
    return out


def episode_stats(info: DatasetInfo, episode: EpisodeInfo, v21: Mapping[int, Stats]) -> Stats:
    """An episode's stored statistics: v2.1's line, or v3.0's ``stats/…`` columns."""
    if episode.raw_stats:
        return parse_stats(episode.raw_stats, info,
                           where=f"{info.root}/meta/episodes (episode {episode.index})")
    return v21.get(episode.index, {})


def read_dataset_stats(info: DatasetInfo) -> Stats:
    """``meta/stats.json`` (empty when absent)."""
    path = info.root / DATASET_STATS_PATH
    if not path.is_file():
        return {}
    return parse_stats(load_json(path), info, where=str(path))


__all__ = ["DATASET_PREFIX", "EPISODE_PREFIX", "STAT_NAMES", "Stats", "episode_stats",
           "parse_stats", "property_name", "read_dataset_stats", "read_episode_stats",
           "stats_properties"]
