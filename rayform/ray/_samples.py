"""``read_samples``: decoded training samples as a ``ray.data.Dataset``, split by segment across tasks.

The driver builds the sample index once (metadata only, :class:`RerunMapDataset`); it pickles as
configuration, so every Ray read task reopens the catalog itself (shared filesystem, ``s3://`` or
``https://``) and decodes whole segments through the same pipeline as the PyTorch datasets. A
sample is therefore bit-identical to ``RerunMapDataset(source, index, fields)[i]``. Ray Train
workers consume it with ``iter_torch_batches``.

Columns: one per field (an Arrow tensor column ``[..]`` per row, or a plain column for 0-d values),
``<key>_is_pad`` masks with ``edge="pad"``, and with ``sample_metadata=True`` the scalar columns
``meta.segment_id``, ``meta.segment_version``, ``meta.index_value`` and ``meta.sample_index``.
Samples where a field has no value are dropped, as ``RerunIterableDataset`` skips them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rayform.errors import ConfigError
from rayform.ray._cluster import TaskOptions, batched, require_ray

if TYPE_CHECKING:
    import ray.data

    from rayform.dataloader import DataSource, EdgeMode, Field, FixedRateSampling, RerunMapDataset

META_COLUMNS = ("segment_id", "segment_version", "index_value", "sample_index")
"""The ``meta`` dict's entries, as columns ``meta.<name>``."""


def samples_to_block(samples: Sequence[Mapping[str, Any]], keys: Sequence[str], meta_key: str
                     ) -> pa.Table:
    """Columns from sample dicts: tensors stacked into Ray tensor columns, ``meta`` flattened."""
    from ray.data.extensions import ArrowTensorArray

    columns: dict[str, pa.Array] = {}
    for key in keys:
        if key == meta_key:
            for name in META_COLUMNS:
                columns[f"{meta_key}.{name}"] = pa.array([s[key][name] for s in samples])
            continue
        stacked = np.stack([np.asarray(s[key]) for s in samples])
        columns[key] = pa.array(stacked) if stacked.ndim == 1 else \
            ArrowTensorArray.from_numpy(stacked)
    return pa.table(columns)


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleReadPlan:
    """A read task's work: global sample ranges of whole segments, decoded block by block."""

    dataset: RerunMapDataset
    samples_per_block: int

    def read(self, ranges: Sequence[tuple[int, int]]) -> Iterator[pa.Table]:
        from rayform.dataloader._pipeline import META_KEY

        keys: list[str] | None = None
        for start, stop in ranges:
            for lo in range(start, stop, self.samples_per_block):
                hi = min(stop, lo + self.samples_per_block)
                samples = self.dataset.__getitems__(list(range(lo, hi)))
                complete = [s for s in samples if all(v is not None for v in s.values())]
                if not complete:
                    continue
                keys = keys or sorted(complete[0])
                yield samples_to_block(complete, keys, META_KEY)


def _datasource(plan: SampleReadPlan, groups: list[list[tuple[int, int]]]) -> Any:
    ray_data = require_ray().data
    from ray.data.block import BlockMetadata

    class SampleDatasource(ray_data.Datasource):  # type: ignore[misc, name-defined]
        """One read task per group of segments (the groups are fixed by ``segments_per_task``)."""

        def get_name(self) -> str:
            return "RayformSamples"

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
            return [
                ray_data.ReadTask(
                    (lambda group=group: plan.read(group)),
                    BlockMetadata(num_rows=None, size_bytes=None, input_files=None,
                                  exec_stats=None),
                )
                for group in groups
            ]

    return SampleDatasource()


def read_samples(source: DataSource, index: str, fields: Mapping[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None, edge: EdgeMode = "trim",
                 sample_metadata: bool = False, samples_per_block: int = 256,
                 options: TaskOptions | None = None) -> ray.data.Dataset:
    """Decoded samples of ``source`` as a ``ray.data.Dataset``, read by segment in Ray tasks.

    Args:
        source: the dataset and optional segment list (as for ``RerunMapDataset``).
        index: the index timeline.
        fields: sample key -> :class:`~rayform.dataloader.Field`.
        timeline_sampling: the grid on timestamp / duration timelines.
        edge: ``"trim"`` or ``"pad"`` (``<key>_is_pad`` columns).
        sample_metadata: add the ``meta.*`` columns.
        samples_per_block: samples decoded (and emitted) together in a task.
        options: CPUs per read task, concurrency, segments per task.

    Raises:
        ConfigError, ColumnNotFoundError: as ``RerunMapDataset`` (checked here, on the driver).
    """
    from rayform.dataloader import RerunMapDataset

    if samples_per_block < 1:
        raise ConfigError(f"read_samples: samples_per_block must be >= 1, got {samples_per_block!r}")
    opts = options or TaskOptions()
    ray_data = require_ray().data
    dataset = RerunMapDataset(source, index, fields, timeline_sampling=timeline_sampling,
                              decode_threads=1, edge=edge, sample_metadata=sample_metadata)
    offsets = dataset.sample_index.segment_offsets.tolist()
    ranges = [(a, b) for a, b in itertools.pairwise(offsets) if b > a]
    plan = SampleReadPlan(dataset=dataset, samples_per_block=samples_per_block)
    result: ray.data.Dataset
    if not ranges:
        result = ray_data.from_items([])
    else:
        groups = batched(ranges, opts.segments_per_task)
        result = ray_data.read_datasource(_datasource(plan, groups), num_cpus=opts.num_cpus,
                                          concurrency=opts.max_concurrency)
    return result


__all__ = ["SampleReadPlan", "read_samples", "samples_to_block"]
