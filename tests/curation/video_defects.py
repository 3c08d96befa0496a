"""Video defect fixtures: real Unitree AV1 files remuxed with a frame dropped or duplicated
(packets copied, nothing re-encoded), and one re-encoded with a frozen stretch.

:func:`build_video_dataset`: six copies of real episodes 29 and 30 with all their rows, episode
2 with a dropped frame, 4 with a duplicated one, 5 frozen from frame 100 to 129; all but the
first two get one joint nudged by a different few thousandths (far under any check's
threshold) so that they are not near-duplicates of each other (``episode.duplicate``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
from defects import STATE, Defect, build_dataset

from rayform.media import write_video_mp4
from rayform.media._video_codec import require_av


def remux(source: Path, target: Path, *, drop: int | None = None,
          duplicate: int | None = None) -> None:
    """Copy ``source``'s video packets to ``target``, dropping packet ``drop`` or repeating
    packet ``duplicate`` (later packets move one frame later)."""
    av = require_av()
    with av.open(str(source)) as inp, av.open(str(target), "w") as out:
        ist = inp.streams.video[0]
        ost = out.add_stream_from_template(ist, opaque=True)
        step = None
        number = 0
        for packet in inp.demux(ist):
            if packet.size == 0:
                continue
            if step is None and packet.duration:
                step = int(packet.duration)
            shift = step if duplicate is not None and number > duplicate and step else 0
            copies: list[Any] = [packet]
            if number == duplicate:
                twin = av.Packet(bytes(packet))
                twin.pts, twin.dts = packet.pts + (step or 0), packet.dts + (step or 0)
                twin.time_base, twin.duration = packet.time_base, packet.duration
                copies.append(twin)
            if number != drop:
                for item in copies:
                    if item is packet and shift:
                        item.pts, item.dts = packet.pts + shift, packet.dts + shift
                    item.stream = ost
                    out.mux(item)
            number += 1


def frozen_copy(source: Path, target: Path, *, start: int, stop: int) -> None:
    """Re-encode ``source`` (H.264, quarter size) with frames ``start..stop-1`` all showing
    frame ``start`` (a frozen camera)."""
    av = require_av()
    frames = []
    with av.open(str(source)) as inp:
        for frame in inp.decode(inp.streams.video[0]):
            frames.append(frame.to_ndarray(format="rgb24")[::4, ::4].copy())
    frames[start:stop] = [frames[start]] * (stop - start)
    write_video_mp4(target, np.stack(frames), codec="h264", gop=2, fps=30, crf=0)  # lossless


def _nudge(t: dict[str, np.ndarray], by: float) -> dict[str, np.ndarray]:
    t[STATE][:, 10] += np.float32(by)  # 0.6 % of the joint's spread per step of ``by``
    return t


NUDGES = tuple(Defect(i, "none", None, None, None, functools.partial(_nudge, by=0.005 * i))
               for i in range(2, 6))


def build_video_dataset(root: Path) -> Path:
    """Write the six-episode LeRobot folder with the video defects under ``root``."""
    videos = {2: functools.partial(remux, drop=101), 4: functools.partial(remux, duplicate=101),
              5: functools.partial(frozen_copy, start=100, stop=130)}
    return build_dataset(root, defects=NUDGES, trims=(0, 0, 0), videos=videos)  # type: ignore[arg-type]
