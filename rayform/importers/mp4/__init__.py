"""Plain video files (MP4/MOV): registered as one segment each, the file kept as a video asset."""

from __future__ import annotations

from rayform.importers.mp4._importer import Mp4Importer
from rayform.importers.mp4._probe import VideoProbe, probe_video

__all__ = ["Mp4Importer", "VideoProbe", "probe_video"]
