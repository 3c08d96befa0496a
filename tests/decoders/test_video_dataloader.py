"""VideoFrameDecoder through the datasets: every sample's frame equals a sequential decode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler
from video_fixtures import (
    FRAME_NUMBER,
    INTEL_VIDEOS,
    VIDEO_ASSET_TIMESTAMP,
    VIDEO_SAMPLE,
    VideoEpisode,
    codec_params,
    hwc,
    realdata_file,
    reference_file_frames,
    video_dataset,
)

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    FixedRateSampling,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
)
from rayform.decoders import (
    FieldBatch,
    VideoFrameDecoder,
    Yuv420Collator,
    Yuv420Frame,
    probe_video_asset,
)
from rayform.errors import ConfigError


def fields(codec: str = "h264", *, path: str = VIDEO_SAMPLE,
           window: tuple[int | float, ...] | None = None, **options: Any) -> dict[str, Field]:
    return {"image": Field(path, VideoFrameDecoder(codec=codec, **options), window=window),
            "frame": Field(FRAME_NUMBER, NumericDecoder())}


def check_sample(sample: dict[str, Any], episode: VideoEpisode, *,
                 window: tuple[int, ...] | None = None) -> None:
    """The frame served is the one whose number is served with it (latest at or before t)."""
    frame = int(sample["frame"].reshape(-1)[-1])
    image = sample["image"]
    assert image is not None
    if window is None:
        np.testing.assert_array_equal(hwc(image), episode.reference[frame])
        return
    assert image.shape[0] == len(window)
    base = frame - window[-1]
    for slot, offset in enumerate(window):
        np.testing.assert_array_equal(hwc(image[slot]), episode.reference[base + offset])


def segment_of(sample: dict[str, Any]) -> str:
    return str(sample["meta"]["segment_id"])


@pytest.fixture(scope="module")
def h264_dataset(tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[DatasetEntry, dict[str, VideoEpisode]]:
    return video_dataset(tmp_path_factory.mktemp("h264"), [50, 37, 44], codec="h264", gop=8)


@pytest.mark.parametrize("codec", codec_params())
def test_map_dataset_with_a_shuffled_sampler(tmp_path: Path, codec: str) -> None:
    dataset, episodes = video_dataset(tmp_path, [40, 33], codec=codec, gop=8)
    ds = RerunMapDataset(DataSource(dataset), "frame_index", fields(codec), sample_metadata=True)
    assert len(ds) == 73
    loader = DataLoader(ds, batch_size=16, sampler=RandomSampler(ds, generator=torch.Generator(
    ).manual_seed(0)), collate_fn=list)
    seen = 0
    for batch in loader:
        for sample in batch:
            check_sample(sample, episodes[segment_of(sample)])
            seen += 1
    assert seen == 73


@pytest.mark.parametrize("strategy", [SampleShuffle(), BlockShuffle(), BlockShuffle(
    buffer_size=64), NoShuffle()], ids=["sample", "block", "block-buffered", "none"])
def test_iterable_dataset_shuffles(h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]],
                                   strategy: Any) -> None:
    dataset, episodes = h264_dataset
    ds = RerunIterableDataset(DataSource(dataset), "frame_index", fields(), fetch_block_size=16,
                              shuffle_strategy=strategy, sample_metadata=True, seed=3)
    count = 0
    for sample in ds:
        check_sample(sample, episodes[segment_of(sample)])
        count += 1
    assert count == 131


def test_block_shuffle_reuses_decoder_sessions(
        h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]]) -> None:
    dataset, _ = h264_dataset
    decoder = VideoFrameDecoder(decode_threads=1)
    ds = RerunIterableDataset(DataSource(dataset), "frame_index",
                              {"image": Field(VIDEO_SAMPLE, decoder)}, fetch_block_size=12,
                              shuffle_strategy=NoShuffle())
    assert sum(1 for _ in ds) == 131
    # Blocks of 12 frames over GOPs of 8: a block that starts mid-GOP continues the decoder the
    # previous block left there (ep0: blocks at 12 and 36; ep1 and ep2 likewise) instead of
    # decoding again from the keyframe.
    assert decoder.session_hits >= 4
    assert decoder.session_hits + decoder.session_misses <= 131 // 12 + 1 + 3


@pytest.mark.parametrize(("strategy", "share"), [(BlockShuffle(), 1), (NoShuffle(), None)],
                         ids=["two-blocks-at-once", "one-block"])
def test_concurrent_blocks_give_the_video_decoder_its_share_of_threads(
        h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]], strategy: Any,
        share: int | None) -> None:
    dataset, episodes = h264_dataset
    decoder = VideoFrameDecoder(decode_threads=2)
    seen: set[int | None] = set()
    decode = decoder.decode

    def recording(batch: FieldBatch, requests: Any) -> Any:
        seen.add(batch.decode_threads)
        return decode(batch, requests)

    decoder.decode = recording  # type: ignore[method-assign]
    ds = RerunIterableDataset(DataSource(dataset), "frame_index",
                              {**fields(), "image": Field(VIDEO_SAMPLE, decoder)},
                              fetch_block_size=16, shuffle_strategy=strategy, decode_threads=2,
                              sample_metadata=True)
    count = 0
    for sample in ds:
        check_sample(sample, episodes[segment_of(sample)])
        count += 1
    assert count == 131
    assert seen == {share}


@pytest.mark.parametrize("window", [(-3, -2, -1, 0), (-8, -4, 0)])
def test_windows(h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]],
                 window: tuple[int, ...]) -> None:
    dataset, episodes = h264_dataset
    ds = RerunMapDataset(DataSource(dataset), "frame_index", fields(window=window),
                         sample_metadata=True)
    order = np.random.default_rng(1).permutation(len(ds)).tolist()
    for start in range(0, len(order), 24):
        for sample in ds.__getitems__(order[start:start + 24]):
            assert sample["image"].shape == (len(window), 3, 48, 64)
            frame = int(sample["frame"].reshape(-1)[-1])
            check_sample(sample, episodes[segment_of(sample)], window=window)
            assert frame + window[0] >= 0


def test_off_grid_capture_on_a_30hz_grid(tmp_path: Path) -> None:
    # A 27 fps camera served on a 30 Hz grid: each slot shows the latest real frame.
    dataset, episodes = video_dataset(tmp_path, [54, 40], codec="h264", gop=9, capture_hz=27.0)
    ds = RerunMapDataset(DataSource(dataset), "real_time", fields(), sample_metadata=True,
                         timeline_sampling=FixedRateSampling(rate_hz=30.0))
    out = ds.__getitems__(list(range(len(ds))))  # one batch: one fetch, all slots
    slots = 0
    for sample in out:
        episode = episodes[segment_of(sample)]
        t_ns = int(np.datetime64(sample["meta"]["index_value"], "ns").astype(np.int64))
        expected = int(np.searchsorted(episode.time_ns, t_ns, side="right") - 1)
        assert int(sample["frame"][0]) == expected
        check_sample(sample, episode)
        slots += 1
    # Two slots per 27-frame second are repeats of the same frame: more slots than frames.
    assert slots == len(ds) and slots > 54 + 40 - 2


def test_yuv_output_through_a_data_loader(
        h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]]) -> None:
    dataset, _ = h264_dataset
    ds = RerunMapDataset(DataSource(dataset), "frame_index",
                         fields(output_format="yuv420p"), sample_metadata=False)
    loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=Yuv420Collator())
    batch = next(iter(loader))
    assert isinstance(batch["image"], Yuv420Frame)
    assert batch["image"].y.shape == (8, 1, 48, 64)
    rgb = batch["image"].to_rgb(dtype=torch.uint8)
    assert rgb.shape == (8, 3, 48, 64)


def test_workers_decode_with_their_own_sessions(
        h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]]) -> None:
    dataset, episodes = h264_dataset
    ds = RerunIterableDataset(DataSource(dataset), "frame_index", fields(),
                              fetch_block_size=16, shuffle_strategy=BlockShuffle(),
                              sample_metadata=True, seed=0)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    count = 0
    for sample in loader:
        check_sample(sample, episodes[segment_of(sample)])
        count += 1
    assert count == 131


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_batched_block_shuffle_hands_out_views_of_the_block_buffer(
        h264_dataset: tuple[DatasetEntry, dict[str, VideoEpisode]], num_workers: int) -> None:
    """RerunIterableDataset(batch_size=…): the same frames as the per-sample pass (in the same
    order in one process; workers interleave their shards); a batch inside one block is a view
    of the block's frame buffer (no copy)."""
    dataset, _ = h264_dataset

    def make(batch_size: int | None) -> RerunIterableDataset:
        return RerunIterableDataset(DataSource(dataset), "frame_index", fields(),
                                    fetch_block_size=16, shuffle_strategy=BlockShuffle(),
                                    seed=5, batch_size=batch_size)

    want = torch.stack([s["image"] for s in make(None)])
    batches = list(DataLoader(make(8), batch_size=None, num_workers=num_workers,
                              multiprocessing_context="fork" if num_workers else None))
    got = torch.cat([b["image"] for b in batches])
    assert got.shape == want.shape == (131, 3, 48, 64)
    if num_workers:
        assert sorted(bytes(t.contiguous().numpy()) for t in got) == sorted(
            bytes(t.contiguous().numpy()) for t in want)
    else:
        assert torch.equal(got, want)
        views = [b["image"] for b in batches
                 if b["image"].untyped_storage().nbytes() > b["image"].nbytes]
        assert len(views) >= len(batches) // 2, "batches inside a block are views of its buffer"
        assert all(v.is_contiguous(memory_format=torch.channels_last) for v in views)


def test_missing_keyframe_column_is_a_construction_error(tmp_path: Path) -> None:
    catalog = Catalog.create(tmp_path / "catalog")
    dataset = catalog.create_dataset("video")
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        rec.log_columns("/cam", timelines={"frame_index": np.arange(3)},
                        components={"VideoStream:sample": [b"a", b"b", b"c"]})
    dataset.register([tmp_path / "ep.rfr"]).wait()
    with pytest.raises(ConfigError, match="is_keyframe"):
        RerunMapDataset(DataSource(dataset), "frame_index",
                        {"image": Field(VIDEO_SAMPLE, VideoFrameDecoder())})


def test_synthetic_mp4_assets(tmp_path: Path) -> None:
    dataset, episodes = video_dataset(tmp_path, [30, 26], codec="h264", gop=6, as_asset=True)
    ds = RerunIterableDataset(DataSource(dataset), "frame_index",
                              fields(path=VIDEO_ASSET_TIMESTAMP), fetch_block_size=8,
                              shuffle_strategy=BlockShuffle(), sample_metadata=True)
    count = 0
    for sample in ds:
        check_sample(sample, episodes[segment_of(sample)])
        count += 1
    assert count == 56


@pytest.mark.realdata
def test_b_frame_mp4_asset_through_the_map_dataset(tmp_path: Path) -> None:
    video = realdata_file(INTEL_VIDEOS / "bottle-detection.mp4")
    info = probe_video_asset(video)
    catalog = Catalog.create(tmp_path / "catalog")
    dataset = catalog.create_dataset("intel")
    frames = np.arange(info.num_frames)
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        timelines = {"frame_index": frames}
        rec.log_video_asset("/cam", video, timelines=timelines,
                            frame_timestamps_ns=info.frame_timestamps_ns,
                            is_keyframe=info.is_keyframe)
        rec.log_scalars("/frame_number", timelines=timelines, values=frames)
    dataset.register([tmp_path / "ep.rfr"]).wait()
    episode = VideoEpisode("ep", reference_file_frames(video), frames)
    ds = RerunMapDataset(DataSource(dataset), "frame_index", fields(path=VIDEO_ASSET_TIMESTAMP))
    picks = np.random.default_rng(5).choice(len(ds), size=48, replace=False).tolist()
    for sample in ds.__getitems__(picks):
        check_sample(sample, episode)
