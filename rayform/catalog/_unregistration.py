"""Unregistration: which segments and layers a request removes, and the handle reporting it.

Rerun's ``unregister`` is a product filter: the given segments (all when none are given) times
the given layers (all when none are given). rayform plans the removal against the newest snapshot
(pure, nothing written), commits it as one new snapshot, and hands back a handle whose ``wait``
reports what was removed. Unlike Rerun, naming a segment the dataset does not hold is an error
(a typo would otherwise remove nothing without a word).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rayform.catalog._metadata import SegmentRecord
from rayform.catalog._registration import SnapshotDraft, segment_record
from rayform.catalog._snapshot import DatasetSnapshot
from rayform.errors import ConfigError, SegmentNotFoundError
from rayform.recording._names import validate_layer_name, validate_segment_id


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregistrationResult:
    """What an ``unregister`` removed.

    Attributes:
        segment_ids: segments that lost every layer and left the dataset, sorted.
        layers: every segment touched, mapped to the layer names removed from it (sorted).
        snapshot_version: the snapshot committed (None when nothing matched: no commit).
    """

    segment_ids: list[str]
    layers: dict[str, list[str]]
    snapshot_version: int | None

    @property
    def num_layers_removed(self) -> int:
        return sum(len(v) for v in self.layers.values())


class UnregistrationHandle:
    """Returned by ``unregister`` (as Rerun's); the removal already ran, ``wait`` reports it."""

    def __init__(self, result: UnregistrationResult) -> None:
        self._result = result

    def wait(self, timeout_secs: float | None = None) -> UnregistrationResult:
        """What was removed (Rerun's ``wait`` returns None; this returns the report)."""
        return self._result

    def cancel(self) -> None:
        """A no-op, as for a finished Rerun unregistration: the commit already happened."""

    def __repr__(self) -> str:
        r = self._result
        return (f"UnregistrationHandle(removed {r.num_layers_removed} layer(s) of "
                f"{len(r.layers)} segment(s), {len(r.segment_ids)} segment(s) left the dataset)")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregistrationRequest:
    """Validated ``unregister`` arguments: empty tuples mean "all" (never both empty)."""

    segments: tuple[str, ...]
    layers: tuple[str, ...]

    @classmethod
    def of(cls, segments_to_drop: str | Sequence[str],
           layers_to_drop: str | Sequence[str] | None) -> UnregistrationRequest:
        """Raises:
            ConfigError: neither segments nor layers given (Rerun: invalid argument).
            InvalidNameError: a segment id or layer name that cannot exist.
        """
        segs = (segments_to_drop,) if isinstance(segments_to_drop, str) else tuple(segments_to_drop)
        layers = () if layers_to_drop is None else (
            (layers_to_drop,) if isinstance(layers_to_drop, str) else tuple(layers_to_drop))
        if not segs and not layers:
            raise ConfigError(
                "unregister: nothing to drop; give segments_to_drop (their layers, or all of them), "
                "layers_to_drop (those layers of every segment), or both"
            )
        for segment_id in segs:
            validate_segment_id(segment_id)
        for layer in layers:
            validate_layer_name(layer)
        return cls(segments=tuple(dict.fromkeys(segs)), layers=tuple(dict.fromkeys(layers)))


@dataclass(frozen=True, slots=True)
class UnregistrationPlan:
    """The snapshot after the removal (None when nothing matched) and what it removes."""

    draft: SnapshotDraft | None
    dropped: list[str]
    layers: dict[str, list[str]]


def plan_unregistration(old: DatasetSnapshot | None, request: UnregistrationRequest
                        ) -> UnregistrationPlan:
    """What ``request`` removes from snapshot ``old`` (pure: writes nothing).

    Raises:
        SegmentNotFoundError: a named segment is not in the dataset.
    """
    ids = old.index.segment_ids() if old is not None else []
    known = set(ids)
    missing = [s for s in request.segments if s not in known]
    if missing:
        more = f" (nor are {missing[1:]})" if len(missing) > 1 else ""
        raise SegmentNotFoundError(
            f"unregister: segment {missing[0]!r} is not in the dataset{more}; nothing was "
            "removed — see dataset.segment_ids()"
        )
    if old is None:
        return UnregistrationPlan(draft=None, dropped=[], layers={})
    now = time.time_ns()
    updated: list[SegmentRecord] = []
    dropped: list[str] = []
    removed: dict[str, list[str]] = {}
    for segment_id in request.segments or tuple(ids):
        record = old.index.record(segment_id)
        assert record is not None
        gone = sorted(k for k in record.layers if not request.layers or k in request.layers)
        if not gone:
            continue
        removed[segment_id] = gone
        remaining = {k: v for k, v in record.layers.items() if k not in gone}
        if remaining:
            updated.append(segment_record(segment_id, remaining, now))
        else:
            dropped.append(segment_id)
    if not removed:
        return UnregistrationPlan(draft=None, dropped=[], layers={})
    draft = SnapshotDraft(timelines=dict(old.timelines), schema_ipc=old.schema_ipc,
                          index=old.index.replaced(updated, dropped), touched=sorted(removed))
    return UnregistrationPlan(draft=draft, dropped=sorted(dropped), layers=removed)


__all__ = ["UnregistrationHandle", "UnregistrationPlan", "UnregistrationRequest",
           "UnregistrationResult", "plan_unregistration"]
