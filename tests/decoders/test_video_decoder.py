"""VideoFrameDecoder on packet streams: pixel equality with a sequential decode, GOP grouping."""

from __future__ import annotations

import pickle
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from video_fixtures import (
    codec_params,
    hwc,
    logged_failure,
    packet_batch,
    reference_frames,
    request,
    synthetic_frames,
)

from rayform.decoders import FieldBatch, TensorRows, VideoFrameDecoder
from rayform.decoders import _video_runs as video_runs
from rayform.decoders._buffer_pool import FRAME_POOL
from rayform.decoders._video import JOBS_PER_THREAD
from rayform.decoders._video_plan import plan_packet_runs, schedule_runs
from rayform.errors import ConfigError
from rayform.media._video_encode import encode_video_packets

NUM_FRAMES = 61


@cache
def stream(codec: str, gop: int) -> tuple[list[bytes], npt.NDArray[np.bool_],
                                           list[npt.NDArray[np.uint8]]]:
    packets, is_keyframe = encode_video_packets(synthetic_frames(NUM_FRAMES), codec=codec,
                                                gop=gop, fps=30)
    return packets, is_keyframe, reference_frames(packets, codec)


def decode_targets(decoder: VideoFrameDecoder, codec: str, gop: int,
                   targets: list[int]) -> list[torch.Tensor | None]:
    packets, is_keyframe, _ = stream(codec, gop)
    requests = [request(i, [t], is_keyframe) for i, t in enumerate(targets)]
    out: list[torch.Tensor | None] = decoder.decode(packet_batch(packets), requests)
    return out


@pytest.mark.parametrize("codec", codec_params())
@pytest.mark.parametrize("gop", [1, 8, 30])
def test_random_order_is_pixel_identical(codec: str, gop: int) -> None:
    _, _, reference = stream(codec, gop)
    rng = np.random.default_rng(gop)
    decoder = VideoFrameDecoder(codec=codec)
    for _ in range(3):  # three blocks, each a random draw (with repeats)
        targets = rng.integers(0, NUM_FRAMES, size=24).tolist()
        out = decode_targets(decoder, codec, gop, targets)
        for target, tensor in zip(targets, out, strict=True):
            assert tensor is not None
            assert tensor.shape == (3, 48, 64) and tensor.dtype == torch.uint8
            np.testing.assert_array_equal(hwc(tensor), reference[target])


@pytest.mark.parametrize("codec", codec_params())
@pytest.mark.parametrize("gop", [1, 8, 30])
def test_block_order_is_pixel_identical_and_reuses_sessions(codec: str, gop: int) -> None:
    _, _, reference = stream(codec, gop)
    decoder = VideoFrameDecoder(codec=codec, decode_threads=1)
    starts = list(range(0, NUM_FRAMES, 10))
    for start in starts:  # consecutive blocks of 10 frames
        targets = list(range(start, min(start + 10, NUM_FRAMES)))
        for target, tensor in zip(targets, decode_targets(decoder, codec, gop, targets),
                                  strict=True):
            assert tensor is not None
            np.testing.assert_array_equal(hwc(tensor), reference[target])
    # Each block continues the previous block's decoder, except where it starts a new GOP.
    new_gop_starts = sum(1 for s in starts if s % gop == 0)
    assert decoder.session_hits == len(starts) - new_gop_starts


def test_one_run_per_gop_within_a_block() -> None:
    decoder = VideoFrameDecoder(codec="h264", max_decoder_sessions=0, decode_threads=1)
    targets = [3, 17, 5, 12, 40, 33, 7, 16]  # GOP 8: GOPs 0, 1, 2, 4, 5
    decode_targets(decoder, "h264", 8, targets)
    # GOP 0 ends at frame 7 and GOP 1 starts at 8, so one pass decodes both (through the
    # keyframe); GOPs 2, 4 and 5 each start after a gap: four decoder starts in all.
    assert decoder.session_misses == 4


def test_sequential_reads_reuse_one_context_per_gop() -> None:
    decoder = VideoFrameDecoder(codec="h264", decode_processes=0)
    for target in range(24):
        decode_targets(decoder, "h264", 8, [target])
    assert (decoder.session_hits, decoder.session_misses) == (21, 3)


def test_repeated_target_hits_the_session_and_backward_step_restarts() -> None:
    _, _, reference = stream("h264", 30)
    decoder = VideoFrameDecoder(codec="h264", decode_processes=0)
    for target, hits in [(10, 0), (10, 1), (12, 2), (11, 2)]:
        (tensor,) = decode_targets(decoder, "h264", 30, [target])
        assert tensor is not None
        np.testing.assert_array_equal(hwc(tensor), reference[target])
        assert decoder.session_hits == hits


def test_max_decoder_sessions_zero_disables_reuse() -> None:
    decoder = VideoFrameDecoder(codec="h264", max_decoder_sessions=0)
    for target in range(5):
        decode_targets(decoder, "h264", 30, [target])
    assert decoder.session_hits == 0


@pytest.mark.parametrize("thread_count", [0, 3])
def test_threaded_decoders_with_delay_are_still_exact(thread_count: int) -> None:
    _, _, reference = stream("h264", 8)
    decoder = VideoFrameDecoder(codec="h264", thread_count=thread_count)
    targets = [0, 5, 6, 20, 21, 60, 13]
    for target, tensor in zip(targets, decode_targets(decoder, "h264", 8, targets), strict=True):
        assert tensor is not None
        np.testing.assert_array_equal(hwc(tensor), reference[target])


@pytest.mark.parametrize("decode_threads", [2, 3])
def test_runs_shared_between_threads_are_exact(decode_threads: int) -> None:
    _, _, reference = stream("h264", 8)
    decoder = VideoFrameDecoder(decode_threads=decode_threads, decode_processes=0)
    targets = list(range(NUM_FRAMES))[::-1]  # every GOP: one run each, split between threads
    for target, tensor in zip(targets, decode_targets(decoder, "h264", 8, targets), strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    # Runs that follow each other in one job continue one decoder; each job starts one.
    packets, is_keyframe, _ = stream("h264", 8)
    runs, _ = plan_packet_runs([request(i, [t], is_keyframe) for i, t in enumerate(targets)],
                               np.ones(len(packets), dtype=np.bool_))
    jobs = schedule_runs(runs, parts=JOBS_PER_THREAD * decode_threads)
    assert decode_threads < len(jobs) <= len(runs)
    assert decoder.session_misses == len(jobs)


def test_segments_are_decoded_separately() -> None:
    packets_a, kf_a, ref_a = stream("h264", 8)
    packets_b = encode_video_packets(synthetic_frames(20, seed=5), codec="h264", gop=8)[0]
    ref_b = reference_frames(packets_b, "h264")
    batch = packet_batch([*packets_a, *packets_b])
    kf_b = np.zeros(20, dtype=bool)
    kf_b[::8] = True
    requests = [request(0, [9], kf_a, segment_id="a"),
                request(1, [9], kf_b, segment_id="b", row_offset=len(packets_a)),
                request(2, [19], kf_b, segment_id="b", row_offset=len(packets_a))]
    decoder = VideoFrameDecoder(decode_threads=1)
    out = decoder.decode(batch, requests)
    np.testing.assert_array_equal(hwc(out[0]), ref_a[9])
    np.testing.assert_array_equal(hwc(out[1]), ref_b[9])
    np.testing.assert_array_equal(hwc(out[2]), ref_b[19])
    assert decoder.session_misses == 3


def test_a_call_given_one_thread_carries_one_decoder_through_its_gops() -> None:
    """FieldBatch.decode_threads=1 (the call's share while another block decodes): one job, so
    adjacent GOPs are decoded by one decoder, not one per GOP on the decoder's two threads."""
    packets, is_keyframe, reference = stream("h264", 8)
    targets = list(range(3, 40))
    requests = [request(i, [t], is_keyframe) for i, t in enumerate(targets)]
    shared = VideoFrameDecoder(decode_threads=2, decode_processes=0)
    out = shared.decode(replace(packet_batch(packets), decode_threads=1), requests)
    assert shared.session_misses == 1
    for target, tensor in zip(targets, out, strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    alone = VideoFrameDecoder(decode_threads=2, decode_processes=0)
    alone.decode(packet_batch(packets), requests)
    assert alone.session_misses > 1


def test_windows_stack_frames_and_never_share_memory() -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    batch = packet_batch(packets, is_windowed=True)
    windows = [[5, 6, 7, 8], [7, 7, 8], [20, 22, 24], [5, 6, 7, 8]]
    requests = [request(i, w, is_keyframe) for i, w in enumerate(windows)]
    out = VideoFrameDecoder().decode(batch, requests)
    for window, clip in zip(windows, out, strict=True):
        assert clip is not None and clip.shape == (len(window), 3, 48, 64)
        for slot, target in enumerate(window):
            np.testing.assert_array_equal(hwc(clip[slot]), reference[target])
    storages = {clip.untyped_storage().data_ptr() for clip in out}
    assert len(storages) == len(out)
    out[1][0].fill_(0)  # a repeated slot is its own memory
    np.testing.assert_array_equal(hwc(out[1][1]), reference[7])


def test_duplicate_unwindowed_samples_get_their_own_memory() -> None:
    _, _, reference = stream("h264", 8)
    out = decode_targets(VideoFrameDecoder(), "h264", 8, [4, 4, 9, 4])
    assert len({t.data_ptr() for t in out if t is not None}) == 4, "a slot per sample"
    out[0].fill_(0)  # writing one sample leaves the others showing the same frame intact
    for target, tensor in zip([4, 9, 4], out[1:], strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])


def test_single_rgb_frames_are_rows_of_one_tensor_in_request_order(
        caplog: pytest.LogCaptureFixture) -> None:
    """All decoded (a frame shown twice included): TensorRows whose row i is request i, so a
    batching dataset hands out consecutive samples as a view; one unresolved: a plain list."""
    packets, is_keyframe, reference = stream("h264", 8)
    targets = [30, 3, 3, 17]
    out = decode_targets(VideoFrameDecoder(), "h264", 8, targets)
    assert isinstance(out, TensorRows) and out.rows is None
    assert out.tensor.shape == (4, 3, 48, 64)
    for target, row in zip(targets, out.tensor, strict=True):
        np.testing.assert_array_equal(hwc(row), reference[target])
    view = VideoFrameDecoder(window_storage="view").decode(
        packet_batch(packets), [request(i, [t], is_keyframe) for i, t in enumerate(targets)])
    assert isinstance(view, TensorRows) and view.rows is not None
    assert view.tensor.shape[0] == 3 and view.rows[1] == view.rows[2], "one row per frame"
    for target, tensor in zip(targets, view, strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    rows: list[bytes | None] = [None, *packets]  # row 0 holds no frame
    flags = np.concatenate([[True], is_keyframe])
    with logged_failure(caplog, "no decodable frame"):
        partial = VideoFrameDecoder().decode(packet_batch(rows),
                                             [request(0, [13], flags), request(1, [0], flags)])
    assert not isinstance(partial, TensorRows) and partial[1] is None
    np.testing.assert_array_equal(hwc(partial[0]), reference[12])


def test_frames_of_a_call_fill_one_pooled_buffer_reused_once_dropped() -> None:
    _, _, reference = stream("h264", 8)
    decoder = VideoFrameDecoder(decode_threads=2, decode_processes=0)
    targets = [3, 17, 9, 40, 41]
    out = decode_targets(decoder, "h264", 8, targets)
    assert all(t is not None for t in out)
    first = sorted(t.data_ptr() for t in out if t is not None)
    frame_bytes = 3 * 48 * 64
    assert np.diff(first).tolist() == [frame_bytes] * (len(targets) - 1), \
        "one buffer per call, a slot per frame, samples never overlap"
    out[0].fill_(0)  # writing one sample leaves the others intact
    for target, tensor in zip(targets[1:], out[1:], strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    held = decode_targets(decoder, "h264", 8, targets)  # the first buffer is still lent
    assert {t.data_ptr() for t in held if t is not None}.isdisjoint(first)
    del out, tensor
    again = decode_targets(decoder, "h264", 8, targets)
    assert sorted(t.data_ptr() for t in again if t is not None) == first, \
        "a dropped call's buffer is lent again (no fresh pages per block)"
    for target, tensor in zip(targets, again, strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    assert FRAME_POOL.pooled_bytes > 0


def test_view_storage_shares_one_frame_bank() -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    batch = packet_batch(packets, is_windowed=True)
    windows = [[1, 2, 3], [2, 3, 4], [4, 4, 5]]
    out = VideoFrameDecoder(window_storage="view").decode(
        batch, [request(i, w, is_keyframe) for i, w in enumerate(windows)])
    for window, clip in zip(windows, out, strict=True):
        for slot, target in enumerate(window):
            np.testing.assert_array_equal(hwc(clip[slot]), reference[target])
    assert out[0].untyped_storage().data_ptr() == out[1].untyped_storage().data_ptr()


def test_output_rows_map_to_the_latest_non_empty_packet() -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    rows: list[bytes | None] = [*packets[:10], None, None, *packets[10:]]
    flags = np.concatenate([is_keyframe[:10], [False, False], is_keyframe[10:]])
    out = VideoFrameDecoder().decode(packet_batch(rows), [request(0, [11], flags),
                                                          request(1, [12], flags)])
    np.testing.assert_array_equal(hwc(out[0]), reference[9])
    np.testing.assert_array_equal(hwc(out[1]), reference[10])


@pytest.mark.parametrize("codec", codec_params())
def test_yuv420p_output_matches_the_decoder_planes(codec: str) -> None:
    packets, is_keyframe, _ = stream(codec, 8)
    planes = reference_frames(packets, codec, fmt="yuv420p")
    rgb = stream(codec, 8)[2]
    decoder = VideoFrameDecoder(codec=codec, output_format="yuv420p")
    targets = [0, 9, 30]
    out = decoder.decode(packet_batch(packets), [request(i, [t], is_keyframe)
                                                 for i, t in enumerate(targets)])
    for target, frame in zip(targets, out, strict=True):
        assert frame.y.shape == (1, 48, 64) and frame.uv.shape == (2, 24, 32)
        assert (frame.color_space, frame.color_range) == ("bt601", "limited")
        expected = planes[target]  # yuv420p as [H * 3 / 2, W]: Y, then U, then V rows
        np.testing.assert_array_equal(frame.y[0].numpy(), expected[:48])
        np.testing.assert_array_equal(frame.uv[0].numpy().reshape(-1), expected[48:60].reshape(-1))
        np.testing.assert_array_equal(frame.uv[1].numpy().reshape(-1), expected[60:].reshape(-1))
        converted = frame.to_rgb(dtype=torch.uint8)
        assert converted.shape == (3, 48, 64)
        diff = np.abs(hwc(converted).astype(int) - rgb[target].astype(int))
        assert diff.max() <= 3


def test_yuv420p_windows_stack() -> None:
    packets, is_keyframe, _ = stream("h264", 8)
    out = VideoFrameDecoder(output_format="yuv420p").decode(
        packet_batch(packets, is_windowed=True), [request(0, [1, 2, 3], is_keyframe)])
    assert out[0].y.shape == (3, 1, 48, 64) and out[0].uv.shape == (3, 2, 24, 32)


# ------------------------------------------------------------------------ failures and config
def test_corrupt_packet_gives_none_for_its_gop_only_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    broken = list(packets)
    broken[16] = b"\x00\x00\x00\x01\x65" + bytes(40)  # an IDR slice without parameter sets
    targets = [3, 18, 20, 40]
    decoder = VideoFrameDecoder()
    with logged_failure(caplog, "does not start a group of pictures") as record:
        out = decoder.decode(packet_batch(broken), [request(i, [t], is_keyframe)
                                                    for i, t in enumerate(targets)])
    assert len(record) == 1  # once per kind of failure
    assert out[1] is None and out[2] is None
    np.testing.assert_array_equal(hwc(out[0]), reference[3])
    np.testing.assert_array_equal(hwc(out[3]), reference[40])


def test_garbage_packet_inside_a_gop_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    packets, is_keyframe, reference = stream("h264", 8)
    broken = list(packets)
    broken[10] = b"\x00\x00\x01" + bytes(range(256)) * 4
    decoder = VideoFrameDecoder()
    with logged_failure(caplog, ""):
        out = decoder.decode(packet_batch(broken), [request(0, [12], is_keyframe),
                                                    request(1, [30], is_keyframe)])
    np.testing.assert_array_equal(hwc(out[1]), reference[30])


def test_non_keyframe_start_gives_none(caplog: pytest.LogCaptureFixture) -> None:
    packets, _, reference = stream("h264", 8)
    lying = np.zeros(len(packets), dtype=bool)
    lying[0] = lying[3] = True  # row 3 is a P-frame
    decoder = VideoFrameDecoder()
    with logged_failure(caplog, "keyframe"):
        out = decoder.decode(packet_batch(packets), [request(0, [5], lying),
                                                     request(1, [1], lying)])
    assert out[0] is None
    np.testing.assert_array_equal(hwc(out[1]), reference[1])


def test_unknown_codec_fails_when_the_decoder_is_built() -> None:
    with pytest.raises(ConfigError, match=r"no FFmpeg decoder for video codec 'no-such-codec'"):
        VideoFrameDecoder(codec="no-such-codec")


def test_wrong_codec_gives_none_not_an_exception(caplog: pytest.LogCaptureFixture) -> None:
    packets, is_keyframe, _ = stream("h264", 8)
    with logged_failure(caplog, ""):
        out = VideoFrameDecoder(codec="av1").decode(packet_batch(packets),
                                                    [request(0, [1], is_keyframe)])
    assert out == [None]


def test_length_prefixed_h264_is_accepted() -> None:
    packets, is_keyframe, reference = stream("h264", 8)

    def avcc(data: bytes) -> bytes:
        nals = [n for n in data.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01").split(b"\x00\x00\x01")
                if n]
        return b"".join(len(n).to_bytes(4, "big") + n for n in nals)

    out = VideoFrameDecoder().decode(packet_batch([avcc(p) for p in packets]),
                                     [request(0, [11], is_keyframe)])
    np.testing.assert_array_equal(hwc(out[0]), reference[11])


def test_pickling_drops_sessions_and_keeps_options() -> None:
    decoder = VideoFrameDecoder(codec="h265", max_decoder_sessions=3, output_format="yuv420p")
    decode_targets(VideoFrameDecoder(), "h264", 8, [1])
    clone = pickle.loads(pickle.dumps(decoder))
    assert repr(clone) == "VideoFrameDecoder(codec='h265', max_decoder_sessions=3, " \
                          "output_format='yuv420p')"
    h264 = VideoFrameDecoder()
    decode_targets(h264, "h264", 8, [1, 2])
    copied = pickle.loads(pickle.dumps(h264))
    assert (copied.session_hits, copied.session_misses) == (0, 0)
    decode_targets(copied, "h264", 8, [3])
    assert copied.session_misses == 1


@pytest.mark.parametrize("kwargs", [{"codec": ""}, {"max_decoder_sessions": -1},
                                    {"thread_count": -2}, {"window_storage": "share"},
                                    {"output_format": "bgr"}])
def test_bad_options_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        VideoFrameDecoder(**kwargs)


def test_repr_lists_non_default_options() -> None:
    assert repr(VideoFrameDecoder()) == "VideoFrameDecoder()"
    assert repr(VideoFrameDecoder(window_storage="view")) == \
        "VideoFrameDecoder(window_storage='view')"


def test_keyframe_path_and_required_columns() -> None:
    decoder = VideoFrameDecoder()
    assert decoder.prior_keyframe_path("/cam:VideoStream:sample") == "/cam:VideoStream:is_keyframe"
    assert decoder.prior_keyframe_path("/cam:VideoFrameReference:timestamp") == \
        "/cam:VideoFrameReference:is_keyframe"
    assert decoder.prior_keyframe_path("nocolon") is None
    assert decoder.required_columns("/cam:VideoFrameReference:timestamp") == (
        "/cam:VideoFrameReference:is_keyframe", "/cam:AssetVideo:asset")
    decoder.check_columns("/cam:VideoStream:sample",
                          ["/cam:VideoStream:sample", "/cam:VideoStream:is_keyframe"])
    with pytest.raises(ConfigError, match="require an is_keyframe column; missing 'image'"):
        decoder.check_columns("/cam:VideoStream:sample", ["/cam:VideoStream:sample"],
                              key="image")


def test_a_column_of_another_type_is_a_config_error() -> None:
    import pyarrow as pa

    batch = FieldBatch(column=pa.array([[1.0], [2.0]], type=pa.list_(pa.float32())))
    with pytest.raises(ConfigError, match="VideoStream:sample"):
        VideoFrameDecoder().decode(batch, [request(0, [1], np.array([True, False]))])


def test_empty_request_list() -> None:
    assert VideoFrameDecoder().decode(packet_batch([b"x"]), []) == []


def _decode_in_child(decoder: VideoFrameDecoder, queue: Any) -> None:
    out = decode_targets(decoder, "h264", 8, [6])
    queue.put((decoder.session_hits, decoder.session_misses, hwc(out[0]).copy()))


def test_a_forked_process_starts_with_its_own_sessions() -> None:
    import multiprocessing

    _, _, reference = stream("h264", 8)
    decoder = VideoFrameDecoder(decode_threads=2)
    decode_targets(decoder, "h264", 8, [1, 2, 3, 20, 40])  # sessions and a thread pool exist
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_decode_in_child, args=(decoder, queue))
    child.start()
    hits, misses, frame = queue.get(timeout=60)
    child.join(timeout=60)
    assert (hits, misses) == (0, 1)  # the parent's session for GOP 0 was not reused
    np.testing.assert_array_equal(frame, reference[6])


def test_a_full_session_cache_hands_its_decoder_to_the_next_pass_over_the_stream(
        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = video_runs.open_decoder

    def counting_open(codec: str, **kwargs: Any) -> Any:
        opened.append(codec)
        return real_open(codec, **kwargs)

    monkeypatch.setattr(video_runs, "open_decoder", counting_open)
    _, _, reference = stream("h264", 8)
    decoder = VideoFrameDecoder(codec="h264", max_decoder_sessions=2, decode_threads=1)
    targets = [50, 10, 40, 20, 30, 5, 45, 15]  # each call a pass from another keyframe
    for target in targets:
        (tensor,) = decode_targets(decoder, "h264", 8, [target])
        assert tensor is not None
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    assert decoder.session_misses == len(targets)
    assert len(opened) == 2, "once the cache is full, each new pass takes over a flushed decoder"
