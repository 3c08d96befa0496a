"""LeRobot dataset folders (v2.0, v2.1, v3.0), read without the ``lerobot`` package."""

from __future__ import annotations

from rayform.importers.lerobot._importer import LeRobotImporter
from rayform.importers.lerobot._layout import entity_for_feature, feature_for_entity

__all__ = ["LeRobotImporter", "entity_for_feature", "feature_for_entity"]
