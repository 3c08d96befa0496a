"""RerunMapDataset: random access to samples by global index (Rerun 0.41 API).

``__getitems__`` decodes a whole DataLoader batch at once (one gather and one decode call per
field), so ``DataLoader(ds, batch_size=32, shuffle=True)``, ``DistributedSampler``,
``WeightedRandomSampler`` and :class:`~rayform.dataloader.ResumableSampler` all work. Missing data
stays ``None`` (the map dataset cannot skip); a ``collate_fn`` decides what to do with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch.utils.data import Dataset

from rayform.catalog import DatasetView
from rayform.dataloader._config import DataSource, EdgeMode, Field, check_edge
from rayform.dataloader._pipeline import Sample, SamplePipeline
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex, resolve_view
from rayform.decoders._thread_pool import check_decode_threads


def build_pipeline(source: DataSource, index: str, fields: Mapping[str, Field], *,
                   timeline_sampling: FixedRateSampling | None, decode_threads: int | None,
                   edge: EdgeMode, sample_metadata: bool) -> SamplePipeline:
    """Pin the source's view, build its sample index and validate the fields against it."""
    if not isinstance(source, DataSource):
        raise TypeError(f"source must be a DataSource, got {type(source).__name__}; wrap the "
                        "dataset: DataSource(dataset)")
    edge = check_edge(edge)
    decode_threads = check_decode_threads(decode_threads)
    view: DatasetView = resolve_view(source)
    sample_index = SampleIndex.build(DataSource(view, time_range=source.time_range), index, fields,
                                     timeline_sampling=timeline_sampling, edge=edge)
    return SamplePipeline(view, index, fields, sample_index, decode_threads=decode_threads,
                          edge=edge, sample_metadata=bool(sample_metadata))


class RerunMapDataset(Dataset[Sample]):
    """A map-style dataset over a catalog dataset.

    Args:
        source: the dataset and optional segment list.
        index: the index timeline (``"frame_index"``, ``"real_time"`` …).
        fields: sample key -> :class:`Field`.
        timeline_sampling: the grid on timestamp / duration timelines (required there).
        decode_threads: decode threads per process (``None``: one per CPU up to 8 in the main
            process, 1 inside a DataLoader worker).
        edge: ``"trim"`` (Rerun: windows stay inside segments) or ``"pad"`` (every grid point,
            clamped windows, ``<key>_is_pad`` masks).
        sample_metadata: add ``sample["meta"] = {"segment_id", "segment_version",
            "index_value", "sample_index"}``.

    A sample is ``{key: Tensor | None}``: ``[D]`` / ``[T, D]`` numeric, ``uint8 [C, H, W]`` /
    ``[T, C, H, W]`` images and video frames.
    """

    def __init__(self, source: DataSource, index: str, fields: Mapping[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None,
                 decode_threads: int | None = None, edge: EdgeMode = "trim",
                 sample_metadata: bool = False) -> None:
        self._pipeline = build_pipeline(source, index, fields,
                                        timeline_sampling=timeline_sampling,
                                        decode_threads=decode_threads, edge=edge,
                                        sample_metadata=sample_metadata)
        self._fields = dict(fields)
        self._index_name = index

    @property
    def sample_index(self) -> SampleIndex:
        return self._pipeline.sample_index

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self._fields)

    @property
    def index(self) -> str:
        return self._index_name

    @property
    def pipeline(self) -> SamplePipeline:
        return self._pipeline

    def __len__(self) -> int:
        return self._pipeline.sample_index.total_samples

    def __getitem__(self, idx: int) -> Sample:
        return self.__getitems__([idx])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Sample]:
        """Decode a batch of samples in one pass (called by DataLoader with the whole batch).

        Raises:
            IndexError: an index is negative or ``>= len(self)``.
        """
        return self._pipeline.process(list(indices))

    def __repr__(self) -> str:
        return (f"RerunMapDataset({self._pipeline.view.name!r}, index={self._index_name!r}, "
                f"fields={sorted(self._fields)}, samples={len(self)})")

