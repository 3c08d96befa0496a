"""Video defect fixtures: real Unitree AV1 files remuxed with a frame dropped or duplicated
(packets copied, nothing re-encoded), and one re-encoded with a frozen stretch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

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
