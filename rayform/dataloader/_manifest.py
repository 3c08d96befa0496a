"""Manifest: one epoch's sampling plan frozen into a Parquet file (Rerun 0.41's ``Manifest``).

A manifest records which samples are complete, the index range each field reads, and for every
``(rank, worker)`` the samples it fetches, in which fetch blocks, and in which order it emits them.
Replaying it (:meth:`RerunIterableDataset.from_manifest`) runs the live pipeline on that order, so
the samples equal those of the live loader with the same strategy and seed; a run resumes
mid-epoch with ``state_dict`` / ``load_state_dict`` as a live one does.

``Manifest.generate`` scans and returns an unshuffled manifest; ``shuffle(strategy, seed=)``
re-plans it without re-scanning (seed ``e`` equals the live loader's ``set_epoch(e)``).
A file-backed manifest (``from_parquet``) is read lazily: the header and row count from the
footer, each worker's rows with a predicate pushed down to the row groups.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from rayform.catalog import DatasetEntry
from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._manifest_build import scan_samples, schedule_samples
from rayform.dataloader._manifest_format import (
    COL_EMIT_RANK,
    COL_FETCH_GROUP,
    COL_RANK,
    COL_SAMPLE_INDEX,
    COL_WORKER,
    MANIFEST_FORMAT_VERSION,
    ManifestMeta,
    ManifestSegment,
    check_columns,
    meta_from_schema,
    meta_to_metadata,
)
from rayform.dataloader._pipeline import SamplePipeline
from rayform.dataloader._pipeline_build import build_pipeline
from rayform.dataloader._sample_index import FixedRateSampling
from rayform.dataloader._shuffle import BlockShuffle, NoShuffle, ShuffleStrategy, check_block_size
from rayform.errors import ConfigError, FormatError
from rayform.recording._columns import SEGMENT_ID, SEGMENT_VERSION

DEFAULT_ROW_GROUP_SIZE = 1 << 16


class Manifest:
    """One epoch's sampling plan. Build with :meth:`generate`, load with :meth:`from_parquet`.

    Args:
        table: the manifest rows (see ``rayform.dataloader._manifest_format``), or ``None`` for a
            file-backed manifest read lazily from ``path``.
        metadata: the header.
        path: the Parquet file backing the manifest.

    Raises:
        FormatError: ``table`` lacks a manifest column.
        ConfigError: neither ``table`` nor ``path``.
    """

    def __init__(self, table: pa.Table | None, metadata: ManifestMeta, *,
                 path: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(metadata, ManifestMeta):
            raise TypeError(f"Manifest metadata must be a ManifestMeta, got {type(metadata).__name__}")
        if table is None and path is None:
            raise ConfigError("Manifest needs its rows or the path of its Parquet file; build one "
                              "with Manifest.generate(...) or load one with Manifest.from_parquet(path)")
        if table is not None:
            check_columns(table.schema, source="Manifest table")
            missing = sorted(k for k in metadata.recipe if k not in table.column_names)
            if missing:
                raise FormatError(f"Manifest table has no range columns for fields {missing}")
            table = table.replace_schema_metadata(meta_to_metadata(metadata))
        self._table = table
        self._meta = metadata
        self._path = None if path is None else os.fspath(path)

    # ------------------------------------------------------------------------ factories
    @classmethod
    def generate(cls, source: DataSource, index: str, fields: dict[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None, fetch_block_size: int = 128,
                 num_ranks: int = 1, num_workers_per_rank: int = 1,
                 required_fields: list[str] | None = None, scan_max_workers: int | None = None,
                 edge: EdgeMode = "trim") -> Manifest:
        """Scan ``source`` and plan one unshuffled epoch (``NoShuffle``, seed 0).

        Args:
            source, index, fields, timeline_sampling: the sample space, as for
                :class:`RerunIterableDataset`.
            fetch_block_size: samples per fetch block.
            num_ranks: the DDP world size the rows are sharded for.
            num_workers_per_rank: DataLoader workers per rank (0 and 1 both mean ``1``).
            required_fields: keys that must have data (within ``Field.max_staleness``) for a
                sample to be kept; default all.
            scan_max_workers: accepted for Rerun compatibility; the scan reads local index
                columns in one thread.
            edge: ``"trim"`` or ``"pad"`` (rayform option, as for the datasets).

        Raises:
            ConfigError: an unknown required field, or a bad block size or topology.
        """
        check_block_size(fetch_block_size)
        _check_positive("num_ranks", num_ranks)
        _check_positive("num_workers_per_rank", num_workers_per_rank)
        if scan_max_workers is not None:
            _check_positive("scan_max_workers", scan_max_workers)
        required = set(fields) if required_fields is None else set(required_fields)
        unknown = sorted(required - set(fields))
        if unknown:
            raise ConfigError(f"required_fields {unknown} are not keys of fields {sorted(fields)}")
        pipeline = build_pipeline(source, index, fields, timeline_sampling=timeline_sampling,
                                  decode_threads=None, edge=edge, sample_metadata=False)
        samples = scan_samples(pipeline, fields, required)
        strategy = NoShuffle()
        table = schedule_samples(samples, pipeline.sample_index, strategy=strategy, seed=0,
                                 fetch_block_size=fetch_block_size, num_ranks=num_ranks,
                                 num_workers_per_rank=num_workers_per_rank)
        dataset = source.dataset
        meta = ManifestMeta(
            format_version=MANIFEST_FORMAT_VERSION, dataset_name=dataset.name,
            dataset_id=dataset.id if isinstance(dataset, DatasetEntry) else "",
            index_name=index, ns_per_sample=pipeline.sample_index.ns_per_sample,
            ns_dtype=pipeline.sample_index.ns_dtype,
            recipe={key: field.to_recipe() for key, field in fields.items()},
            required_fields=sorted(required), fetch_block_size=fetch_block_size,
            buffer_size=None, min_fill=None, num_ranks=num_ranks,
            num_workers_per_rank=num_workers_per_rank, seed=0,
            shuffle_strategy=strategy.RECIPE_TAG, edge=edge,
            dataset_version=pipeline.view.snapshot_version, segments=manifest_segments(pipeline))
        return cls(table, meta)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str]) -> Manifest:
        """Open a manifest file lazily (header and row count from the footer; no rows read).

        Raises:
            FormatError: not a Parquet file, or not a rayform manifest.
        """
        try:
            schema = pq.read_schema(path)
        except pa.ArrowInvalid as err:
            raise FormatError(f"{os.fspath(path)}: not a Parquet manifest file ({err})") from err
        check_columns(schema, source=os.fspath(path))
        return cls(None, meta_from_schema(schema, source=os.fspath(path)), path=path)

    def write_parquet(self, path: str | os.PathLike[str], *,
                      row_group_size: int = DEFAULT_ROW_GROUP_SIZE) -> None:
        """Write the manifest (zstd Parquet; the header in the schema metadata)."""
        pq.write_table(self.to_arrow(), path, compression="zstd", row_group_size=row_group_size)

    # ------------------------------------------------------------------------ access
    @property
    def metadata(self) -> ManifestMeta:
        return self._meta

    @property
    def path(self) -> str | None:
        """The backing Parquet file, if any."""
        return self._path

    @property
    def num_rows(self) -> int:
        """Samples in the manifest (from the Parquet footer when file-backed)."""
        if self._table is None:
            assert self._path is not None
            return int(pq.read_metadata(self._path).num_rows)
        return int(self._table.num_rows)

    def to_arrow(self) -> pa.Table:
        """All rows (read from the file on first use when file-backed)."""
        if self._table is None:
            assert self._path is not None
            self._table = pq.read_table(self._path)
        return self._table

    def sample_indices(self) -> npt.NDArray[np.int64]:
        """The global sample index of every row, in row order (reads one column)."""
        if self._table is None:
            assert self._path is not None
            column = pq.read_table(self._path, columns=[COL_SAMPLE_INDEX]).column(0)
        else:
            column = self._table.column(COL_SAMPLE_INDEX)
        return np.asarray(column.to_numpy(), dtype=np.int64)

    def __repr__(self) -> str:
        meta = self._meta
        where = f", path={self._path!r}" if self._path else ""
        return (f"Manifest({meta.dataset_name!r}, index={meta.index_name!r}, "
                f"fields={sorted(meta.recipe)}, shuffle_strategy={meta.shuffle_strategy!r}, "
                f"seed={meta.seed}, topology={meta.num_ranks}x{meta.num_workers_per_rank}{where})")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._path is not None:
            state["_table"] = None  # workers read their own rows from the file
        return state

    # ------------------------------------------------------------------------ planning
    def shuffle(self, strategy: ShuffleStrategy | None = None, *, seed: int = 0) -> Manifest:
        """A new manifest with the same samples re-planned under ``strategy`` and ``seed``.

        The block size and topology are kept. ``seed=e`` gives the order the live loader gives
        after ``set_epoch(e)`` (with ``seed=None``), minus the incomplete samples.

        Args:
            strategy: default ``BlockShuffle()``.
            seed: an integer >= 0.
        """
        strategy = BlockShuffle() if strategy is None else strategy
        if not isinstance(strategy, ShuffleStrategy):
            raise TypeError(f"strategy must be SampleShuffle(), BlockShuffle(…) or NoShuffle(), "
                            f"got {strategy!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"Manifest.shuffle seed must be an integer >= 0, got {seed!r}")
        meta = self._meta
        table = schedule_samples(self.to_arrow(), meta.sample_index(), strategy=strategy,
                                 seed=seed, fetch_block_size=meta.fetch_block_size,
                                 num_ranks=meta.num_ranks,
                                 num_workers_per_rank=meta.num_workers_per_rank)
        buffer = strategy.emission_buffer()
        new_meta = dataclasses.replace(
            meta, shuffle_strategy=strategy.RECIPE_TAG, seed=seed,
            buffer_size=None if buffer is None else buffer.buffer_size,
            min_fill=None if buffer is None else buffer.min_fill)
        return type(self)(table, new_meta)

    def validate_topology(self, num_ranks: int, num_workers_per_rank: int) -> None:
        """Check that a run's topology is the one the manifest was planned for.

        Raises:
            ConfigError: a different number of ranks or workers per rank.
        """
        want = (self._meta.num_ranks, self._meta.num_workers_per_rank)
        if (num_ranks, num_workers_per_rank) != want:
            raise ConfigError(
                f"Manifest was built for {want[0]}x{want[1]} (ranks x workers_per_rank), but the "
                f"run has {num_ranks}x{num_workers_per_rank}; use DataLoader(num_workers="
                f"{want[1] if want[1] > 1 else 0}) on {want[0]} rank(s), or regenerate it"
            )

    def worker_assignments(self, rank: int, worker: int) -> pa.Table:
        """The rows of one ``(rank, worker)``, in fetch order (file-backed: only those rows)."""
        predicate = (pc.field(COL_RANK) == rank) & (pc.field(COL_WORKER) == worker)
        if self._table is None:
            assert self._path is not None
            return pads.dataset(self._path, format="parquet").to_table(filter=predicate)
        return self._table.filter(predicate)

    def worker_plan(self, rank: int, worker: int) -> tuple[list[pa.Table], npt.NDArray[np.int64]]:
        """One ``(rank, worker)``'s fetch groups (tables, in fetch order) and emission order."""
        rows = self.worker_assignments(rank, worker)
        if rows.num_rows == 0:
            return [], np.zeros(0, dtype=np.int64)
        groups = rows.column(COL_FETCH_GROUP).to_numpy()
        cuts = [0, *(np.flatnonzero(np.diff(groups)) + 1).tolist(), rows.num_rows]
        blocks = [rows.slice(lo, hi - lo) for lo, hi in itertools.pairwise(cuts)]
        emit_order = np.argsort(rows.column(COL_EMIT_RANK).to_numpy(), kind="stable")
        return blocks, emit_order.astype(np.int64)


def manifest_segments(pipeline: SamplePipeline) -> tuple[ManifestSegment, ...]:
    """The pipeline's sample space with each segment's version, for the header."""
    table = pipeline.view.segment_table_arrow()
    versions = dict(zip(table.column(SEGMENT_ID).to_pylist(),
                        table.column(SEGMENT_VERSION).to_pylist(), strict=True))
    index = pipeline.sample_index
    starts, ends = index.segment_bounds(np.arange(len(index.segments), dtype=np.int64))
    return tuple(ManifestSegment(segment_id=s.segment_id, version=str(versions[s.segment_id]),
                                 index_start=s.index_start, num_samples=s.num_samples,
                                 range_start=int(lo), range_end=int(hi))
                 for s, lo, hi in zip(index.segments, starts.tolist(), ends.tolist(), strict=True))


def recipe_mismatches(meta: ManifestMeta, fields: Mapping[str, Field]) -> list[str]:
    """Field keys whose column or window differ from the manifest's recipe (or that it lacks)."""
    bad: list[str] = []
    for key, field in fields.items():
        frozen = meta.recipe.get(key)
        recipe = field.to_recipe()
        if frozen is None or any(frozen.get(k) != recipe[k] for k in ("path", "window")):
            bad.append(key)
    return bad


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
