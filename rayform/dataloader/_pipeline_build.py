"""From a :class:`DataSource` to the :class:`SamplePipeline` both datasets (and manifests) run on."""

from __future__ import annotations

from collections.abc import Mapping

from rayform.catalog import DatasetView
from rayform.dataloader._config import DataSource, EdgeMode, Field, check_edge
from rayform.dataloader._empty_space import empty_space_error
from rayform.dataloader._pipeline import SamplePipeline
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex, resolve_view
from rayform.decoders._thread_pool import check_decode_threads


def build_pipeline(source: DataSource, index: str, fields: Mapping[str, Field], *,
                   timeline_sampling: FixedRateSampling | None, decode_threads: int | None,
                   edge: EdgeMode, sample_metadata: bool,
                   sample_index: SampleIndex | None = None,
                   what: str = "the dataset") -> SamplePipeline:
    """Pin the source's view, build its sample index (unless given: a manifest's) and validate the
    fields against it.

    Raises:
        ConfigError: the view has segments but not one sample (``what`` names the dataset).
    """
    if not isinstance(source, DataSource):
        raise TypeError(f"source must be a DataSource, got {type(source).__name__}; wrap the "
                        "dataset: DataSource(dataset)")
    edge = check_edge(edge)
    decode_threads = check_decode_threads(decode_threads)
    view: DatasetView = resolve_view(source)
    if sample_index is None:
        sample_index = SampleIndex.build(DataSource(view, time_range=source.time_range,
                                                    excluded=source.excluded), index,
                                         fields, timeline_sampling=timeline_sampling, edge=edge)
        if sample_index.total_samples == 0 and view.segment_ids():
            raise empty_space_error(view, index, fields, edge=edge,
                                    time_range=source.time_range, what=what)
    return SamplePipeline(view, index, fields, sample_index, decode_threads=decode_threads,
                          edge=edge, sample_metadata=bool(sample_metadata))
