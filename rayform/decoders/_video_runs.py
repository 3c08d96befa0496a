"""Decoding runs: feed one run's packets to a decoder (new or resumed) and capture its frames.

A run (see :mod:`rayform.decoders._video_plan`) is decoded forward from its keyframe by a
:class:`~rayform.media._video_session.DecoderSession`. When an open session already decoded the
start of the run (the previous block stopped mid-GOP), the run continues it instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rayform.decoders._video_output import FrameSlab
from rayform.decoders._video_plan import AssetRun, FrameKey, PacketRun
from rayform.media._rgb_scaler import RgbScaler
from rayform.media._video_bitstream import detect_gop_start
from rayform.media._video_codec import open_decoder, require_av
from rayform.media._video_frames import PacketColumn
from rayform.media._video_session import DecoderSession, SessionCache


class RunFailedError(Exception):
    """A run produced no (or not all) of its frames; ``kind`` names the failure for warnings."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def check_run_start(run: PacketRun, anchor: bytes, codec: str) -> None:
    """Refuse a new session on ``run`` unless its first packet starts a group of pictures (or
    the stream cannot tell and the run's keyframe flag is trusted).

    Raises:
        RunFailedError: the first packet is no keyframe with its parameter sets.
    """
    is_start = detect_gop_start(anchor, codec)
    if is_start is False or (is_start is None and not run.trusted):
        raise RunFailedError(
            "keyframe",
            f"row {run.start} does not start a group of pictures ({codec} "
            "keyframe with its parameter sets); is_keyframe disagrees with the stream",
        )


class RunDecoder:
    """Decodes runs for one :class:`VideoFrameDecoder`, sharing its open sessions.

    Thread-safe: a session is checked out of the cache while a run uses it.

    Args:
        codec: the packet streams' codec (assets use their file's codec).
        thread_count: FFmpeg threads per decoder.
        output_format: ``"rgb"`` or ``"yuv420p"``.
        max_sessions: open sessions kept between runs.
    """

    def __init__(self, *, codec: str, thread_count: int, output_format: str,
                 max_sessions: int) -> None:
        self.codec = codec
        self.thread_count = thread_count
        self.output_format = output_format
        self.sessions = SessionCache(max_sessions)
        self._local = threading.local()  # an RgbScaler per decode thread

    def _capturer(self, slab: FrameSlab, session: DecoderSession) -> Callable[[FrameKey, Any], None]:
        """``capture(key, frame)``: convert a decoded frame into ``slab`` (with the thread's
        scaler, or the session's reusable reformatter for what the scaler does not cover)."""
        if session.reformatter is None:
            session.reformatter = require_av().video.reformatter.VideoReformatter()
        scaler = getattr(self._local, "scaler", None)
        if scaler is None:
            scaler = self._local.scaler = RgbScaler()
        return slab.capturer(session.reformatter, scaler)

    # ------------------------------------------------------------------------ packet streams
    def packet_run(self, run: PacketRun, *, packets: PacketColumn, slab: FrameSlab) -> bool:
        """Decode a packet-stream run into ``slab`` (keyed by batch row).

        Returns:
            Whether the run continued an open session.

        Raises:
            RunFailedError: the run does not start at a keyframe, or frames never came out.
        """
        av = require_av()
        anchor = packets.packet(run.start)
        key = (run.segment_id, len(anchor), hash(anchor))
        session = self.sessions.checkout(key)
        if session is not None and not self._can_resume(session, run, packets, anchor):
            session = None
        resumed = session is not None
        if session is None:
            check_run_start(run, anchor, self.codec)
            session = DecoderSession(key=key, anchor=anchor, stream=(run.segment_id, self.codec),
                                     context=self._packet_decoder(run.segment_id))
        context = session.context
        base = session.pts_base - run.start  # a row's pts
        pending = {base + row: row for row in run.wanted_rows}
        key_offsets = {row - run.start for row in run.keyframe_rows}
        capture = self._capturer(slab, session)

        def take(frame: Any) -> None:
            pts = frame.pts
            if pts is None:
                return
            session.last_pts = pts
            session.last_frame = frame
            if frame.key_frame:
                key_offsets.add(pts - session.pts_base)
            row = pending.pop(pts, None)
            if row is not None:
                capture(row, frame)

        if session.last_pts is not None and session.last_pts in pending:
            take(session.last_frame)
        fed = None
        last = None
        for row, data in packets.feed(run.start + session.next_position, run.end):
            if not pending:
                break
            packet = av.Packet(data)
            packet.pts = packet.dts = base + row
            fed = row
            for frame in context.decode(packet):  # inline take(): this loop runs per frame
                pts = frame.pts
                if pts is None:
                    continue
                last = frame
                if frame.key_frame:
                    key_offsets.add(pts - session.pts_base)
                wanted = pending.pop(pts, None)
                if wanted is not None:
                    capture(wanted, frame)
        if last is not None:
            session.last_pts = last.pts
            session.last_frame = last
        if fed is not None:
            session.next_position = fed - run.start + 1
            session.last_fed = packets.packet(fed)
        if pending:  # a decoder with delay: drain it (the session cannot continue after that)
            for frame in context.decode(None):
                take(frame)
            if pending:
                raise RunFailedError("decode", f"rows {sorted(pending.values())} decoded to no frame")
            return resumed
        self._rekey(session, run, packets, key_offsets)
        self.sessions.checkin(session)
        return resumed

    def _packet_decoder(self, segment_id: str) -> Any:
        """A decoder for a new pass over a segment's packet stream: the flushed decoder of a
        session of the same stream that the full cache gives up (no decoder to open and set up:
        its frame buffers stay allocated), else a new one. A pass starts at a keyframe, so a
        flushed decoder of the same stream decodes it as a new one would."""
        spare = self.sessions.reclaim((segment_id, self.codec))
        if spare is None:
            return open_decoder(self.codec, thread_count=self.thread_count)
        spare.context.flush_buffers()
        return spare.context

    @staticmethod
    def _can_resume(session: DecoderSession, run: PacketRun, packets: PacketColumn,
                    anchor: bytes) -> bool:
        """The session fed this run's packets from its keyframe and has not passed its frames.

        Rows of one segment are immutable, so matching the keyframe and the last packet fed
        identifies the stretch of stream already decoded.
        """
        if session.anchor != anchor or session.next_position == 0:
            return False
        last_row = run.start + session.next_position - 1
        if last_row > run.end or packets.packet(last_row) != session.last_fed:
            return False
        first_pts = session.pts_base + min(run.wanted_rows) - run.start
        return session.last_pts is not None and first_pts >= session.last_pts

    @staticmethod
    def _rekey(session: DecoderSession, run: PacketRun, packets: PacketColumn,
               key_offsets: set[int]) -> None:
        """Key the session by the latest keyframe it passed, where the next run will start."""
        fed = session.next_position
        later = [k for k in key_offsets if 0 < k < fed and packets.nonempty[run.start + k]]
        if not later:
            return
        offset = max(later)
        anchor = packets.packet(run.start + offset)
        session.key = (run.segment_id, len(anchor), hash(anchor))
        session.anchor = anchor
        session.pts_base += offset
        session.next_position -= offset

    # -------------------------------------------------------------------------- video assets
    def asset_run(self, run: AssetRun, *, slab: FrameSlab) -> bool:
        """Decode a video-asset run into ``slab`` (keyed by (asset, presentation index)).

        Returns:
            Whether the run continued an open session.

        Raises:
            RunFailedError: frames never came out of the decoder.
        """
        av = require_av()
        packets = run.packets
        pending = {int(packets.presentation_pts[p]): p for p in run.wanted}
        key = ("asset", run.asset_key)
        session = self.sessions.checkout(key)
        resumable = (session is not None and session.last_pts is not None
                     and run.start <= session.next_position and min(pending) >= session.last_pts)
        if session is None:
            session = DecoderSession(key=key, context=open_decoder(
                packets.codec, thread_count=self.thread_count, extradata=packets.extradata))
        if not resumable:
            session.context.flush_buffers()
            session.next_position = run.start
            session.last_pts = None
            session.last_frame = None
        context = session.context
        capture = self._capturer(slab, session)

        def take(frame: Any) -> None:
            if frame.pts is None:
                return
            session.last_pts = frame.pts
            session.last_frame = frame
            index = pending.pop(frame.pts, None)
            if index is not None:
                capture((run.asset_key, index), frame)

        if session.last_pts is not None and session.last_pts in pending:
            take(session.last_frame)
        position = session.next_position
        while pending and position < len(packets):
            packet = av.Packet(packets.packet_bytes(position))
            packet.pts = int(packets.pts[position])
            packet.dts = int(packets.dts[position])
            position += 1
            session.next_position = position
            for frame in context.decode(packet):
                take(frame)
        if pending:  # end of file: drain the decoder's delayed frames
            for frame in context.decode(None):
                take(frame)
            if pending:
                raise RunFailedError(
                    "decode", f"{packets.path.name}: frames {sorted(pending.values())} were not "
                    "produced by the decoder")
            return resumable
        self.sessions.checkin(session)
        return resumable
