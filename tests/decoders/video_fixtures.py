"""Synthetic video for the video decoder tests: frames, encoded streams, reference decodes.

The reference for every pixel comparison is a plain sequential PyAV decode of the same stream
(every packet fed in order to one fresh decoder, ``to_ndarray(format="rgb24")``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.decoders import DecodeRequest, FieldBatch
from rayform.media._video_asset import probe_video_asset
from rayform.media._video_encode import available_video_codecs, encode_video_packets, write_video_mp4

REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"
UNITREE_VIDEOS = REALDATA / "unitree-g1-lerobot-v21" / "videos" / "chunk-000" / \
    "observation.images.cam_high"
INTEL_VIDEOS = REALDATA / "intel-sample-videos"

DECODER_NAMES = {"h264": "h264", "h265": "hevc", "av1": "libdav1d"}


def codec_params() -> list[Any]:
    """``h264``, ``h265``, ``av1`` as pytest params, skipped where this PyAV cannot encode them."""
    have = available_video_codecs()
    return [pytest.param(c, marks=pytest.mark.skipif(
        c not in have, reason=f"this PyAV build has no {c} encoder")) for c in ("h264", "h265", "av1")]


@contextmanager
def logged_failure(caplog: pytest.LogCaptureFixture, match: str
                   ) -> Iterator[list[logging.LogRecord]]:
    """Expect the block to log a decode failure matching ``match`` on the video decoder's logger
    (a log record, not a Python warning: failed samples are just ``None``, as Rerun's)."""
    records: list[logging.LogRecord] = []
    with caplog.at_level(logging.WARNING, logger="rayform.decoders.video"):
        start = len(caplog.records)
        yield records
        records.extend(r for r in caplog.records[start:] if r.name == "rayform.decoders.video")
    assert any(re.search(match, r.getMessage()) for r in records), [r.getMessage()
                                                                     for r in records]


def realdata_file(path: Path) -> Path:
    """``path`` if the shared real data is present, else skip the test."""
    if not path.is_file():
        pytest.skip(f"real data not available: {path}")
    return path


def synthetic_frames(num_frames: int, *, height: int = 48, width: int = 64,
                     seed: int = 0) -> npt.NDArray[np.uint8]:
    """``uint8 [N, H, W, 3]``: moving colour waves plus noise, so every frame differs."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    frames = np.empty((num_frames, height, width, 3), dtype=np.uint8)
    for i in range(num_frames):
        rgb = np.stack([128 + 100 * np.sin((xx + 2 * i) / 9.0),
                        128 + 100 * np.cos((yy - i + seed) / 7.0),
                        128 + 80 * np.sin((xx + yy + 3 * i) / 11.0)], axis=-1)
        rgb += rng.normal(0.0, 4.0, rgb.shape)
        frames[i] = np.clip(rgb, 0, 255).astype(np.uint8)
    return frames


def reference_frames(packets: Sequence[bytes], codec: str, *,
                     fmt: str = "rgb24") -> list[npt.NDArray[np.uint8]]:
    """Sequential PyAV decode of a packet stream: one array per frame, in order."""
    ctx = av.CodecContext.create(DECODER_NAMES[codec], "r")
    frames = []
    for data in packets:
        frames.extend(ctx.decode(av.Packet(data)))
    frames.extend(ctx.decode(None))
    return [f.to_ndarray(format=fmt) for f in frames]


def reference_file_frames(path: Path) -> list[npt.NDArray[np.uint8]]:
    """Sequential PyAV container decode of a video file's first video stream, by pts."""
    with av.open(str(path)) as container:
        decoded = [(f.pts, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    decoded.sort(key=lambda item: item[0])
    return [array for _, array in decoded]


def packet_column(packets: Sequence[bytes | None]) -> pa.Array:
    """``List<Binary>`` with one packet per row (``None`` gives an empty row)."""
    rows = [[] if p is None else [p] for p in packets]
    return pa.array(rows, type=pa.list_(pa.binary()))


def packet_batch(packets: Sequence[bytes | None], *, is_windowed: bool = False) -> FieldBatch:
    return FieldBatch(column=packet_column(packets), is_windowed=is_windowed)


def request(position: int, outputs: Sequence[int], is_keyframe: npt.NDArray[np.bool_], *,
            segment_id: str = "seg", row_offset: int = 0, starts_at_keyframe: bool = True,
            ) -> DecodeRequest:
    """The request the pipeline would build for stream rows ``outputs`` (from their keyframe).

    ``row_offset`` is where the segment's rows start in the batch.
    """
    earliest = min(outputs)
    keyframes = np.flatnonzero(is_keyframe[:earliest + 1])
    start = int(keyframes[-1])
    return DecodeRequest(
        sample_position=position,
        segment_id=segment_id,
        index_value=int(max(outputs)),
        decode_row_indices=tuple(range(start + row_offset, max(outputs) + row_offset + 1)),
        output_row_indices=tuple(o + row_offset for o in outputs),
        starts_at_keyframe=starts_at_keyframe,
    )


def hwc(tensor: Any) -> npt.NDArray[np.uint8]:
    """A decoded ``[3, H, W]`` tensor back to ``[H, W, 3]`` numpy for comparison."""
    array: npt.NDArray[np.uint8] = tensor.permute(1, 2, 0).numpy()
    return array


# ----------------------------------------------------------------------- recordings and datasets
VIDEO_SAMPLE = "/cam:VideoStream:sample"
VIDEO_ASSET_TIMESTAMP = "/cam:VideoFrameReference:timestamp"
FRAME_NUMBER = "/frame_number:Scalars:scalars"
EPOCH_NS = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class VideoEpisode:
    """One synthetic episode: its id, the decoded reference frames and their capture times."""

    segment_id: str
    reference: list[npt.NDArray[np.uint8]]
    time_ns: npt.NDArray[np.int64]


def write_video_episode(path: Path, segment_id: str, *, num_frames: int, codec: str = "h264",
                        gop: int = 8, capture_hz: float = 30.0, seed: int = 0,
                        as_asset: bool = False) -> VideoEpisode:
    """An episode with an H.264 (or other) camera and the frame number as a scalar.

    The camera and ``/frame_number`` share rows on the ``frame_index`` (sequence) and
    ``real_time`` (timestamp, frames ``1 / capture_hz`` apart) timelines, so the number served
    with a sample names the frame the camera must serve.
    """
    frames = synthetic_frames(num_frames, seed=seed)
    time_ns = EPOCH_NS + np.round(np.arange(num_frames) * 1e9 / capture_hz).astype(np.int64)
    timelines = {"frame_index": np.arange(num_frames),
                 "real_time": time_ns.astype("datetime64[ns]")}
    with RecordingWriter(path, recording_id=segment_id) as rec:
        rec.log_scalars("/frame_number", timelines=timelines,
                        values=np.arange(num_frames, dtype=np.int64))
        if as_asset:
            video = write_video_mp4(path.with_suffix(".mp4"), frames, codec=codec, gop=gop,
                                    fps=round(capture_hz))
            info = probe_video_asset(video)
            rec.log_video_asset("/cam", video, timelines=timelines,
                                frame_timestamps_ns=info.frame_timestamps_ns,
                                is_keyframe=info.is_keyframe)
            reference = reference_file_frames(video)
        else:
            packets, is_keyframe = encode_video_packets(frames, codec=codec, gop=gop,
                                                        fps=round(capture_hz))
            rec.log_video_stream("/cam", timelines=timelines, samples=packets,
                                 is_keyframe=is_keyframe, codec=codec)
            reference = reference_frames(packets, codec)
    return VideoEpisode(segment_id, reference, time_ns)


def video_dataset(root: Path, frames_per_episode: Sequence[int], **kwargs: Any,
                  ) -> tuple[DatasetEntry, dict[str, VideoEpisode]]:
    """A catalog under ``root`` with one dataset of video episodes ``ep0``, ``ep1`` …"""
    catalog = Catalog.create(root / "catalog")
    dataset = catalog.create_dataset("video")
    episodes = {}
    paths = []
    for i, n in enumerate(frames_per_episode):
        path = root / f"ep{i}.rfr"
        episodes[f"ep{i}"] = write_video_episode(path, f"ep{i}", num_frames=n, seed=i, **kwargs)
        paths.append(path)
    dataset.register(paths).wait()
    return dataset, episodes
