"""One episode's video for one camera: remuxed from an MP4 asset when possible, else encoded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform._optional import require
from rayform.catalog._segment_data import SegmentData
from rayform.errors import ConfigError
from rayform.exporters._features import ExportFeature
from rayform.exporters._lerobot_stats import Stats, image_stats
from rayform.exporters._video_encode import VideoEncoder, VideoEncoding, remux_frames
from rayform.exporters._video_frames import (
    asset_frames,
    image_frames,
    stream_frames,
)
from rayform.importers.mp4._probe import VideoProbe, probe_video
from rayform.importers.rrd._arrow_types import VIDEO_CODEC_NAMES
from rayform.recording._columns import (
    VIDEO_ASSET,
    VIDEO_CODEC,
    VIDEO_IS_KEYFRAME,
    column_name,
)

STATS_FRAMES = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class WrittenVideo:
    """An exported episode video."""

    path: Path
    method: Literal["remux", "encode"]
    probe: VideoProbe
    stats: Stats


class ProbeCache:
    """Video probes per file, shared by the episodes of one export."""

    def __init__(self) -> None:
        self._probes: dict[Path, VideoProbe] = {}

    def __call__(self, path: Path) -> VideoProbe:
        found = self._probes.get(path)
        if found is None:
            found = self._probes[path] = probe_video(path)
        return found


def write_episode_video(seg: SegmentData, feature: ExportFeature, timeline: str,
                        positions: npt.NDArray[np.int64], dest: Path, *, fps: float,
                        encoding: VideoEncoding, probes: ProbeCache, tolerance_ns: int
                        ) -> WrittenVideo:
    """Write the frames at ``positions`` (rows of the feature's column) to ``dest``.

    Raises:
        ConfigError: the video has no frame for some grid point.
    """
    if len(positions) == 0 or int(positions.min()) < 0:
        raise ConfigError(f"segment {seg.segment_id!r}: {feature.key!r} has no frame at the start "
                          "of the export grid")
    dest.parent.mkdir(parents=True, exist_ok=True)
    rows = seg.column(feature.column, timeline)
    if feature.kind == "video_asset":
        pts = _flat_int64(rows.values.take(pa.array(positions)))
        asset = _asset_path(seg, feature, timeline)
        if encoding.remux:
            remuxed = _remux_asset(asset, pts, dest, fps=fps, probes=probes,
                                   tolerance_ns=tolerance_ns)
            if remuxed is not None:
                return WrittenVideo(path=dest, method="remux", probe=remuxed,
                                    stats=_video_stats(dest, remuxed))
        _encode(asset_frames(asset, pts), dest, fps=fps, encoding=encoding)
    elif feature.kind == "video_stream":
        flags_rows = seg.column(column_name(feature.entity, VIDEO_IS_KEYFRAME), timeline)
        flags = _flat_bool(flags_rows.values)
        samples = _Samples(rows.values)
        codec = _codec_name(seg, feature, timeline)
        _encode(stream_frames(samples, flags, codec, positions), dest, fps=fps, encoding=encoding)
    else:
        _encode(image_frames(_Samples(rows.values), positions), dest, fps=fps, encoding=encoding)
    probe = probe_video(dest)
    return WrittenVideo(path=dest, method="encode", probe=probe, stats=_video_stats(dest, probe))


class _Samples:
    """Row ``i`` of a ``List<Binary>`` column as bytes (one blob per row), converted lazily."""

    def __init__(self, values: pa.Array) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, row: int) -> bytes:
        cell = self._values[row].values
        return bytes(cell[0].as_py()) if len(cell) else b""


def _flat_int64(values: pa.Array) -> npt.NDArray[np.int64]:
    return np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)


def _flat_bool(values: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=bool)


def _asset_path(seg: SegmentData, feature: ExportFeature, timeline: str) -> Path:
    digest = seg.column(column_name(feature.entity, VIDEO_ASSET), timeline).values[0][0].as_py()
    return seg.asset_path(str(digest))


def _codec_name(seg: SegmentData, feature: ExportFeature, timeline: str) -> str:
    value = seg.column(column_name(feature.entity, VIDEO_CODEC), timeline).values[0][0].as_py()
    if isinstance(value, int):
        return VIDEO_CODEC_NAMES.get(value, "h264")
    return str(value)


def _remux_asset(asset: Path, pts_ns: npt.NDArray[np.int64], dest: Path, *, fps: float,
                 probes: ProbeCache, tolerance_ns: int) -> VideoProbe | None:
    """Remux when the grid takes consecutive frames, at the export rate, from a keyframe on.

    Returns:
        The written file's frame index, or ``None`` (nothing written) when it cannot remux.
    """
    probe = probes(asset)
    idx = np.searchsorted(probe.pts_ns, pts_ns)
    if int(idx.max()) >= probe.num_frames or not np.array_equal(probe.pts_ns[idx], pts_ns):
        return None
    if len(idx) > 1 and not bool(np.all(np.diff(idx) == 1)):
        return None
    if not bool(probe.is_keyframe[idx[0]]):
        return None
    if probe.has_b_frames and int(idx[-1]) != probe.num_frames - 1:
        return None  # B-frames at the cut may reference frames after it
    expected = np.rint(np.arange(len(idx)) * 1e9 / fps).astype(np.int64)
    if not bool(np.all(np.abs((pts_ns - pts_ns[0]) - expected) <= tolerance_ns)):
        return None
    first, last = probe.to_ticks(pts_ns[[0, -1]])
    remux_frames(asset, dest, first_pts=int(first), last_pts=int(last))
    return dataclasses.replace(probe, pts_ns=pts_ns - pts_ns[0], is_keyframe=probe.is_keyframe[idx],
                               has_audio=False)


def _encode(frames: Any, dest: Path, *, fps: float, encoding: VideoEncoding) -> None:
    encoder: VideoEncoder | None = None
    for frame in frames:
        if encoder is None:
            encoder = VideoEncoder(dest, fps=fps, width=frame.width, height=frame.height,
                                   encoding=encoding)
        encoder.add(frame)
    if encoder is None:
        raise ConfigError(f"{dest}: no frame to encode")
    encoder.close()


def _video_stats(path: Path, probe: VideoProbe) -> Stats:
    """Per-channel stats of up to ``STATS_FRAMES`` keyframes spread over the video: only those
    keyframe packets are decoded (each decodes on its own), a fraction of a full decode."""
    av: Any = require("av", extra="video", feature="Exporting video")
    keys = int(np.count_nonzero(probe.is_keyframe))
    wanted = set(np.linspace(0, keys - 1, min(STATS_FRAMES, keys)).round().astype(int).tolist())
    frames: list[npt.NDArray[np.uint8]] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        seen = 0
        for packet in container.demux(stream):
            if packet.size == 0 or not packet.is_keyframe:
                continue
            if seen in wanted:
                frames.extend(_small_rgb(f) for f in ctx.decode(packet))
            seen += 1
            if seen > max(wanted):
                break
        frames.extend(_small_rgb(f) for f in ctx.decode(None))
    return image_stats(frames)


def _small_rgb(frame: Any, *, max_side: int = 160) -> npt.NDArray[np.uint8]:
    """RGB pixels of a frame scaled down (in the same conversion) to at most ``max_side``."""
    step = max(1, -(-max(frame.width, frame.height) // max_side))
    return np.asarray(frame.to_ndarray(format="rgb24", width=max(2, frame.width // step),
                                       height=max(2, frame.height // step)), dtype=np.uint8)
