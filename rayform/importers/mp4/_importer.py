"""Register a plain MP4 (or MOV) file as one segment holding the file as a video asset."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rayform.importers._base import Importer
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers._time_grid import GRID_SOURCE, TIME_GRID_PROPERTY
from rayform.importers.mp4._probe import probe_video
from rayform.recording._writer import RecordingWriter

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov")
VIDEO_ENTITY = "/video"
FRAME_INDEX_TIMELINE = "frame_index"
VIDEO_TIME_TIMELINE = "video_time"
# ISO BMFF files start with a box whose type is one of these (bytes 4..8).
_ISO_BOX_TYPES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")


class Mp4Importer(Importer):
    """A video file becomes segment ``<file stem>`` with entity ``/video``.

    The file is kept as-is (no re-encoding) as a video asset; each frame is one row on the
    timelines ``frame_index`` (sequence, presentation order) and ``video_time`` (duration: the
    frame's pts minus the first frame's). Codec, size, rate and the source file name are
    segment properties. Audio streams are ignored.
    """

    name = "mp4"

    def sniff(self, path: Path) -> bool:
        if not path.is_file():
            return False
        if path.suffix.lower() in VIDEO_SUFFIXES:
            return True
        try:
            with path.open("rb") as fh:
                head = fh.read(8)
        except OSError:
            return False
        return len(head) == 8 and head[4:8] in _ISO_BOX_TYPES

    def convert(self, path: Path, staging: Path) -> list[Path]:
        probe = probe_video(path)
        segment_id = segment_id_from_name(path.stem)
        pts_ns = probe.pts_ns
        out = staging / f"{segment_id}.rfr"
        with RecordingWriter(out, recording_id=segment_id, application_id="mp4") as rec:
            rec.set_properties(
                source_file=path.name,
                codec=probe.codec,
                width=probe.width,
                height=probe.height,
                rate_hz=probe.rate_hz,
                num_frames=probe.num_frames,
                has_audio=probe.has_audio,
            )
            rec.set_property(TIME_GRID_PROPERTY, GRID_SOURCE)  # the container's pts
            rec.log_video_asset(
                VIDEO_ENTITY,
                path,
                timelines={
                    FRAME_INDEX_TIMELINE: np.arange(probe.num_frames, dtype=np.int64),
                    VIDEO_TIME_TIMELINE: (pts_ns - pts_ns[0]).astype("timedelta64[ns]"),
                },
                frame_timestamps_ns=pts_ns,
                is_keyframe=probe.is_keyframe,
            )
        return [out]
