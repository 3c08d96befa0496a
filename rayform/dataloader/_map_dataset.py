"""RerunMapDataset: random access to samples by global index (Rerun 0.41 API).

``__getitems__`` decodes a whole DataLoader batch at once (one gather and one decode call per
field), so ``DataLoader(ds, batch_size=32, shuffle=True)``, ``DistributedSampler``,
``WeightedRandomSampler`` and :class:`~rayform.dataloader.ResumableSampler` all work. Missing data
stays ``None`` (the map dataset cannot skip); a ``collate_fn`` decides what to do with it. Data
that cannot be decoded raises by default (``on_decode_error``).

Built :meth:`~RerunMapDataset.from_manifest`, item ``i`` is the manifest's row ``i`` (its complete
samples only; the sampler, not the manifest, decides the order, as in Rerun).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from torch.utils.data import Dataset

from rayform.dataloader._block_columns import Sample
from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._decode_policy import DecodeErrorPolicy, check_decode_policy
from rayform.dataloader._manifest import Manifest
from rayform.dataloader._manifest_replay import manifest_sampling, replay_pipeline
from rayform.dataloader._pipeline import SamplePipeline
from rayform.dataloader._pipeline_build import build_pipeline
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex
from rayform.dataloader._worker_process import settle_worker_process
from rayform.errors import DecodeError


class RerunMapDataset(Dataset[Sample]):
    """A map-style dataset over a catalog dataset.

    Args:
        source: the dataset and optional segment list.
        index: the index timeline (``"frame_index"``, ``"real_time"`` …).
        fields: sample key -> :class:`Field`.
        timeline_sampling: the grid on timestamp / duration timelines (required there).
        decode_threads: decode threads per process (``None``: one per CPU up to 8 in the main
            process; inside a DataLoader worker, the CPUs divided among the workers, at
            least 1).
        edge: ``"trim"`` (Rerun: windows stay inside segments) or ``"pad"`` (every grid point,
            clamped windows, ``<key>_is_pad`` masks).
        sample_metadata: add ``sample["meta"] = {"segment_id", "segment_version",
            "index_value", "sample_index"}``.
        manifest: serve the manifest's complete samples (see :meth:`from_manifest`).
        on_decode_error: data that exists but cannot be decoded (a corrupt image or frame):
            ``"raise"`` (default) a ``DecodeError`` naming the field, entity, segment and index
            value; ``"skip"`` it with a warning (the batch is shorter; a single ``ds[i]`` that
            fails still raises); or keep ``"none"`` with a warning.

    A sample is ``{key: Tensor | None}``: ``[D]`` / ``[T, D]`` numeric, ``uint8 [C, H, W]`` /
    ``[T, C, H, W]`` images and video frames (JPEGs as views of ``[H, W, C]`` memory, as Rerun's
    ``ImageDecoder`` gives them: see :attr:`~rayform.decoders.FieldBatch.channels_last`).
    """

    def __init__(self, source: DataSource, index: str, fields: Mapping[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None,
                 decode_threads: int | None = None, edge: EdgeMode = "trim",
                 sample_metadata: bool = False, manifest: Manifest | None = None,
                 on_decode_error: DecodeErrorPolicy = "raise") -> None:
        self._rows: npt.NDArray[np.int64] | None = None
        self._read_ahead_pid = 0  # the process that announced the segments (per process)
        policy = check_decode_policy(on_decode_error)
        if manifest is None:
            self._pipeline = build_pipeline(source, index, fields,
                                            timeline_sampling=timeline_sampling,
                                            decode_threads=decode_threads, edge=edge,
                                            sample_metadata=sample_metadata, what="RerunMapDataset")
        else:
            self._pipeline = replay_pipeline(manifest, source, index, fields,
                                             timeline_sampling=timeline_sampling,
                                             decode_threads=decode_threads, edge=edge,
                                             sample_metadata=sample_metadata)
            self._rows = manifest.sample_indices()
        self._pipeline.decode_errors = policy
        self._fields = dict(fields)
        self._index_name = index

    @classmethod
    def from_manifest(cls, manifest: Manifest, source: DataSource, fields: dict[str, Field], *,
                      decode_threads: int | None = None,
                      sample_metadata: bool = False,
                      on_decode_error: DecodeErrorPolicy = "raise") -> RerunMapDataset:
        """A map dataset over a manifest's complete samples (item ``i`` = row ``i``).

        The manifest's order and shards are not used (a sampler decides); what it saves is the
        scan for incomplete samples. ``fields`` may be a subset of the manifest's.

        Raises:
            ConfigError: the fields or the data differ from when the manifest was built.
        """
        meta = manifest.metadata
        return cls(source, meta.index_name, fields, timeline_sampling=manifest_sampling(meta),
                   decode_threads=decode_threads, edge=meta.edge,
                   sample_metadata=sample_metadata, manifest=manifest,
                   on_decode_error=on_decode_error)

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
        if self._rows is not None:
            return len(self._rows)
        return self._pipeline.sample_index.total_samples

    def __getitem__(self, idx: int) -> Sample:
        """One sample; with ``on_decode_error='skip'`` a failure raises (there is nothing to
        give instead)."""
        skipping = self._pipeline.decode_errors == "skip"
        return self._pipeline.process(self._global([idx]),
                                      decode_errors="raise" if skipping else None)[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Sample]:
        """Decode a batch of samples in one pass (called by DataLoader with the whole batch).

        Raises:
            IndexError: an index is negative or ``>= len(self)``.
            DecodeError: a sample's data cannot be decoded and ``on_decode_error='raise'``;
                with ``'skip'``, when every sample of the batch failed.
        """
        if self._pipeline.decode_errors == "skip":
            samples = self._pipeline.process_dropping_failures(self._global(indices))
            if not samples and len(indices):
                # torch's DataLoader collates every batch its sampler makes: an empty one would
                # end the epoch in an IndexError inside default_collate.
                raise DecodeError(
                    f"dataset {self._pipeline.view.name!r}: all {len(indices)} samples of the "
                    f"batch {list(indices)[:8]} could not be decoded and were skipped, leaving "
                    "an empty batch, which a map dataset cannot drop; use "
                    "RerunIterableDataset(batch_size=…), which leaves empty batches out, or "
                    "on_decode_error='none' (keep None), or repair the segments")
        else:
            samples = self._pipeline.process(self._global(indices))
        if self._read_ahead_pid != os.getpid():
            settle_worker_process()
            self._start_read_ahead()
        return samples

    def _start_read_ahead(self) -> None:
        """Announce every segment to the catalog's store, once per process and after the first
        batch (which it must not slow down): the sampler's order is unknown, but an epoch reads
        every segment, so a remote store downloads the ones not read yet in the background
        (bounded: a few objects ahead of the reader) while this process decodes and trains; a
        local store ignores the hint."""
        self._read_ahead_pid = os.getpid()
        index = self._pipeline.sample_index
        self._pipeline.view.prefetch(index.segment_id(i) for i in range(index.num_segments))

    def _global(self, indices: Sequence[int]) -> Sequence[int] | npt.NDArray[np.int64]:
        """The global sample indices of items ``indices``."""
        if self._rows is None:
            return list(indices)
        wanted = np.asarray(list(indices), dtype=np.int64).reshape(-1)
        if wanted.size and (int(wanted.min()) < 0 or int(wanted.max()) >= len(self._rows)):
            bad = wanted[(wanted < 0) | (wanted >= len(self._rows))][0]
            raise IndexError(f"sample index {int(bad)} out of range for {len(self._rows)} "
                             "manifest samples")
        return self._rows[wanted]

    def __repr__(self) -> str:
        return (f"RerunMapDataset({self._pipeline.view.name!r}, index={self._index_name!r}, "
                f"fields={sorted(self._fields)}, samples={len(self)})")
