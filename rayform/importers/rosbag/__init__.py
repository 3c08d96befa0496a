"""ROS 1 ``.bag`` files and ROS 2 sqlite3 bags (``.db3``, split folders): registered with ``rosbags``."""

from __future__ import annotations

from rayform.importers.rosbag._importer import RosbagImporter

__all__ = ["RosbagImporter"]
