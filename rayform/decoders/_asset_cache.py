"""Finding a segment's video asset for a field, with a small cache of indexed, mapped files."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.media._video_asset import AssetPackets, load_asset_packets
from rayform.recording._columns import VIDEO_ASSET, column_name, entity_of


class AssetCache:
    """Finds a segment's video file for a field and keeps recently used files indexed.

    At most ``capacity`` files stay indexed and memory-mapped (a file is unmapped once no run
    uses it any more). Thread-safe.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._packets: OrderedDict[str, AssetPackets] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, segment: Any, field_path: str | None) -> tuple[str, AssetPackets]:
        """``(content hash, packet table)`` of the video asset of ``field_path``'s entity.

        Args:
            segment: the segment's :class:`~rayform.catalog.SegmentData`.
            field_path: the ``...:VideoFrameReference:timestamp`` column, or ``None`` to use the
                segment's only video asset.

        Raises:
            ConfigError: no (or, without ``field_path``, more than one) asset column.
            FormatError, OSError, LookupError: the file is missing or unreadable.
        """
        column = (column_name(entity_of(field_path), VIDEO_ASSET) if field_path is not None
                  else _only_asset_column(segment))
        try:
            rows = segment.column(column, "")
        except ColumnNotFoundError as err:
            raise ConfigError(
                f"segment {segment.segment_id!r} has no {column!r}: a video asset field needs "
                "the file logged with RecordingWriter.log_video_asset"
            ) from err
        values = rows.values.flatten()
        if len(values) == 0:
            raise ConfigError(f"segment {segment.segment_id!r}: {column!r} is empty")
        digest = str(values[len(values) - 1].as_py())
        path = str(segment.asset_path(digest))
        with self._lock:
            packets = self._packets.pop(path, None)
        if packets is None:
            packets = load_asset_packets(path)
        with self._lock:
            self._packets[path] = packets
            while len(self._packets) > self._capacity:
                self._packets.popitem(last=False)
        return digest, packets


def _only_asset_column(segment: Any) -> str:
    candidates = [column_name(entity, VIDEO_ASSET) for entity in segment.record.entities
                  if segment.has_column(column_name(entity, VIDEO_ASSET))]
    if len(candidates) != 1:
        raise ConfigError(
            f"segment {segment.segment_id!r} has {len(candidates)} video assets "
            f"({candidates}); the dataloader must pass FieldBatch.path to pick one"
        )
    return candidates[0]
