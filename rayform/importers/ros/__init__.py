"""ROS messages as rayform columns, shared by the MCAP and rosbag importers (same messages, same columns)."""

from __future__ import annotations

from rayform.importers.ros._topics import HEADER_TIME, LOG_TIME, PUBLISH_TIME, entity_for_topic

__all__ = ["HEADER_TIME", "LOG_TIME", "PUBLISH_TIME", "entity_for_topic"]
