"""Exporters: a dataset (or view, or slice) to LeRobot v3.0; a segment to a Rerun ``.rrd`` file."""

from __future__ import annotations

from rayform.exporters._video_encode import VideoEncoding
from rayform.exporters.lerobot import FileSizeLimits, LeRobotExport, export_lerobot
from rayform.exporters.rrd import export_rrd

__all__ = ["FileSizeLimits", "LeRobotExport", "VideoEncoding", "export_lerobot", "export_rrd"]
