"""ROS 2 MCAP files and rosbag2 folders: registered with ``mcap`` + ``mcap-ros2-support``."""

from __future__ import annotations

from rayform.importers.mcap._importer import McapImporter
from rayform.importers.ros import HEADER_TIME, LOG_TIME, PUBLISH_TIME, entity_for_topic

__all__ = ["HEADER_TIME", "LOG_TIME", "PUBLISH_TIME", "McapImporter", "entity_for_topic"]
