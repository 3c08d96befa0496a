"""Packing episode videos into LeRobot v3.0 video files, as LeRobot writes them.

Each episode's video is first written on its own (remuxed or encoded, starting at a keyframe).
The episodes of one camera are then joined in episode order into
``videos/{key}/chunk-XXX/file-XXX.mp4``: a file takes the next episode unless that would take it
past the size limit (``video_files_size_in_mb``, 200 by default) or the episode's stream has other
codec parameters (codec, size, pixel format, time base, codec extradata), which one MP4 track
cannot change. Joining copies packets, no re-encoding: each episode's timestamps are shifted to
start where the previous episode ended, and that start is its ``from_timestamp`` in the file.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from rayform._optional import require
from rayform.errors import ConfigError
from rayform.importers.lerobot._layout import DEFAULT_CHUNKS_SIZE, V30_VIDEO_PATH

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSizeLimits:
    """How large the files of a LeRobot v3.0 export may grow (LeRobot's own defaults).

    Attributes:
        data_mb: ``data_files_size_in_mb``: episodes share a Parquet data file up to this size.
        video_mb: ``video_files_size_in_mb``: episodes share an MP4 file (per camera) up to this
            size. An episode larger than the limit gets a file of its own.
    """

    data_mb: float = 100.0
    video_mb: float = 200.0

    def __post_init__(self) -> None:
        for name in ("data_mb", "video_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"FileSizeLimits.{name} must be a positive number of MiB, "
                                  f"got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeVideo:
    """One episode's own video file, before packing."""

    index: int
    path: Path
    num_frames: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PackedVideo:
    """Where an episode's frames ended up: its file and its time span inside it (seconds)."""

    chunk_index: int
    file_index: int
    from_timestamp: float
    to_timestamp: float


def pack_videos(root: Path, key: str, episodes: list[EpisodeVideo], *, fps: float,
                limit_bytes: int) -> dict[int, PackedVideo]:
    """Join the episode videos of camera ``key`` into v3.0 files under ``root``.

    Returns:
        Per episode index, where its frames are.
    """
    groups: list[list[EpisodeVideo]] = []
    size = 0
    signature: tuple[Any, ...] | None = None
    for episode in sorted(episodes, key=lambda e: e.index):
        part_size = episode.path.stat().st_size
        part_signature = _stream_signature(episode.path)
        if not groups or size + part_size > limit_bytes or part_signature != signature:
            groups.append([])
            size = 0
        groups[-1].append(episode)
        size += part_size
        signature = part_signature
    placed: dict[int, PackedVideo] = {}
    for number, group in enumerate(groups):
        chunk, file = divmod(number, DEFAULT_CHUNKS_SIZE)
        dest = root / V30_VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file)
        dest.parent.mkdir(parents=True, exist_ok=True)
        starts = _concatenate([e.path for e in group], dest, fps=fps)
        for episode, start_s in zip(group, starts, strict=True):
            placed[episode.index] = PackedVideo(chunk_index=chunk, file_index=file,
                                                from_timestamp=start_s,
                                                to_timestamp=start_s + episode.num_frames / fps)
    return placed


def _stream_signature(path: Path) -> tuple[Any, ...]:
    av: Any = require("av", extra="video", feature="Exporting video")
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        return (ctx.name, ctx.width, ctx.height, None if ctx.format is None else ctx.format.name,
                Fraction(stream.time_base), bytes(ctx.extradata or b""))


def _concatenate(parts: list[Path], dest: Path, *, fps: float) -> list[float]:
    """Copy the packets of ``parts`` one after the other into ``dest``; each part's start (s)."""
    av: Any = require("av", extra="video", feature="Exporting video")
    starts: list[float] = []
    end = 0
    last_dts: int | None = None
    with av.open(str(dest), "w", format="mp4") as out:
        target = None
        for part in parts:
            with av.open(str(part)) as inp:
                stream = inp.streams.video[0]
                if target is None:
                    target = out.add_stream_from_template(stream, opaque=True)
                time_base = Fraction(stream.time_base)
                frame_ticks = max(1, round(1 / (fps * time_base)))
                packets = (p for p in inp.demux(stream) if p.pts is not None and p.size)
                first = next(packets, None)
                if first is None:
                    raise ConfigError(f"{part}: an exported episode video has no frame")
                offset = end
                if last_dts is not None and first.dts is not None:
                    # Decode times must keep increasing across the join (B-frames start below 0).
                    offset = max(offset, last_dts + 1 - first.dts)
                starts.append(float(offset * time_base))
                for packet in itertools.chain((first,), packets):
                    packet.pts += offset
                    if packet.dts is not None:
                        packet.dts += offset
                        last_dts = packet.dts
                    end = max(end, packet.pts + frame_ticks)
                    packet.stream = target
                    out.mux(packet)
    return starts
