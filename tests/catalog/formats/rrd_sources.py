"""Synthetic ``.rrd`` files written with rerun-sdk's own logging API."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rayform.media._video_encode import encode_video_packets

START_NS = 1_700_000_000_000_000_000


@dataclass
class RrdTruth:
    recording_id: str
    joints: npt.NDArray[np.float64]
    packets: list[bytes]
    is_keyframe: npt.NDArray[np.bool_]
    texts: list[str]
    jpeg: bytes


def write_rrd(path: Path, recording_id: str, *, num_frames: int = 12, seed: int = 0) -> RrdTruth:
    """One recording: scalars, a text document, an H.264 VideoStream, an encoded image, a
    Transform3D, a static entity and two properties, on a sequence and a timestamp timeline."""
    import rerun as rr
    from format_sources import synthetic_frames

    rng = np.random.default_rng(seed)
    joints = rng.normal(size=(num_frames, 4))
    packets, flags = encode_video_packets(synthetic_frames(num_frames, seed=seed), codec="h264",
                                          gop=4, fps=10)
    texts = [f"step {i}" for i in range(num_frames)]
    jpeg = b"\xff\xd8\xff\xe0fake-jpeg-bytes\xff\xd9"
    rec = rr.RecordingStream("rayform-tests", recording_id=recording_id)
    rec.save(path)
    rec.send_recording_name(f"name of {recording_id}")
    rec.send_property("task", rr.AnyValues(text="stack blocks"))
    rec.send_property("success", rr.AnyValues(value=True))
    frames = np.arange(num_frames)
    times = [rr.TimeColumn("frame", sequence=frames),
             rr.TimeColumn("sim_time", timestamp=(START_NS + frames * 100_000_000)
                           .astype("datetime64[ns]"))]
    rec.send_columns("/robot/joints", indexes=times, columns=rr.Scalars.columns(scalars=joints))
    rec.send_columns("/notes", indexes=times, columns=rr.TextDocument.columns(text=texts))
    rec.log("/cam", rr.VideoStream(codec=rr.VideoCodec.H264), static=True)
    rec.send_columns("/cam", indexes=times, columns=rr.VideoStream.columns(sample=packets))
    rec.set_time("frame", sequence=3)
    rec.log("/snapshot", rr.EncodedImage(contents=jpeg, media_type="image/jpeg"))
    rec.log("/world/base", rr.Transform3D(translation=[1.0, 2.0, 3.0], parent_frame="world",
                                          child_frame="base"))
    rec.log("/config", rr.TextDocument("static config"), static=True)
    rec.flush()
    rec.disconnect()
    return RrdTruth(recording_id=recording_id, joints=joints, packets=packets,
                    is_keyframe=flags, texts=texts, jpeg=jpeg)


def merge_rrd(paths: list[Path], out: Path) -> bool:
    """Merge recordings into one file with the ``rerun`` CLI of rerun-sdk (False if absent)."""
    exe = shutil.which("rerun") or str(Path(sys.executable).with_name("rerun"))
    if not Path(exe).exists():
        return False
    subprocess.run([exe, "rrd", "merge", *map(str, paths), "-o", str(out)], check=True,
                   capture_output=True)
    return True
