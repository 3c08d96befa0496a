"""ROS messages as rayform columns: the typed mappings and topic writing the MCAP and rosbag
importers share, so the same messages register equal whichever container held them."""

from __future__ import annotations

from rayform.importers.ros._topics import HEADER_TIME, LOG_TIME, PUBLISH_TIME, entity_for_topic

__all__ = ["HEADER_TIME", "LOG_TIME", "PUBLISH_TIME", "entity_for_topic"]
