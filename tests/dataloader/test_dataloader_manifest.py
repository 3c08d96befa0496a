"""Manifest: a frozen epoch plan that replays exactly what the live loader yields, and resumes."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import torch
from dataloader_factories import GRIPPER, JOINTS, Episode, reference_row, write_episode
from torch.utils.data import DataLoader

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    Manifest,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
    ShuffleStrategy,
)
from rayform.dataloader._partition import StreamPosition
from rayform.errors import ConfigError, DecodeError, FormatError

FORK_WITH_THREADS = "ignore:This process .* is multi-threaded:DeprecationWarning"
pytestmark = pytest.mark.filterwarnings("ignore:Skipping samples where field:RuntimeWarning")

STRATEGIES = [NoShuffle(), SampleShuffle(), BlockShuffle(), BlockShuffle(buffer_size=8),
              BlockShuffle(buffer_size=8, min_fill=2)]


def _fields() -> dict[str, Field]:
    """The gripper is sparse (first row at frame 2): early samples are incomplete."""
    return {"state": Field(JOINTS, NumericDecoder()),
            "gripper": Field(GRIPPER, NumericDecoder()),
            "chunk": Field(JOINTS, NumericDecoder(), window=(-1, 0, 2))}


def _live(dataset: DatasetEntry, strategy: ShuffleStrategy, epoch: int,
          **kwargs: Any) -> RerunIterableDataset:
    ds = RerunIterableDataset(DataSource(dataset), "frame_index", _fields(), fetch_block_size=5,
                              shuffle_strategy=strategy, sample_metadata=True, **kwargs)
    ds.set_epoch(epoch)
    return ds


def _generate(dataset: DatasetEntry, **kwargs: Any) -> Manifest:
    return Manifest.generate(DataSource(dataset), "frame_index", _fields(), fetch_block_size=5,
                             **kwargs)


def _on_disk(manifest: Manifest, path: Path, **kwargs: Any) -> Manifest:
    manifest.write_parquet(path, **kwargs)
    return Manifest.from_parquet(path)


def _replay(dataset: DatasetEntry, manifest: Manifest) -> RerunIterableDataset:
    return RerunIterableDataset.from_manifest(manifest, DataSource(dataset), _fields(),
                                              sample_metadata=True)


def _ids(samples: Iterable[dict[str, Any]]) -> list[int]:
    return [s["meta"]["sample_index"] for s in samples]


def _assert_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert _ids(a) == _ids(b)
    for x, y in zip(a, b, strict=True):
        for key in _fields():
            assert torch.equal(x[key], y[key]), key


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_replay_equals_the_live_run(robots_dataset: DatasetEntry, strategy: ShuffleStrategy,
                                    tmp_path: Path) -> None:
    live = list(_live(robots_dataset, strategy, epoch=3))
    manifest = _on_disk(_generate(robots_dataset).shuffle(strategy, seed=3), tmp_path / "m.parquet")
    replayed = list(_replay(robots_dataset, manifest))
    _assert_same(replayed, live)
    total = len(_live(robots_dataset, strategy, 0))
    assert manifest.num_rows == len(live) < total, "incomplete samples are left out"
    assert sorted(_ids(live)) == sorted(manifest.sample_indices().tolist())
    if isinstance(strategy, NoShuffle):
        assert _ids(replayed) == sorted(_ids(replayed))
    else:
        assert _ids(replayed) != sorted(_ids(replayed))


def test_generate_is_unshuffled_and_shuffle_returns_a_new_manifest(
        robots_dataset: DatasetEntry) -> None:
    base = _generate(robots_dataset)
    meta = base.metadata
    assert (meta.shuffle_strategy, meta.seed, meta.buffer_size) == ("none", 0, None)
    assert meta.required_fields == sorted(_fields())
    assert meta.recipe["chunk"]["window"] == [-1, 0, 2]
    shuffled = base.shuffle(BlockShuffle(buffer_size=8, min_fill=3), seed=7)
    assert (shuffled.metadata.shuffle_strategy, shuffled.metadata.seed,
            shuffled.metadata.buffer_size, shuffled.metadata.min_fill) == ("block", 7, 8, 3)
    assert base.metadata.shuffle_strategy == "none", "the original is unchanged"
    assert base.shuffle().metadata.shuffle_strategy == "block", "BlockShuffle by default"
    assert sorted(shuffled.sample_indices().tolist()) == sorted(base.sample_indices().tolist())


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
def test_replay_equals_live_with_two_workers(robots_dataset: DatasetEntry, tmp_path: Path) -> None:
    strategy = BlockShuffle(buffer_size=6)
    manifest = _on_disk(_generate(robots_dataset, num_workers_per_rank=2).shuffle(strategy, seed=1),
                        tmp_path / "m.parquet")

    def run(ds: RerunIterableDataset) -> list[int]:
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="fork")
        return [i for batch in loader for i in batch["meta"]["sample_index"].tolist()]

    live = run(_live(robots_dataset, strategy, epoch=1))
    assert run(_replay(robots_dataset, manifest)) == live
    with pytest.raises(ConfigError, match=r"built for 1x2 .* but the run has 1x1"):
        list(_replay(robots_dataset, manifest))


def test_replay_equals_live_on_each_of_two_ranks(robots_dataset: DatasetEntry,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    strategy = BlockShuffle(buffer_size=5)
    manifest = _generate(robots_dataset, num_ranks=2).shuffle(strategy, seed=2)
    per_rank = []
    for rank in range(2):
        monkeypatch.setattr(StreamPosition, "current",
                            staticmethod(lambda r=rank: StreamPosition(rank=r, world_size=2)))
        live = list(_live(robots_dataset, strategy, epoch=2))
        replayed = list(_replay(robots_dataset, manifest))
        _assert_same(replayed, live)
        per_rank.append(_ids(replayed))
    assert not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == sorted(manifest.sample_indices().tolist())


def test_a_file_backed_manifest_reads_lazily(robots_dataset: DatasetEntry, tmp_path: Path) -> None:
    memory = _generate(robots_dataset, num_ranks=2, num_workers_per_rank=2).shuffle(seed=4)
    path = tmp_path / "m.parquet"
    lazy = _on_disk(memory, path, row_group_size=8)
    assert lazy._table is None  # nothing read yet
    assert lazy.num_rows == memory.num_rows and lazy._table is None
    assert lazy.metadata == memory.metadata
    for rank, worker in itertools.product(range(2), range(2)):
        assert lazy.worker_assignments(rank, worker).equals(
            memory.worker_assignments(rank, worker).replace_schema_metadata(None)
            .cast(lazy.worker_assignments(rank, worker).schema))
        blocks, emit = lazy.worker_plan(rank, worker)
        mem_blocks, mem_emit = memory.worker_plan(rank, worker)
        assert [len(b) for b in blocks] == [len(b) for b in mem_blocks]
        assert np.array_equal(emit, mem_emit)
    assert lazy._table is None, "worker reads did not load the whole manifest"
    assert pickle.loads(pickle.dumps(lazy))._table is None
    # Rows are stored by (rank, worker), so one shard's predicate prunes most row groups.
    fragment = next(pads.dataset(path, format="parquet").get_fragments())
    total_groups = pq.ParquetFile(path).num_row_groups
    touched = fragment.split_by_row_group(
        filter=(pads.field("rank") == 1) & (pads.field("worker") == 0))
    assert total_groups >= 6 and len(touched) <= total_groups // 3


def test_resume_a_replay_mid_epoch(robots_dataset: DatasetEntry, tmp_path: Path) -> None:
    manifest = _on_disk(_generate(robots_dataset).shuffle(BlockShuffle(buffer_size=7), seed=5),
                        tmp_path / "m.parquet")
    full = _ids(_replay(robots_dataset, manifest))
    first = _replay(robots_dataset, manifest)
    head = _ids(itertools.islice(iter(first), 11))
    state = first.state_dict()
    assert state["order"] == "manifest" and state["position"] == 11
    again = _replay(robots_dataset, manifest)
    again.load_state_dict(state)
    assert head + _ids(again) == full
    assert _ids(again) == full, "the next pass replays the whole epoch"
    live_state = _live(robots_dataset, NoShuffle(), 0).state_dict()
    with pytest.raises(ConfigError, match="order='contiguous'"):
        again.load_state_dict(live_state)


def test_required_fields_and_max_staleness(tmp_path: Path, robots_episodes: list[Episode],
                                           robots_dataset: DatasetEntry) -> None:
    source = DataSource(robots_dataset)
    all_required = _generate(robots_dataset)
    optional = _generate(robots_dataset, required_fields=["state", "chunk"])
    assert optional.num_rows > all_required.num_rows
    replayed = list(_replay(robots_dataset, optional))
    assert any(s["gripper"] is None for s in replayed), "optional fields may be missing"
    assert all(s["state"] is not None for s in replayed)

    for staleness in (0, 1):
        fields = {"gripper": Field(GRIPPER, NumericDecoder(), max_staleness=staleness)}
        manifest = Manifest.generate(source, "frame_index", fields)
        kept = []
        for row in manifest.to_arrow().to_pylist():
            kept.append((row["segment_id"], row["anchor"]))
        expected = []
        for ep in sorted(robots_episodes, key=lambda e: e.segment_id):
            times = ep.entities["gripper"].times["frame_index"]
            lo, hi = ep.range_of("frame_index")
            for frame in range(lo, hi + 1):
                row = reference_row(times, frame)
                if row is not None and frame - int(times[row]) <= staleness:
                    expected.append((ep.segment_id, frame))
        assert sorted(kept) == expected
    with pytest.raises(ConfigError, match="integral max_staleness"):
        Manifest.generate(source, "frame_index",
                          {"g": Field(GRIPPER, NumericDecoder(), max_staleness=0.5)})
    with pytest.raises(ConfigError, match="required_fields"):
        _generate(robots_dataset, required_fields=["nope"])


def test_the_map_dataset_serves_the_manifest_rows(robots_dataset: DatasetEntry) -> None:
    manifest = _generate(robots_dataset).shuffle(SampleShuffle(), seed=9)
    source = DataSource(robots_dataset)
    mapped = RerunMapDataset.from_manifest(manifest, source, _fields(), sample_metadata=True)
    live = RerunMapDataset(source, "frame_index", _fields(), sample_metadata=True)
    rows = manifest.sample_indices()
    assert len(mapped) == manifest.num_rows
    got = mapped.__getitems__(list(range(len(mapped))))
    want = live.__getitems__(rows.tolist())
    _assert_same(got, want)
    assert all(s[k] is not None for s in got for k in _fields())
    with pytest.raises(IndexError):
        mapped[len(mapped)]


def test_a_replay_refuses_changed_data_or_fields(tmp_path: Path,
                                                 fresh_dataset: tuple[DatasetEntry, list[Episode]]
                                                 ) -> None:
    dataset, _ = fresh_dataset
    fields = {"state": Field(JOINTS, NumericDecoder())}
    manifest = Manifest.generate(DataSource(dataset), "frame_index", fields)
    version = dataset.snapshot_version
    with pytest.raises(ConfigError, match=r"fields \['state'\] differ"):
        RerunIterableDataset.from_manifest(
            manifest, DataSource(dataset),
            {"state": Field(JOINTS, NumericDecoder(), window=(0, 1))})
    path = tmp_path / "ep0-again.rfr"
    write_episode(path, "ep0", seed=42, num_frames=12)
    dataset.register([path], on_duplicate="replace").wait()
    with pytest.raises(ConfigError, match=r"re-registered \['ep0'\]"):
        RerunIterableDataset.from_manifest(manifest, DataSource(dataset), fields)
    pinned = RerunIterableDataset.from_manifest(manifest, DataSource(dataset.at_version(version)),
                                                fields)
    assert len(list(pinned)) == manifest.num_rows


@pytest.mark.filterwarnings("ignore:VideoFrameDecoder:RuntimeWarning")
def test_a_required_field_that_decodes_to_nothing_raises(robots_dataset: DatasetEntry) -> None:
    from rayform.dataloader import VideoFrameDecoder

    fields = {"video": Field("/video:VideoStream:sample", VideoFrameDecoder())}
    manifest = Manifest.generate(DataSource(robots_dataset), "frame_index", fields)
    assert manifest.num_rows > 0, "the index says every sample after a keyframe is complete"
    replay = RerunIterableDataset.from_manifest(manifest, DataSource(robots_dataset), fields)
    with pytest.raises(DecodeError, match=r"field 'video' \(entity '/video', column "
                                          r"'/video:VideoStream:sample'\) of segment 'ep0' at "
                                          r"frame_index = \d+ could not be decoded"):
        next(iter(replay))
    lenient = RerunIterableDataset.from_manifest(manifest, DataSource(robots_dataset), fields,
                                                 on_decode_error="none")
    with pytest.warns(RuntimeWarning, match="could not be decoded"), \
            pytest.raises(RuntimeError, match="Required fields decoded to nothing: video"):
        next(iter(lenient))


def test_damaged_or_foreign_files_are_refused(robots_dataset: DatasetEntry, tmp_path: Path) -> None:
    manifest = _generate(robots_dataset)
    table = manifest.to_arrow()
    meta = dict(table.schema.metadata)
    del meta[b"fetch_block_size"]
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "damaged.parquet")
    with pytest.raises(FormatError, match="fetch_block_size"):
        Manifest.from_parquet(tmp_path / "damaged.parquet")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "foreign.parquet")
    with pytest.raises(FormatError, match="manifest column 'rank'"):
        Manifest.from_parquet(tmp_path / "foreign.parquet")
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(FormatError, match="not a Parquet manifest"):
        Manifest.from_parquet(tmp_path / "text.parquet")
    with pytest.raises(ConfigError, match="Manifest needs its rows"):
        Manifest(None, manifest.metadata)
    with pytest.raises(ConfigError, match="cannot be combined with a manifest"):
        RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                             shuffle_strategy=NoShuffle(), manifest=manifest)


def test_pad_edges_replay_like_the_live_loader(robots_dataset: DatasetEntry) -> None:
    live = list(_live(robots_dataset, SampleShuffle(), epoch=6, edge="pad"))
    manifest = _generate(robots_dataset, edge="pad").shuffle(SampleShuffle(), seed=6)
    replayed = list(_replay(robots_dataset, manifest))
    _assert_same(replayed, live)
    assert all(torch.equal(a["chunk_is_pad"], b["chunk_is_pad"])
               for a, b in zip(replayed, live, strict=True))
