"""Replaying a manifest: its rows for this ``(rank, worker)`` become the run loop's stream.

:class:`ManifestOrder` is the iterable dataset's order source when it was built from a
:class:`~rayform.dataloader.Manifest`: the same pipeline and run loop as a live pass, with the
order, fetch blocks and emission read from the file instead of computed from a shuffle strategy.
The replay's sample space is the one recorded in the manifest; before a replay starts,
:func:`check_replayable` makes sure the dataset still holds those segments at the same versions
(content-derived, so the same data) and that the fields read the same columns with the same
windows.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rayform.catalog import DatasetView
from rayform.dataloader._block_columns import Sample
from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._epoch_plan import ProcessStream
from rayform.dataloader._manifest import Manifest, recipe_mismatches
from rayform.dataloader._manifest_format import (
    COL_EMIT_RANK,
    COL_FETCH_GROUP,
    COL_SAMPLE_INDEX,
    ManifestMeta,
)
from rayform.dataloader._order_source import OrderSource, SampleScreen, refuse_worker_resume
from rayform.dataloader._partition import StreamPosition
from rayform.dataloader._pipeline import SamplePipeline
from rayform.dataloader._pipeline_build import build_pipeline
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex
from rayform.errors import ConfigError
from rayform.recording._columns import SEGMENT_ID, SEGMENT_VERSION


class RequireFields(SampleScreen):
    """Yield every sample; a required field without a value means the data changed: raise."""

    def __init__(self, required: Sequence[str], sample_index: SampleIndex) -> None:
        self._required = list(required)
        self._sample_index = sample_index

    def admit(self, sample: Sample, keys: Sequence[str], sample_id: int) -> bool:
        missing = sorted(k for k in self._required if sample[k] is None)
        if missing:
            segment, value = self._sample_index.global_to_local(sample_id)
            raise RuntimeError(
                f"Required fields decoded to nothing: {', '.join(missing)} (segment "
                f"{segment.segment_id!r} at {value!r}); the manifest was built against different "
                "data or the blob does not decode, so regenerate it with Manifest.generate"
            )
        return True

    def admit_many(self, missing: Mapping[str, npt.NDArray[np.bool_]],
                   sample_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        if not any(bool(missing[k].any()) for k in self._required if k in missing):
            return np.ones(len(sample_ids), dtype=np.bool_)
        return super().admit_many(missing, sample_ids)


class ManifestOrder(OrderSource):
    """The order frozen in a manifest (one epoch; ``set_epoch`` does not change it)."""

    def __init__(self, manifest: Manifest, keys: Sequence[str]) -> None:
        self.manifest = manifest
        self._required = [k for k in manifest.metadata.required_fields if k in keys]

    @property
    def state_tag(self) -> str:
        return "manifest"

    @property
    def seed(self) -> int | None:
        return self.manifest.metadata.seed

    def stream(self, pipeline: SamplePipeline, pos: StreamPosition, *, epoch: int, start: int
               ) -> ProcessStream:
        self.manifest.validate_topology(pos.world_size, pos.num_workers)
        refuse_worker_resume(pos, start)
        rows = self.manifest.worker_assignments(pos.rank, pos.worker_id)
        indices = np.asarray(rows.column(COL_SAMPLE_INDEX).to_numpy(), dtype=np.int64)
        groups = rows.column(COL_FETCH_GROUP).to_numpy()
        cuts = [0, *(np.flatnonzero(np.diff(groups)) + 1).tolist(), len(indices)]
        fetches = [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]
        emission = np.argsort(rows.column(COL_EMIT_RANK).to_numpy(), kind="stable")
        return ProcessStream(indices, fetches, emission.astype(np.int64)).resumed(start)

    def screen(self, sample_index: SampleIndex) -> SampleScreen:
        return RequireFields(self._required, sample_index)


def check_replayable(meta: ManifestMeta, view: DatasetView, fields: Mapping[str, Field]) -> None:
    """Check that ``view`` still holds the data a manifest was planned over, and that ``fields``
    read the same columns with the same windows.

    Raises:
        ConfigError: a field differs from the manifest's recipe, or a segment of the manifest is
            gone from ``view`` or was re-registered (another version) since.
    """
    bad = recipe_mismatches(meta, fields)
    if bad:
        raise ConfigError(
            f"fields {bad} differ from the manifest's (path or window; the manifest has "
            f"{sorted(meta.recipe)}); replay with the fields it was generated with"
        )
    table = view.segment_table_arrow()
    now = dict(zip(table.column(SEGMENT_ID).to_pylist(),
                   table.column(SEGMENT_VERSION).to_pylist(), strict=True))
    gone = sorted(s.segment_id for s in meta.segments if s.segment_id not in now)
    changed = sorted(s.segment_id for s in meta.segments
                     if s.segment_id in now and str(now[s.segment_id]) != s.version)
    if gone or changed:
        raise ConfigError(
            f"the data changed since the manifest was built from dataset {meta.dataset_name!r} "
            f"snapshot {meta.dataset_version}: segments removed {gone}, re-registered {changed}; "
            f"regenerate the manifest, or replay on dataset.at_version({meta.dataset_version})"
        )


def replay_pipeline(manifest: Manifest, source: DataSource, index: str,
                    fields: Mapping[str, Field], *, timeline_sampling: FixedRateSampling | None,
                    decode_threads: int | None, edge: EdgeMode, sample_metadata: bool
                    ) -> SamplePipeline:
    """The pipeline that replays ``manifest``: its sample space, the source's (unchanged) data.

    Raises:
        ConfigError: ``index``, ``edge`` or ``timeline_sampling`` differ from the manifest's, or
            :func:`check_replayable` fails.
    """
    if not isinstance(manifest, Manifest):
        raise TypeError(f"manifest must be a Manifest, got {type(manifest).__name__}")
    meta = manifest.metadata
    step = None if timeline_sampling is None else timeline_sampling.ns_per_sample
    if index != meta.index_name or edge != meta.edge or (step is not None
                                                        and step != meta.ns_per_sample):
        raise ConfigError(
            f"the manifest was built on index {meta.index_name!r}, edge={meta.edge!r}, "
            f"ns_per_sample={meta.ns_per_sample}; got index {index!r}, edge={edge!r}, "
            f"ns_per_sample={step}; use from_manifest(manifest, source, fields)"
        )
    pipeline = build_pipeline(source, index, fields, timeline_sampling=timeline_sampling,
                              decode_threads=decode_threads, edge=edge,
                              sample_metadata=sample_metadata, sample_index=meta.sample_index())
    check_replayable(meta, pipeline.view, fields)
    return pipeline


def manifest_sampling(meta: ManifestMeta) -> FixedRateSampling | None:
    """The ``timeline_sampling`` a manifest was built with (``None`` on sequence timelines)."""
    return None if meta.ns_per_sample is None else FixedRateSampling(1e9 / meta.ns_per_sample)
