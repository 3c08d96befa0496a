"""VideoFrameDecoder's worker-process path: exactly the frames of the in-process path (and PyAV's)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from torch.utils.data import DataLoader
from video_fixtures import (
    FRAME_NUMBER,
    VIDEO_SAMPLE,
    codec_params,
    hwc,
    packet_batch,
    reference_frames,
    request,
    synthetic_frames,
    video_dataset,
)

from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset
from rayform.decoders import TensorRows, VideoFrameDecoder
from rayform.decoders._shared_frames import SharedFramePool
from rayform.errors import ConfigError
from rayform.media._video_encode import encode_video_packets

NUM_FRAMES = 61
READY_S = 60.0


@cache
def stream(codec: str, gop: int, width: int = 64) -> tuple[
        list[bytes], npt.NDArray[np.bool_], list[npt.NDArray[np.uint8]]]:
    packets, is_keyframe = encode_video_packets(synthetic_frames(NUM_FRAMES, width=width),
                                                codec=codec, gop=gop, fps=30)
    return packets, is_keyframe, reference_frames(packets, codec)


def in_processes(codec: str = "h264", **options: Any) -> VideoFrameDecoder:
    """A decoder whose workers have started (until then calls decode in-process)."""
    decoder = VideoFrameDecoder(codec=codec, decode_processes=2, **options)
    procs = decoder.process_decoder()
    assert procs is not None and procs.processes.wait_ready(READY_S), "workers did not start"
    return decoder


def decode(decoder: VideoFrameDecoder, codec: str, gop: int, targets: list[int], *,
           starts_at_keyframe: bool = True, width: int = 64) -> Any:
    packets, is_keyframe, _ = stream(codec, gop, width)
    requests = [request(i, [t], is_keyframe, starts_at_keyframe=starts_at_keyframe)
                for i, t in enumerate(targets)]
    return decoder.decode(packet_batch(packets), requests)


def frames(values: Any) -> list[npt.NDArray[np.uint8] | None]:
    return [None if v is None else hwc(v).copy() for v in values]


@pytest.mark.parametrize("codec", codec_params())
@pytest.mark.parametrize("gop", [1, 8, 30])
def test_random_and_block_reads_equal_the_in_process_path(codec: str, gop: int) -> None:
    """Random targets (seeks to non-keyframes, repeats) and consecutive blocks: the workers'
    frames are the in-process decoder's, pixel for pixel, and both are PyAV's."""
    _, _, reference = stream(codec, gop)
    workers = in_processes(codec)
    threads = VideoFrameDecoder(codec=codec, decode_processes=0)
    rng = np.random.default_rng(gop)
    draws = [rng.integers(0, NUM_FRAMES, size=24).tolist() for _ in range(3)]
    blocks = [list(range(s, min(s + 10, NUM_FRAMES))) for s in range(0, NUM_FRAMES, 10)]
    for targets in draws + blocks:
        got = frames(decode(workers, codec, gop, targets))
        expected = frames(decode(threads, codec, gop, targets))
        for target, a, b in zip(targets, got, expected, strict=True):
            assert a is not None and b is not None
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, reference[target])
    assert workers.process_calls == len(draws) + len(blocks)


def test_requests_not_starting_at_a_keyframe_are_none_as_before() -> None:
    workers = in_processes()
    mixed_packets, is_keyframe, reference = stream("h264", 8)
    requests = [request(0, [13], is_keyframe), request(1, [20], is_keyframe,
                                                       starts_at_keyframe=False),
                request(2, [44], is_keyframe)]
    out = workers.decode(packet_batch(mixed_packets), requests)
    old = VideoFrameDecoder(decode_processes=0).decode(packet_batch(mixed_packets), requests)
    assert out[1] is None and old[1] is None
    for i, target in ((0, 13), (2, 44)):
        np.testing.assert_array_equal(hwc(out[i]), hwc(old[i]))
        np.testing.assert_array_equal(hwc(out[i]), reference[target])
    assert workers.process_calls == 1


def test_consecutive_blocks_resume_the_workers_decoders() -> None:
    _, _, reference = stream("h264", 30)
    workers = in_processes()
    hits = workers.session_hits
    for start in range(1, 30, 5):  # one GOP read in blocks of five frames
        targets = list(range(start, start + 5))
        for target, tensor in zip(targets, decode(workers, "h264", 30, targets), strict=True):
            np.testing.assert_array_equal(hwc(tensor), reference[target])
    assert workers.process_calls == 6
    assert workers.session_hits - hits == 5, "each block continues the last block's decoder"


def test_a_call_sends_each_worker_one_message_with_all_its_jobs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Many independent GOPs (a shuffled batch: a job each) and a long sequential block (cut
    into several jobs): each worker gets the call's jobs in one message, and the frames are
    PyAV's."""
    _, _, reference = stream("h264", 8)
    workers = in_processes()
    procs = workers.process_decoder()
    assert procs is not None
    sent: list[int] = []
    submit = procs.processes.submit

    def counted(worker: int, tasks: Any, work: int) -> Any:
        sent.append(worker)
        return submit(worker, tasks, work)

    monkeypatch.setattr(procs.processes, "submit", counted)
    for targets in ([3, 60, 12, 41, 27, 50, 19, 35], list(range(2, 58))):
        sent.clear()
        for target, tensor in zip(targets, decode(workers, "h264", 8, targets), strict=True):
            np.testing.assert_array_equal(hwc(tensor), reference[target])
        assert sent and len(sent) == len(set(sent)), f"messages to workers {sent}"
    assert workers.process_calls == 2


def test_a_later_dataset_knows_the_streams_frame_size_without_decoding_a_keyframe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame size the worker-process path needs before the workers write is learnt once per
    process and segment version: a second dataset's decoder (a new one) decodes no keyframe in
    this process to learn it, and its frames are still the reference's."""
    import rayform.decoders._video as video_module

    dataset, episodes = video_dataset(tmp_path, [40], codec="h264", gop=8)
    probes: list[str] = []
    open_decoder = video_module.open_decoder

    def counted(codec: str, **options: Any) -> Any:
        probes.append(codec)
        return open_decoder(codec, **options)

    for round_ in range(2):
        decoder = in_processes()  # a new decoder each time, as a new dataset has
        monkeypatch.setattr(video_module, "open_decoder", counted)
        ds = RerunMapDataset(DataSource(dataset), "frame_index",
                             {"image": Field(VIDEO_SAMPLE, decoder),
                              "frame": Field(FRAME_NUMBER, NumericDecoder())})
        batch = ds.__getitems__(list(range(10, 20)))
        monkeypatch.setattr(video_module, "open_decoder", open_decoder)
        for sample in batch:
            frame = int(sample["frame"].reshape(-1)[-1])
            np.testing.assert_array_equal(hwc(sample["image"]), episodes["ep0"].reference[frame])
        assert decoder.process_calls == 1
        assert len(probes) == (1 if round_ == 0 else 0), f"round {round_}: probes {probes}"
        probes.clear()


def test_outputs_are_rows_of_shared_memory_and_samples_own_their_frames() -> None:
    _, _, reference = stream("h264", 8)
    workers = in_processes()
    targets = [30, 3, 3, 17]
    out = decode(workers, "h264", 8, targets)
    assert workers.process_calls == 1
    assert isinstance(out, TensorRows) and out.tensor.shape == (4, 3, 48, 64)
    procs = workers.process_decoder()
    assert procs is not None
    pool = procs.processes.pool
    assert 0 <= out.tensor.data_ptr() - pool.address < pool.arena_bytes
    out.tensor[1].fill_(0)  # the repeated frame's second slot is its own memory
    for target, row in zip(targets[2:], out.tensor[2:], strict=True):
        np.testing.assert_array_equal(hwc(row), reference[target])


def test_windows_and_view_storage_equal_the_in_process_path() -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    windows = [[5, 6, 7, 8], [7, 7, 8], [20, 22, 24]]
    for storage in ("copy", "view"):
        workers = in_processes(window_storage=storage)
        requests = [request(i, w, is_keyframe) for i, w in enumerate(windows)]
        out = workers.decode(packet_batch(packets, is_windowed=True), requests)
        assert workers.process_calls == 1
        for window, clip in zip(windows, out, strict=True):
            assert clip is not None and clip.shape == (len(window), 3, 48, 64)
            for slot, target in enumerate(window):
                np.testing.assert_array_equal(hwc(clip[slot]), reference[target])


def test_a_frame_size_the_workers_do_not_expect_is_decoded_in_process() -> None:
    """The size is probed once per segment; a stream that changes it makes the call fall back."""
    workers = in_processes()
    decode(workers, "h264", 8, [0])
    assert workers.process_calls == 1
    _, _, wide = stream("h264", 8, 96)
    out = decode(workers, "h264", 8, [9, 30], width=96)  # same segment id, other frames
    assert workers.process_calls == 1
    for target, tensor in zip([9, 30], out, strict=True):
        np.testing.assert_array_equal(hwc(tensor), wide[target])
    again = decode(workers, "h264", 8, [31], width=96)
    assert workers.process_calls == 2
    np.testing.assert_array_equal(hwc(again[0]), wide[31])


def test_corrupt_packets_fail_their_gop_only_as_in_process() -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    broken = list(packets)
    broken[17] = b"\x00\x00\x01" + bytes(range(7, 200))  # garbage inside GOP 2
    targets = [3, 20, 41]
    requests = [request(i, [t], is_keyframe) for i, t in enumerate(targets)]
    workers = in_processes()
    got = workers.decode(packet_batch(broken), requests)
    old = VideoFrameDecoder(decode_processes=0).decode(packet_batch(broken), requests)
    assert workers.process_calls == 1
    for a, b in zip(got, old, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(hwc(a), hwc(b))
    np.testing.assert_array_equal(hwc(got[0]), reference[3])


def test_yuv_output_and_the_default_stay_in_process() -> None:
    assert VideoFrameDecoder(output_format="yuv420p", decode_processes=2).process_decoder() is None
    assert VideoFrameDecoder(decode_processes=0).process_decoder() is None
    assert VideoFrameDecoder().process_decoder() is None, "in-process is the default"
    assert VideoFrameDecoder(decode_threads=1).process_decoder() is None


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_bad_decode_processes_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="decode_processes"):
        VideoFrameDecoder(decode_processes=value)


def test_shared_pool_lends_a_buffer_again_once_dropped_and_refuses_when_full() -> None:
    pool = SharedFramePool(arena_bytes=1 << 20)
    first = pool.take(300_000)
    assert first is not None
    view = torch.from_numpy(first[:10].reshape(2, 5))
    second = pool.take(300_000)
    assert second is not None and pool.offset_of(second) != pool.offset_of(first)
    assert pool.take(600_000) is None, "the arena is full while both are lent"
    address = first.ctypes.data
    del first
    third = pool.take(300_000)
    assert third is not None and third.ctypes.data != address, "a view still holds it"
    del view, third
    again = pool.take(300_000)
    assert again is not None and again.ctypes.data == address


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_dataloader_workers_start_their_own_decode_workers(tmp_path: Path) -> None:
    """Each forked DataLoader worker gets decode workers of its own (the parent's are not its
    own), and every sample's frame is still the sequential decode's."""
    dataset, episodes = video_dataset(tmp_path, [40, 33], codec="h264", gop=8)
    decoder = VideoFrameDecoder(decode_processes=2)
    in_parent = decoder.process_decoder()
    assert in_parent is not None
    ds = RerunMapDataset(DataSource(dataset), "frame_index",
                         {"image": Field(VIDEO_SAMPLE, decoder),
                          "frame": Field(FRAME_NUMBER, NumericDecoder())}, sample_metadata=True)
    loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context="fork",
                        collate_fn=list, worker_init_fn=_wait_for_decode_workers)
    seen = 0
    for batch in loader:
        for sample in batch:
            episode = episodes[str(sample["meta"]["segment_id"])]
            frame = int(sample["frame"].reshape(-1)[-1])
            np.testing.assert_array_equal(hwc(sample["image"]), episode.reference[frame])
            seen += 1
    assert seen == 73


def _wait_for_decode_workers(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    assert info is not None
    decoder = info.dataset._pipeline._plans[0].field.decode  # type: ignore[attr-defined]
    procs = decoder.process_decoder()
    assert procs is not None and procs.processes.wait_ready(READY_S)
    assert procs.processes.pid == os.getpid()
