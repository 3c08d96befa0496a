"""Decoders with a keyframe column (video): decode runs from the prior keyframe to the last output."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import VIDEO, Episode, reference_positions, reference_row

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    DecodeRequest,
    Field,
    FieldBatch,
    FixedRateSampling,
    NoShuffle,
    RerunIterableDataset,
    RerunMapDataset,
    ShuffleStrategy,
)
from rayform.decoders import ColumnDecoder
from rayform.errors import ConfigError
from rayform.recording._columns import sibling_column


class PacketEchoDecoder(ColumnDecoder):
    """Returns ``[keyframe frame, last decoded frame, *output frames]`` from ``seg:frame`` packets."""

    def __init__(self, keyframe_component: str = "VideoStream:is_keyframe") -> None:
        self.keyframe_component = keyframe_component
        self.calls = 0

    def prior_keyframe_path(self, field_path: str) -> str | None:
        head = field_path.rsplit(":", 2)[0]
        return f"{head}:{self.keyframe_component}"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        self.calls += 1
        packets = [row[0].decode() for row in batch.column.to_pylist()]
        seen: list[str] = []
        last_start: dict[str, int] = {}
        out = []
        for req in requests:
            assert req.starts_at_keyframe
            rows = req.decode_row_indices
            assert list(rows) == list(range(rows[0], rows[-1] + 1)), "decode rows are contiguous"
            if seen and seen[-1] != req.segment_id:
                assert req.segment_id not in seen, "requests are grouped by segment"
            seen.append(req.segment_id)
            assert rows[0] >= last_start.get(req.segment_id, -1), "ascending within a segment"
            last_start[req.segment_id] = rows[0]
            assert all(rows[0] <= r <= rows[-1] for r in req.output_row_indices)
            frames = [int(packets[r].split(":")[1]) for r in rows]
            assert {packets[r].split(":")[0] for r in rows} == {req.segment_id}
            outputs = [int(packets[r].split(":")[1]) for r in req.output_row_indices]
            out.append(torch.tensor([frames[0], frames[-1], *outputs]))
        return out


def _expected(ep: Episode, timeline: str, value: int, window: tuple[Any, ...] | None
              ) -> list[int] | None:
    video = ep.entities["video"]
    flags = np.array(ep.entities["video_keyframe"].values)
    times = video.times[timeline]
    positions, _ = reference_positions(ep, timeline, value, window, "trim")
    earliest = min(positions)
    keyframes = [i for i in range(len(times)) if flags[i] and times[i] <= earliest]
    rows = [reference_row(times, p) for p in positions]
    if not keyframes or any(r is None for r in rows):
        return None
    frames = video.values
    outputs = [int(frames[r]) for r in rows if r is not None]
    last = max(r for r in rows if r is not None)
    return [int(frames[keyframes[-1]]), int(frames[last]), *outputs]


@pytest.mark.parametrize(("timeline", "rate", "window"), [
    ("frame_index", None, None),
    ("frame_index", None, (-3, -1, 0)),
    ("real_time", 30.0, (-0.025, 0.0)),
    ("elapsed", 50.0, None),
])
def test_video_requests_start_at_the_prior_keyframe(robots_dataset: DatasetEntry,
                                                    robots_episodes: list[Episode],
                                                    timeline: str, rate: float | None,
                                                    window: tuple[Any, ...] | None) -> None:
    decoder = PacketEchoDecoder()
    ds = RerunMapDataset(
        DataSource(robots_dataset), timeline, {"video": Field(VIDEO, decoder, window=window)},
        timeline_sampling=None if rate is None else FixedRateSampling(rate_hz=rate),
        sample_metadata=True, decode_threads=1)
    order = np.random.default_rng(1).permutation(len(ds)).tolist()
    by_id = {ep.segment_id: ep for ep in robots_episodes}
    missing = 0
    for lo in range(0, len(order), 16):
        batch = ds.__getitems__(order[lo:lo + 16])
        for sample in batch:
            ep = by_id[sample["meta"]["segment_id"]]
            expected = _expected(ep, timeline, sample["meta"]["index_value"], window)
            if expected is None:
                missing += 1
                assert sample["video"] is None
            else:
                assert sample["video"].tolist() == expected
    assert missing > 0, "samples before the first keyframe give None"
    assert decoder.calls <= -(-len(ds) // 16), "one decode call per field and batch"


def test_missing_keyframe_column_is_a_config_error(robots_dataset: DatasetEntry) -> None:
    decoder = PacketEchoDecoder(keyframe_component="VideoStream:keyframe_flags")
    with pytest.raises(ConfigError, match="keyframe column '/video:VideoStream:keyframe_flags'"):
        RerunMapDataset(DataSource(robots_dataset), "frame_index",
                        {"video": Field(VIDEO, decoder)})


def test_decoders_can_open_the_segment(robots_dataset: DatasetEntry) -> None:
    seen: list[Any] = []

    class SegmentPeeker(ColumnDecoder):
        def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
            assert batch.open_segment is not None
            assert batch.path == VIDEO
            for req in requests:
                seg = batch.open_segment(req.segment_id)
                seen.append(seg.column(sibling_column(VIDEO, "codec"), "frame_index"))
            return [torch.zeros(1) for _ in requests]

    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index",
                         {"video": Field(VIDEO, SegmentPeeker())})
    ds.__getitems__([0, 50])
    assert len(seen) == 2 and all(c.is_static for c in seen)
    assert seen[0].values.to_pylist() == [["h264"]]


class OverlapProbe(PacketEchoDecoder):
    """Counts how many ``decode`` calls run at once (each lasts a little while)."""

    def __init__(self, *, concurrent: bool) -> None:
        super().__init__()
        self._concurrent = concurrent
        self._lock = threading.Lock()
        self.active = 0
        self.most = 0

    @property
    def concurrent_blocks(self) -> bool:
        return self._concurrent

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(0.01)
            return super().decode(batch, requests)
        finally:
            with self._lock:
                self.active -= 1


@pytest.mark.filterwarnings("ignore:Skipping samples:RuntimeWarning")
@pytest.mark.parametrize(("concurrent", "strategy", "at_once"), [
    (True, BlockShuffle(), 2), (False, BlockShuffle(), 1), (True, NoShuffle(), 1)])
def test_iterable_prepares_two_shuffled_blocks_at_once_when_the_decoder_allows(
        robots_dataset: DatasetEntry, concurrent: bool, strategy: ShuffleStrategy,
        at_once: int) -> None:
    # Blocks in order stay one at a time: each continues the decoder sessions of the last.
    def samples(decoder: ColumnDecoder) -> list[tuple[str, list[int]]]:
        ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index",
                                  {"video": Field(VIDEO, decoder)}, fetch_block_size=4,
                                  shuffle_strategy=strategy, sample_metadata=True,
                                  decode_threads=1)
        return [(s["meta"]["segment_id"], s["video"].tolist() if s["video"] is not None else [])
                for s in ds]

    probe = OverlapProbe(concurrent=concurrent)
    got = samples(probe)
    assert probe.most == at_once
    assert got == samples(PacketEchoDecoder()), "the same samples in the same order"


class SlowFirstBlock(PacketEchoDecoder):
    """Holds its first ``decode`` call until a third call has started (or ``timeout`` passes)."""

    def __init__(self, *, timeout: float) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._third = threading.Event()
        self._timeout = timeout
        self.started = 0
        self.third_started_while_first_ran = False

    @property
    def concurrent_blocks(self) -> bool:
        return True

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        with self._lock:
            self.started += 1
            call = self.started
        if call == 1:
            self.third_started_while_first_ran = self._third.wait(self._timeout)
        elif call == 3:
            self._third.set()
        return super().decode(batch, requests)


@pytest.mark.filterwarnings("ignore:Skipping samples:RuntimeWarning")
def test_a_fetch_thread_done_early_starts_the_next_block(robots_dataset: DatasetEntry) -> None:
    # Two fetch threads: while the first block is slow, the other thread decodes the second and
    # goes on to the third instead of waiting for the first to be consumed.
    def samples(decoder: ColumnDecoder) -> list[tuple[str, list[int]]]:
        ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index",
                                  {"video": Field(VIDEO, decoder)}, fetch_block_size=4,
                                  shuffle_strategy=BlockShuffle(), sample_metadata=True,
                                  decode_threads=1)
        return [(s["meta"]["segment_id"], s["video"].tolist() if s["video"] is not None else [])
                for s in ds]

    slow = SlowFirstBlock(timeout=10.0)
    got = samples(slow)
    assert slow.third_started_while_first_ran
    assert got == samples(PacketEchoDecoder()), "the same samples in the same order"
