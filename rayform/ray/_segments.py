"""``read_segments``: a dataset view or slice as a ``ray.data.Dataset`` of Arrow rows, read by segment.

Rows are those of :meth:`DatasetView.reader` on one timeline (``rerun_segment_id``, the index, then
the columns asked for), produced by Ray read tasks that each open the catalog themselves and read
whole segments from the data plane. A slice's pinned snapshot and segments are kept, and its time
range (when on the index timeline) bounds the rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rayform.catalog._dataset import DatasetView
from rayform.catalog._segment_data import index_to_int64
from rayform.errors import ConfigError
from rayform.ray._cluster import TaskOptions, batched, require_ray
from rayform.recording._columns import SEGMENT_ID, entity_of

if TYPE_CHECKING:
    import ray.data

    from rayform.catalog._slices import Slice, TimeRange


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentReadPlan:
    """What each read task produces: the rows of its segments on ``index`` (pickles small)."""

    view: DatasetView
    index: str
    columns: tuple[str, ...]
    fill_latest_at: bool
    time_range: tuple[int, int] | None

    def read(self, segment_id: str) -> pa.Table:
        """The rows of one segment, as :meth:`DatasetView.reader_arrow` returns them."""
        entities = sorted({entity_of(c) for c in self.columns})
        view = self.view.filter_segments([segment_id])
        if entities:
            view = view.filter_contents([_literal(e) for e in entities])
        table = view.reader_arrow(self.index, fill_latest_at=self.fill_latest_at)
        table = table.select([SEGMENT_ID, self.index, *self.columns])
        if self.time_range is not None and table.num_rows:
            values = index_to_int64(table.column(self.index))
            start, end = self.time_range
            keep = np.flatnonzero((values >= start) & (values <= end))
            table = table.take(pa.array(keep, pa.int64()))
        return table

    def read_group(self, segment_ids: Sequence[str]) -> Iterator[pa.Table]:
        for segment_id in segment_ids:
            yield self.read(segment_id)


def _literal(entity: str) -> str:
    """A content-filter expression matching exactly ``entity`` (glob characters escaped)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in entity)


def resolve_source(source: DatasetView | Slice) -> tuple[DatasetView, TimeRange | None]:
    """A view (and the slice's time range) from a dataset view or a slice."""
    if isinstance(source, DatasetView):
        return source, None
    view = getattr(source, "view", None)
    if callable(view):
        return view(), getattr(source, "time_range", None)
    raise ConfigError(
        f"expected a DatasetView, DatasetEntry or Slice, got {type(source).__name__}; "
        "open one with catalog.get_dataset(name) or client.slices.get(id)"
    )


def _datasource(plan: SegmentReadPlan, groups: list[list[str]], sizes: dict[str, int]) -> Any:
    ray_data = require_ray().data
    from ray.data.block import BlockMetadata

    class SegmentDatasource(ray_data.Datasource):  # type: ignore[misc, name-defined]
        """One read task per group of consecutive segments (``segments_per_task``)."""

        def get_name(self) -> str:
            return "RayformSegments"

        def estimate_inmemory_data_size(self) -> int | None:
            return sum(sizes.values()) or None

        def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
            return [
                ray_data.ReadTask(
                    (lambda group=group: plan.read_group(group)),
                    BlockMetadata(num_rows=None, size_bytes=sum(sizes[s] for s in group) or None,
                                  input_files=None, exec_stats=None),
                )
                for group in groups
            ]

    return SegmentDatasource()


def read_segments(source: DatasetView | Slice, *, columns: str | Sequence[str] | None = None,
                  index: str | None = None, fill_latest_at: bool = False,
                  options: TaskOptions | None = None) -> ray.data.Dataset:
    """A ``ray.data.Dataset`` of the rows of a view or slice, read segment by segment in Ray tasks.

    Args:
        source: a dataset, a filtered view or a slice (its snapshot, segments and time range).
        columns: component columns (default every one of the view).
        index: the timeline rows are aligned on (default the dataset's first timeline).
        fill_latest_at: fill each column with its latest value at or before the row (as
            :meth:`DatasetView.reader`); otherwise only exact matches.
        options: CPUs per read task, concurrency, segments per read task.

    Returns:
        A lazy dataset whose rows are ``rerun_segment_id``, ``<index>`` and the columns.

    Raises:
        ColumnNotFoundError: an unknown column or timeline.
        ConfigError: a slice whose time range is on another timeline than ``index``.
    """
    ray_data = require_ray().data
    view, time_range = resolve_source(source)
    schema = view.schema()
    timeline = index if index is not None else next(iter(view.timelines), None)
    if timeline is None:
        raise ConfigError(f"dataset {view.name!r} has no timeline to read rows on; register data first")
    schema.timeline_kind(timeline)
    if columns is None:
        names = tuple(schema.component_columns())
    else:
        names = (columns,) if isinstance(columns, str) else tuple(columns)
        for name in names:
            schema.field(name)
    bounds: tuple[int, int] | None = None
    if time_range is not None:
        if time_range.timeline != timeline:
            raise ConfigError(
                f"the slice's time range is on timeline {time_range.timeline!r}; read it with "
                f"index={time_range.timeline!r} (got {timeline!r})"
            )
        bounds = (time_range.start, time_range.end)
    plan = SegmentReadPlan(view=view, index=timeline, columns=names,
                           fill_latest_at=fill_latest_at, time_range=bounds)
    sizes = {r.segment_id: r.size_bytes for r in view.segment_records()}
    segment_ids = view.segment_ids()
    dataset: ray.data.Dataset
    if not segment_ids:
        dataset = ray_data.from_arrow(_empty_table(plan))
    else:
        opts = options or TaskOptions()
        groups = batched(segment_ids, opts.segments_per_task)
        dataset = ray_data.read_datasource(_datasource(plan, groups, sizes),
                                           num_cpus=opts.num_cpus,
                                           concurrency=opts.max_concurrency)
    return dataset


def _empty_table(plan: SegmentReadPlan) -> pa.Table:
    """The (empty) table a view without segments reads as."""
    schema = plan.view.schema()
    fields = [pa.field(SEGMENT_ID, pa.string()), schema.field(plan.index)]
    fields += [schema.field(c) for c in plan.columns]
    return pa.schema(fields).empty_table()


__all__ = ["SegmentReadPlan", "read_segments", "resolve_source"]
