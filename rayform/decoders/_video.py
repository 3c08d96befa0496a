"""VideoFrameDecoder: H.264 / H.265 / AV1 frames from packet streams and MP4 assets (PyAV).

Two column shapes are decoded (DESIGN §2):

- a packet stream, ``<entity>:VideoStream:sample`` (one encoded packet per row, Annex B or
  length-prefixed), with the sibling ``<entity>:VideoStream:is_keyframe``;
- a video asset, ``<entity>:VideoFrameReference:timestamp`` (one row per frame: its pts in ns
  inside the file) with ``<entity>:VideoFrameReference:is_keyframe`` and the static
  ``<entity>:AssetVideo:asset`` naming the MP4 kept as-is (B-frames allowed).

The frame served at an output row is the latest frame presented at or before it: for packet
streams the latest non-empty packet at or before the row, for assets the frame the row's
timestamp names.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog._columns import (
    VIDEO_ASSET,
    VIDEO_FRAME_TIMESTAMP,
    column_name,
    entity_of,
    sibling_column,
)
from rayform.decoders._base import ColumnDecoder, DecodeRequest, FieldBatch
from rayform.decoders._video_asset import AssetPackets, load_asset_packets
from rayform.decoders._video_bitstream import detect_gop_start
from rayform.decoders._video_codec import UnknownCodecError, open_decoder, require_av
from rayform.decoders._video_frames import (
    PacketColumn,
    frame_to_rgb,
    frame_to_yuv,
    is_packet_column,
    is_timestamp_column,
)
from rayform.decoders._video_output import Captured, CopyOutputs, ViewOutputs
from rayform.decoders._video_plan import (
    AssetRun,
    FrameKey,
    PacketRun,
    Run,
    Unresolved,
    plan_asset_runs,
    plan_packet_runs,
    schedule_runs,
)
from rayform.decoders._video_pool import RunPool
from rayform.decoders._video_session import DecoderSession, SessionCache
from rayform.errors import ColumnNotFoundError, ConfigError, FormatError

WindowStorage = Literal["copy", "view"]
OutputFormat = Literal["rgb", "yuv420p"]

_KEYFRAME_COMPONENT: Final = "is_keyframe"
# Video files kept indexed (packet table + memory map) per decoder, beyond the open sessions.
_MIN_ASSET_CACHE: Final = 16


class _RunFailedError(Exception):
    """A run produced no (or not all) frames; ``kind`` picks the warning."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class VideoFrameDecoder(ColumnDecoder):
    """Decode video frames for a dataloader field (Rerun's ``VideoFrameDecoder``, 0.41 API).

    Outputs uint8 RGB ``[3, H, W]`` per sample (``[T, 3, H, W]`` for a windowed field; like
    Rerun's, the tensor is a channels-first view of an HWC array), or a :class:`Yuv420Frame`
    with ``output_format="yuv420p"`` (``y [.., 1, H, W]``, ``uv [.., 2, H/2, W/2]``) to convert on
    the GPU. A sample's tensor never shares memory with another sample's unless
    ``window_storage="view"``.

    Work is GOP-aware: the requests of one block are grouped by (segment, keyframe) and each group
    of pictures is decoded once, forward from its keyframe, capturing every frame any sample
    wants (only those are colour-converted). Up to ``max_decoder_sessions`` decoders stay open
    between blocks, so reads that move forward (sequential or block-shuffled sampling) continue
    where the last block stopped instead of decoding again from the keyframe.

    Memory is bounded by ``max_decoder_sessions`` open decoders, each holding its codec's
    reference frames (H.264: at most 16, typically 1–4 frames of ``1.5 × H × W`` bytes for
    yuv420p) plus its last frame; up to ``max(16, max_decoder_sessions)`` video files stay
    memory-mapped with a packet table of 40 bytes per frame. Within a call, only the wanted
    frames are kept, converted.

    A sample whose frames cannot be decoded (no keyframe before it, a corrupt packet, an unknown
    codec, a timestamp the file does not have) gets ``None``, with one ``RuntimeWarning`` per
    kind of failure per decoder (per worker process).

    Args:
        codec: the packet stream's codec: ``"h264"``, ``"h265"`` (``"hevc"``), ``"av1"`` or an
            FFmpeg decoder name. Video assets use the codec stored in the file.
        max_decoder_sessions: open decoders kept between calls; 0 disables reuse.
        thread_count: FFmpeg threads per decoder; 1 (the default) keeps decoding delay-free, 0
            lets FFmpeg choose.
        window_storage: ``"copy"`` gives every sample its own memory; ``"view"`` lets samples and
            window slots that show the same frame share one frame bank per call.
        output_format: ``"rgb"`` (uint8 tensors) or ``"yuv420p"`` (:class:`Yuv420Frame`).
        decode_threads: threads sharing a block's independent runs (rayform's addition);
            ``None`` uses the process's CPUs (at most 4) in the main process and 1 inside a
            DataLoader worker.
    """

    def __init__(
        self,
        *,
        codec: str = "h264",
        max_decoder_sessions: int = 8,
        thread_count: int = 1,
        window_storage: WindowStorage = "copy",
        output_format: OutputFormat = "rgb",
        decode_threads: int | None = None,
    ) -> None:
        if not isinstance(codec, str) or not codec.strip():
            raise ConfigError(f"VideoFrameDecoder: codec must be a codec name, got {codec!r}")
        if not isinstance(max_decoder_sessions, int) or max_decoder_sessions < 0:
            raise ConfigError(
                f"VideoFrameDecoder: max_decoder_sessions must be an integer >= 0 (0 disables "
                f"session reuse), got {max_decoder_sessions!r}"
            )
        if not isinstance(thread_count, int) or thread_count < 0:
            raise ConfigError(
                f"VideoFrameDecoder: thread_count must be an integer >= 0 (0 = FFmpeg's choice), "
                f"got {thread_count!r}"
            )
        if window_storage not in ("copy", "view"):
            raise ConfigError(
                f"VideoFrameDecoder: window_storage must be 'copy' or 'view', got {window_storage!r}"
            )
        if output_format not in ("rgb", "yuv420p"):
            raise ConfigError(
                f"VideoFrameDecoder: output_format must be 'rgb' or 'yuv420p', got {output_format!r}"
            )
        if decode_threads is not None and (not isinstance(decode_threads, int)
                                           or decode_threads < 1):
            raise ConfigError(
                f"VideoFrameDecoder: decode_threads must be an integer >= 1 or None, got "
                f"{decode_threads!r}"
            )
        require_av()
        self.codec = codec
        self.max_decoder_sessions = max_decoder_sessions
        self.thread_count = thread_count
        self.window_storage: WindowStorage = window_storage
        self.output_format: OutputFormat = output_format
        self.decode_threads = decode_threads
        self._init_state()

    def _init_state(self) -> None:
        self._sessions = SessionCache(self.max_decoder_sessions)
        self._assets: OrderedDict[str, AssetPackets] = OrderedDict()
        self._asset_lock = threading.Lock()
        self._warned: set[str] = set()
        self._stats_lock = threading.Lock()
        self._resumed = 0
        self._started = 0
        self._pool = RunPool(self.decode_threads)

    # ------------------------------------------------------------------ configuration surface
    def __repr__(self) -> str:
        defaults = {"codec": "h264", "max_decoder_sessions": 8, "thread_count": 1,
                    "window_storage": "copy", "output_format": "rgb", "decode_threads": None}
        options = [f"{name}={getattr(self, name)!r}" for name, default in defaults.items()
                   if getattr(self, name) != default]
        return f"VideoFrameDecoder({', '.join(options)})"

    def __getstate__(self) -> dict[str, Any]:
        # Open codec contexts and memory maps cannot cross processes: ship the options only.
        return {"codec": self.codec, "max_decoder_sessions": self.max_decoder_sessions,
                "thread_count": self.thread_count, "window_storage": self.window_storage,
                "output_format": self.output_format, "decode_threads": self.decode_threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_state()

    @property
    def session_hits(self) -> int:
        """Decode passes that continued an open session (since construction or unpickling)."""
        return self._resumed

    @property
    def session_misses(self) -> int:
        """Decode passes that started from a keyframe."""
        return self._started

    def prior_keyframe_path(self, field_path: str) -> str | None:
        """The sibling ``...:is_keyframe`` column of a video field (``None`` without a ``:``).

        ``/cam:VideoStream:sample`` -> ``/cam:VideoStream:is_keyframe``;
        ``/cam:VideoFrameReference:timestamp`` -> ``/cam:VideoFrameReference:is_keyframe``.
        """
        if ":" not in field_path:
            return None
        return sibling_column(field_path, _KEYFRAME_COMPONENT)

    def required_columns(self, field_path: str) -> tuple[str, ...]:
        """Every column a field at ``field_path`` needs besides itself."""
        keyframe = self.prior_keyframe_path(field_path)
        needed = [keyframe] if keyframe is not None else []
        if field_path.endswith(":" + VIDEO_FRAME_TIMESTAMP):
            needed.append(column_name(entity_of(field_path), VIDEO_ASSET))
        return tuple(needed)

    def check_columns(self, field_path: str, available: Collection[str], *,
                      key: str | None = None) -> None:
        """Raise if a column the field needs is missing (call when building a dataset).

        Args:
            field_path: the field's column.
            available: the dataset's column names.
            key: the field's key in the sample, for the message.

        Raises:
            ConfigError: the ``is_keyframe`` (or asset) column is missing.
        """
        name = key if key is not None else field_path
        missing = [c for c in self.required_columns(field_path) if c not in available]
        if missing:
            raise ConfigError(
                f"Video fields require an is_keyframe column; missing {name!r}: "
                f"{', '.join(repr(c) for c in missing)}. Log video with "
                "RecordingWriter.log_video_stream / log_video_asset, which write it"
            )

    # ------------------------------------------------------------------------------ decoding
    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> list[Any]:
        """Decode the frames of every request; ``None`` where a sample's frames are missing.

        Returns:
            One value per request, in order: uint8 ``[3, H, W]`` / ``[T, 3, H, W]`` tensors, or
            :class:`Yuv420Frame` with ``output_format="yuv420p"``.
        """
        if not requests:
            return []
        column = batch.column
        if batch.select is not None:
            column = batch.take_rows(range(len(column)))
        captured: dict[FrameKey, Captured] = {}
        failures: list[tuple[str, str]] = []
        keys: list[list[FrameKey] | Unresolved]
        if is_packet_column(column.type):
            packets = PacketColumn(column, self.codec)
            packet_runs, keys = plan_packet_runs(requests, packets.nonempty)
            self._run_all(schedule_runs(packet_runs, parts=self._pool.threads),
                          partial(self._decode_packet_run, packets=packets, captured=captured),
                          failures)
        elif is_timestamp_column(column.type):
            timestamps = _flat_timestamps(column)
            assets: dict[str, tuple[str, AssetPackets] | None] = {}

            def asset_of(segment_id: str) -> tuple[str, AssetPackets] | None:
                if segment_id not in assets:
                    assets[segment_id] = self._asset_of(batch, segment_id, failures)
                return assets[segment_id]

            asset_runs, keys = plan_asset_runs(requests, timestamps, asset_of)
            self._run_all(schedule_runs(asset_runs, parts=self._pool.threads),
                          partial(self._decode_asset_run, captured=captured), failures)
        else:
            raise ConfigError(
                f"VideoFrameDecoder reads '...:VideoStream:sample' (List<Binary>) or "
                f"'...:VideoFrameReference:timestamp' (List<Int64>) columns, got "
                f"{column.type} for {batch.path or 'this field'!r}"
            )
        results = self._assemble(requests, keys, captured, failures,
                                 is_windowed=batch.is_windowed)
        for kind, message in failures:
            self._warn(kind, message)
        return results

    def _run_all(self, jobs: list[list[Run]], decode_run: Callable[[Run], bool],
                 failures: list[tuple[str, str]]) -> None:
        """Decode every job (a list of runs, in order) on the decode threads."""

        def job(runs: list[Run]) -> None:
            for run in runs:
                resumed = self._guard(run.segment_id, partial(decode_run, run), failures)
                with self._stats_lock:
                    if resumed is True:
                        self._resumed += 1
                    elif resumed is False:
                        self._started += 1

        self._pool.map(job, jobs)

    def _guard(self, segment_id: str, run: Callable[[], bool],
               failures: list[tuple[str, str]]) -> bool | None:
        """Run one decode pass; a failure only costs the samples of that pass.

        Returns whether the pass continued an open session, ``None`` if it failed.
        """
        av = require_av()
        try:
            return run()
        except _RunFailedError as failure:
            failures.append((failure.kind, f"segment {segment_id!r}: {failure}"))
        except UnknownCodecError as err:
            failures.append(("codec", str(err)))
        except (av.FFmpegError, ValueError, EOFError) as err:
            failures.append(("decode", f"segment {segment_id!r}: {type(err).__name__}: {err}"))
        return None

    def _warn(self, kind: str, message: str) -> None:
        if kind in self._warned:
            return
        self._warned.add(kind)
        warnings.warn(
            f"{self!r}: {message}; those samples are None (further '{kind}' failures of this "
            "decoder are not reported)",
            RuntimeWarning,
            stacklevel=3,
        )

    def _convert(self, frame: Any, session: DecoderSession) -> Captured:
        if session.reformatter is None:
            from av.video.reformatter import VideoReformatter

            session.reformatter = VideoReformatter()
        if self.output_format == "rgb":
            return frame_to_rgb(frame, session.reformatter)
        return frame_to_yuv(frame, session.reformatter)

    # ------------------------------------------------------------------------ packet streams
    def _decode_packet_run(self, run: PacketRun, *, packets: PacketColumn,
                           captured: dict[FrameKey, Captured]) -> bool:
        av = require_av()
        anchor = packets.packet(run.start)
        key = (run.segment_id, len(anchor), hash(anchor))
        session = self._sessions.checkout(key)
        if session is not None and not self._can_resume_packets(session, run, packets, anchor):
            session = None
        if session is None:
            is_start = detect_gop_start(anchor, self.codec)
            if is_start is False or (is_start is None and not run.trusted):
                raise _RunFailedError(
                    "keyframe",
                    f"row {run.start} does not start a group of pictures ({self.codec} "
                    "keyframe with its parameter sets); is_keyframe disagrees with the stream",
                )
            resumed = False
            session = DecoderSession(key=key, anchor=anchor, context=open_decoder(
                self.codec, thread_count=self.thread_count))
        else:
            resumed = True
        context = session.context
        pending = {session.pts_base + row - run.start: row for row in run.wanted_rows}
        key_offsets = {row - run.start for row in run.keyframe_rows}

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
                captured[row] = self._convert(frame, session)

        if session.last_pts is not None and session.last_pts in pending:
            take(session.last_frame)
        first = run.start + session.next_position
        for row in range(first, run.end + 1):
            if not pending:
                break
            if not packets.nonempty[row]:
                continue
            data = packets.packet(row)
            packet = av.Packet(data)
            packet.pts = packet.dts = session.pts_base + row - run.start
            session.next_position = row - run.start + 1
            session.last_fed = data
            for frame in context.decode(packet):
                take(frame)
        if pending:  # a decoder with delay: drain it (the session cannot continue after that)
            for frame in context.decode(None):
                take(frame)
            if pending:
                raise _RunFailedError("decode", f"rows {sorted(pending.values())} decoded to no frame")
            return resumed
        self._rekey_packet_session(session, run, packets, key_offsets)
        self._sessions.checkin(session)
        return resumed

    def _can_resume_packets(self, session: DecoderSession, run: PacketRun,
                            packets: PacketColumn, anchor: bytes) -> bool:
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

    def _rekey_packet_session(self, session: DecoderSession, run: PacketRun,
                              packets: PacketColumn, key_offsets: set[int]) -> None:
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
    def _asset_of(self, batch: FieldBatch, segment_id: str,
                  failures: list[tuple[str, str]]) -> tuple[str, AssetPackets] | None:
        if batch.open_segment is None:
            raise ConfigError(
                "VideoFrameDecoder needs FieldBatch.open_segment to read video assets "
                f"(segment {segment_id!r})"
            )
        segment = batch.open_segment(segment_id)
        if batch.path is not None:
            asset_column = column_name(entity_of(batch.path), VIDEO_ASSET)
        else:
            asset_column = _only_asset_column(segment)
        try:
            rows = segment.column(asset_column, "")
        except ColumnNotFoundError as err:
            raise ConfigError(
                f"segment {segment_id!r} has no {asset_column!r}: a video asset field needs the "
                "file logged with RecordingWriter.log_video_asset"
            ) from err
        values = rows.values.flatten() if len(rows.values) else rows.values
        if len(values) == 0:
            raise ConfigError(f"segment {segment_id!r}: {asset_column!r} is empty")
        digest = str(values[len(values) - 1].as_py())
        try:
            path = str(segment.asset_path(digest))
            with self._asset_lock:
                packets = self._assets.pop(path, None)
                if packets is None:
                    packets = load_asset_packets(path)
                self._assets[path] = packets
        except (FormatError, OSError, LookupError) as err:
            failures.append(("asset", f"segment {segment_id!r}: video asset {digest[:12]}: {err}"))
            return None
        with self._asset_lock:
            while len(self._assets) > max(_MIN_ASSET_CACHE, self.max_decoder_sessions):
                self._assets.popitem(last=False)  # unmapped when its last run finishes
        return digest, packets

    def _decode_asset_run(self, run: AssetRun, *, captured: dict[FrameKey, Captured]) -> bool:
        av = require_av()
        packets = run.packets
        pending = {int(packets.presentation_pts[p]): p for p in run.wanted}
        key = ("asset", run.asset_key)
        session = self._sessions.checkout(key)
        first_pts = min(pending)
        resumable = (session is not None and session.last_pts is not None
                     and run.start <= session.next_position and first_pts >= session.last_pts)
        if session is None:
            session = DecoderSession(key=key, context=open_decoder(
                packets.codec, thread_count=self.thread_count, extradata=packets.extradata))
        if not resumable:
            session.context.flush_buffers()
            session.next_position = run.start
            session.last_pts = None
            session.last_frame = None
        context = session.context

        def take(frame: Any) -> None:
            if frame.pts is None:
                return
            session.last_pts = frame.pts
            session.last_frame = frame
            index = pending.pop(frame.pts, None)
            if index is not None:
                captured[(run.asset_key, index)] = self._convert(frame, session)

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
                raise _RunFailedError(
                    "decode", f"{packets.path.name}: frames {sorted(pending.values())} were not "
                    "produced by the decoder")
            return resumable
        self._sessions.checkin(session)
        return resumable

    # ------------------------------------------------------------------------------- output
    def _assemble(self, requests: Sequence[DecodeRequest],
                  keys: list[list[FrameKey] | Unresolved], captured: dict[FrameKey, Captured],
                  failures: list[tuple[str, str]], *, is_windowed: bool) -> list[Any]:
        outputs = (ViewOutputs(captured) if self.window_storage == "view"
                   else CopyOutputs(captured))
        results: list[Any] = []
        for request, frame_keys in zip(requests, keys, strict=True):
            if isinstance(frame_keys, Unresolved):
                failures.append((frame_keys.reason, f"segment {request.segment_id!r} at "
                                 f"{request.index_value!r}: no decodable frame"))
                results.append(None)
                continue
            if any(k not in captured for k in frame_keys):
                results.append(None)
                continue
            shapes = {captured[k].shape for k in frame_keys} if is_windowed else set()
            if len(shapes) > 1:
                failures.append(("shape", f"segment {request.segment_id!r} at "
                                 f"{request.index_value!r}: window frames differ in size "
                                 f"{sorted(shapes)}"))
                results.append(None)
                continue
            results.append(outputs.take(frame_keys, is_windowed=is_windowed))
        return results


def _only_asset_column(segment: Any) -> str:
    candidates = [column_name(entity, VIDEO_ASSET) for entity in segment.record.entities
                  if segment.has_column(column_name(entity, VIDEO_ASSET))]
    if len(candidates) != 1:
        raise ConfigError(
            f"segment {segment.segment_id!r} has {len(candidates)} video assets "
            f"({candidates}); the dataloader must pass FieldBatch.path to pick one"
        )
    return candidates[0]


def _flat_timestamps(column: Any) -> npt.NDArray[np.int64]:
    """The first value of each row as int64 (ns); rows without one read as a very early time."""
    out = np.full(len(column), np.iinfo(np.int64).min // 2, dtype=np.int64)
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    values = column.values
    if not pa.types.is_int64(values.type):
        values = values.view(pa.int64()) if values.type.bit_width == 64 else values.cast(pa.int64())
    flat = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    valid = column.is_valid().to_numpy(zero_copy_only=False) & (offsets[1:] > offsets[:-1])
    out[valid] = flat[offsets[:-1][valid]]
    return out
