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

import logging
import os
import threading
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any, Final, Literal

import numpy as np

from rayform.decoders._asset_cache import AssetCache
from rayform.decoders._base import ColumnDecoder, DecodeRequest, FieldBatch
from rayform.decoders._requests import RequestArrays
from rayform.decoders._tensor_rows import TensorRows
from rayform.decoders._thread_pool import ThreadPool
from rayform.decoders._video_output import (
    CopyOutputs,
    FrameSlab,
    ViewOutputs,
    frame_sort_key,
    slab_bank,
)
from rayform.decoders._video_plan import (
    FrameKey,
    PacketRun,
    Run,
    Unresolved,
    plan_asset_runs,
    plan_packet_runs,
    schedule_runs,
)
from rayform.decoders._video_processes import ProcessRunDecoder
from rayform.decoders._video_runs import RunDecoder, RunFailedError
from rayform.errors import CatalogError, ConfigError, FormatError, LocalStorageError, RemoteError
from rayform.media._video_asset import AssetPackets
from rayform.media._video_codec import UnknownCodecError, open_decoder, require_av
from rayform.media._video_frames import (
    PacketColumn,
    first_timestamps,
    is_packet_column,
    is_timestamp_column,
)
from rayform.recording._columns import (
    VIDEO_ASSET,
    VIDEO_FRAME_TIMESTAMP,
    column_name,
    entity_of,
    sibling_column,
)

WindowStorage = Literal["copy", "view"]
OutputFormat = Literal["rgb", "yuv420p"]

LOG: Final = logging.getLogger("rayform.decoders.video")
_KEYFRAME_COMPONENT: Final = "is_keyframe"
# Decode jobs per decode thread and call: more than one, so that threads the machine slows down
# leave their share to the others; few, so that most GOPs stay in one decoder.
JOBS_PER_THREAD: Final = 3
# Video files kept indexed (packet table + memory map) per decoder, beyond the open sessions.
_MIN_ASSET_CACHE: Final = 16
# (codec, column, segment version) -> (height, width) of a packet stream's frames, shared by this
# process's decoders: a segment version names the segment's content, so a decoder of a dataset
# built later (or forked) does not decode a keyframe again to learn it. Bounded; an entry is
# dropped when a worker meets frames of another size.
_STREAM_SIZES: dict[tuple[str, str, str], tuple[int, int]] = {}
_STREAM_SIZES_MAX: Final = 4096


class VideoFrameDecoder(ColumnDecoder):
    """Decode video frames for a dataloader field (Rerun's ``VideoFrameDecoder``, 0.41 API).

    Outputs uint8 RGB ``[3, H, W]`` per sample (``[T, 3, H, W]`` for a windowed field; like
    Rerun's, the tensor is a channels-first view of an HWC array), or a :class:`Yuv420Frame`
    with ``output_format="yuv420p"`` (``y [.., 1, H, W]``, ``uv [.., 2, H/2, W/2]``) to convert on
    the GPU. A sample's tensor never shares memory with another sample's unless
    ``window_storage="view"``: the frames of one call are converted straight into one buffer
    taken from the process's frame pool (:mod:`rayform.decoders._buffer_pool`; RGB through
    :class:`~rayform.media._rgb_scaler.RgbScaler`, no intermediate frame), and each single-frame
    sample's tensor is its own slot (a slot per sample, in request order, so that the call's
    results are rows of one tensor, :class:`TensorRows`); windows are stacked into new memory.

    Work is GOP-aware: the requests of one block are grouped by (segment, keyframe) and each group
    of pictures is decoded once, forward from its keyframe, capturing every frame any sample
    wants (only those are colour-converted). Up to ``max_decoder_sessions`` decoders stay open
    between blocks, so reads that move forward (sequential or block-shuffled sampling) continue
    where the last block stopped instead of decoding again from the keyframe; once that many are
    open, a pass that starts anew takes over the (flushed) decoder of the oldest open session of
    the same stream rather than opening another. A block's independent runs are cut into a few
    jobs per decode thread, which the calling thread and ``decode_threads - 1`` helpers take from
    one queue (FFmpeg runs without the GIL), so a thread the machine slows down leaves its share
    to the others.

    Memory is bounded: at most ``max_decoder_sessions + decode_threads`` decoders exist at once,
    each holding its codec's reference frames (H.264: at most 16, typically 1–4 frames of
    ``1.5 × H × W`` bytes in yuv420p) plus its last frame; up to ``max(16,
    max_decoder_sessions)`` video files stay memory-mapped (pages the OS may drop) with a packet
    table of 48 bytes per frame. Within a call only the wanted frames are kept, converted: the
    outputs themselves, in one pooled buffer (``slots × H × W × 3`` bytes in RGB; a slot per
    single-frame sample, else per distinct frame) that returns to the pool once every sample of
    the call is dropped; the pool keeps at most 128 MiB per
    process, beyond which buffers are plain allocations. Holding one sample keeps its call's
    buffer lent: ``clone()`` samples you keep for long.

    A sample whose frames cannot be decoded (a corrupt packet, a timestamp the file does not
    have, an unreadable video file) gets ``None``: in a rayform dataset it is reported
    (:meth:`FieldBatch.report_failure`) and the dataset's ``on_decode_error`` decides; used on its
    own, the decoder logs it once per kind of failure (per worker process) to the
    ``rayform.decoders.video`` logger — a log record, not a Python warning, as Rerun's decoder
    stays silent. Network, offline, disk
    and catalog errors always propagate. An unknown ``codec`` raises
    :class:`~rayform.media._video_codec.UnknownCodecError` when the decoder is built.

    Args:
        codec: the packet stream's codec: ``"h264"``, ``"h265"`` (``"hevc"``), ``"av1"`` or an
            FFmpeg decoder name. Video assets use the codec stored in the file.
        max_decoder_sessions: open decoders kept between calls; 0 disables reuse.
        thread_count: FFmpeg threads per decoder; 1 (the default) keeps decoding delay-free, 0
            lets FFmpeg choose. Measured on ``BlockShuffle``'s long runs of 224×224 frames, more
            FFmpeg threads cost more CPU per frame and were not faster (docs/dataloader.md,
            "FFmpeg's own threads").
        window_storage: ``"copy"`` gives every sample its own memory; ``"view"`` lets samples and
            window slots that show the same frame share one frame bank per call.
        output_format: ``"rgb"`` (uint8 tensors) or ``"yuv420p"`` (:class:`Yuv420Frame`).
        decode_threads: threads sharing a block's independent runs, the calling thread
            included (rayform's addition); ``None`` uses the process's CPUs (at most 8) in the
            main process and, inside a DataLoader worker, the CPUs divided among the workers.
        decode_processes: worker processes that decode packet streams to RGB off this
            process's GIL (rayform's addition; frames identical to in-process decoding): ``0``
            (the default) decodes in-process only, ``None`` uses one per decode thread when
            there are at least two, ``n`` starts ``n``. Video assets and YUV output always
            decode in-process. Each worker holds up to ``max_decoder_sessions`` open decoders;
            frames are written into one shared-memory arena of 128 MiB per process
            (:mod:`rayform.decoders._video_processes`).
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
        decode_processes: int | None = 0,
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
        if decode_processes is not None and (isinstance(decode_processes, bool)
                                             or not isinstance(decode_processes, int)
                                             or decode_processes < 0):
            raise ConfigError(
                f"VideoFrameDecoder: decode_processes must be an integer >= 0 (0 decodes "
                f"in-process) or None (automatic), got {decode_processes!r}"
            )
        require_av()
        open_decoder(codec)  # an unknown codec fails here, not at the first decode
        self.codec = codec
        self.max_decoder_sessions = max_decoder_sessions
        self.thread_count = thread_count
        self.window_storage: WindowStorage = window_storage
        self.output_format: OutputFormat = output_format
        self.decode_threads = decode_threads
        self.decode_processes = decode_processes
        self._init_state()

    def _init_state(self) -> None:
        self._pid = os.getpid()
        self._runs = RunDecoder(codec=self.codec, thread_count=self.thread_count,
                                output_format=self.output_format,
                                max_sessions=self.max_decoder_sessions)
        self._assets = AssetCache(max(_MIN_ASSET_CACHE, self.max_decoder_sessions))
        self._warned: set[str] = set()
        self._stats_lock = threading.Lock()
        self._resumed = 0
        self._started = 0
        self._process_calls = 0
        self._pool = ThreadPool(self.decode_threads, name="rayform-video", helpers=True)
        self._procs: ProcessRunDecoder | None = None
        self._procs_failed = False
        self._procs_lock = threading.Lock()
        self._frame_sizes: dict[str, tuple[int, int]] = {}  # segment -> (height, width)

    # ------------------------------------------------------------------ configuration surface
    def __repr__(self) -> str:
        defaults = {"codec": "h264", "max_decoder_sessions": 8, "thread_count": 1,
                    "window_storage": "copy", "output_format": "rgb", "decode_threads": None,
                    "decode_processes": 0}
        options = [f"{name}={getattr(self, name)!r}" for name, default in defaults.items()
                   if getattr(self, name) != default]
        return f"VideoFrameDecoder({', '.join(options)})"

    def __getstate__(self) -> dict[str, Any]:
        # Open codec contexts and memory maps cannot cross processes: ship the options only.
        return {"codec": self.codec, "max_decoder_sessions": self.max_decoder_sessions,
                "thread_count": self.thread_count, "window_storage": self.window_storage,
                "output_format": self.output_format, "decode_threads": self.decode_threads,
                "decode_processes": self.decode_processes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_state()

    @property
    def concurrent_blocks(self) -> bool:
        """Two blocks may decode at once: sessions are checked out per run, counters locked."""
        return True

    @property
    def session_hits(self) -> int:
        """Decode passes that continued an open session (since construction or unpickling)."""
        return self._resumed

    @property
    def session_misses(self) -> int:
        """Decode passes that started from a keyframe."""
        return self._started

    @property
    def process_calls(self) -> int:
        """Calls whose packet runs the worker processes decoded (see ``decode_processes``)."""
        return self._process_calls

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
    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]) -> Sequence[Any]:
        """Decode the frames of every request; ``None`` where a sample's frames are missing.

        Returns:
            One value per request, in order: uint8 ``[3, H, W]`` / ``[T, 3, H, W]`` tensors, or
            :class:`Yuv420Frame` with ``output_format="yuv420p"``. Single RGB frames that all
            decoded come as a :class:`TensorRows` (rows of the call's frame buffer).
        """
        if not requests:
            return []
        if isinstance(requests, RequestArrays):
            if not requests.starts_at_keyframe:
                return [None] * len(requests)
        elif not all(r.starts_at_keyframe for r in requests):
            return self._decode_from_keyframes(batch, requests)
        if self._pid != os.getpid():  # a forked worker: the parent's decoders are not ours
            self._init_state()
        column = batch.column
        if batch.select is not None:
            column = batch.take_rows(range(len(column)))
        failures: list[tuple[str, str]] = []
        keys: list[list[FrameKey] | Unresolved]
        if is_packet_column(column.type):
            packets = PacketColumn(column, self.codec)
            packet_runs, keys = plan_packet_runs(requests, packets.nonempty)
            slab = self._decode_in_processes(packet_runs, keys, batch, packets, failures)
            if slab is None:
                slab = self._slab(keys, batch)
                self._run_all(schedule_runs(packet_runs, parts=self._jobs(batch)),
                              partial(self._runs.packet_run, packets=packets, slab=slab),
                              failures)
        elif is_timestamp_column(column.type):
            assets: dict[str, tuple[str, AssetPackets] | None] = {}

            def asset_of(segment_id: str) -> tuple[str, AssetPackets] | None:
                if segment_id not in assets:
                    assets[segment_id] = self._asset_of(batch, segment_id, failures)
                return assets[segment_id]

            asset_runs, keys = plan_asset_runs(requests, first_timestamps(column), asset_of)
            slab = self._slab(keys, batch)
            self._run_all(schedule_runs(asset_runs, parts=self._jobs(batch)),
                          partial(self._runs.asset_run, slab=slab), failures)
        else:
            raise ConfigError(
                f"VideoFrameDecoder reads '...:VideoStream:sample' (List<Binary>) or "
                f"'...:VideoFrameReference:timestamp' (List<Int64>) columns, got "
                f"{column.type} for {batch.path or 'this field'!r}"
            )
        rows = self._as_rows(keys, slab, is_windowed=batch.is_windowed)
        results = self._assemble(requests, keys, slab, failures, batch) if rows is None else rows
        if batch.on_failure is None:  # used on its own: warn; in a dataset: its policy decides
            for kind, message in failures:
                self._warn(kind, message)
        return results

    def _decode_from_keyframes(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
                               ) -> list[Any]:
        """As Rerun's: a request that does not start at a keyframe (the pipeline found none before
        its frames) gets ``None``; the others decode as usual."""
        chosen = [i for i, r in enumerate(requests) if r.starts_at_keyframe]
        out: list[Any] = [None] * len(requests)
        if chosen:
            for i, value in zip(chosen, self.decode(batch, [requests[i] for i in chosen]),
                                strict=True):
                out[i] = value
        return out

    # ------------------------------------------------------------------- worker processes
    def _process_count(self) -> int:
        """Worker processes to decode packet streams in: ``decode_processes``, or (``None``) the
        process's decode threads when there are at least two; 0 (in-process) for YUV output."""
        if self.output_format != "rgb" or self.decode_processes == 0:
            return 0
        if self.decode_processes is not None:
            return self.decode_processes
        threads = self._pool.threads
        return threads if threads >= 2 else 0

    def process_decoder(self) -> ProcessRunDecoder | None:
        """This process's worker-process decoder (started on first call, in the background),
        or ``None`` when packet streams decode in-process (see ``decode_processes``; also where
        workers cannot be started: no ``memfd`` outside Linux)."""
        count = self._process_count()
        if count == 0:
            return None
        if self._pid != os.getpid():  # a forked worker: the parent's workers are not ours
            self._init_state()
        with self._procs_lock:
            if self._procs is None and not self._procs_failed:
                try:
                    self._procs = ProcessRunDecoder(
                        codec=self.codec, thread_count=self.thread_count,
                        max_sessions=self.max_decoder_sessions, processes=count)
                except (OSError, AttributeError) as err:  # no memfd (not Linux), no fork/exec
                    self._procs_failed = True
                    LOG.warning("%r: video decode worker processes unavailable (%s: %s); "
                                "decoding in-process", self, type(err).__name__, err)
        return self._procs

    def _decode_in_processes(self, runs: list[PacketRun], keys: list[list[FrameKey] | Unresolved],
                             batch: FieldBatch, packets: PacketColumn,
                             failures: list[tuple[str, str]]) -> FrameSlab | None:
        """Decode the runs in the worker processes; the slab, or ``None`` to decode in-process
        (no workers, not started yet, frame size not known, no shared memory left, a worker
        died or a frame of another size came out)."""
        procs = self.process_decoder()
        if procs is None or not runs or not procs.processes.usable:
            return None
        sizes = {self._frame_size(run, packets, batch) for run in runs}
        if len(sizes) != 1 or None in sizes:
            return None
        height, width = next(iter(sizes))  # type: ignore[misc]
        slab = self._slab(keys, batch)
        if not slab.share(procs.processes.pool, height=height, width=width):
            return None
        noted: list[tuple[str, str]] = []
        parts = JOBS_PER_THREAD * procs.processes.count
        outcome = procs.decode(schedule_runs(list(runs), parts=parts),
                               packets=packets, slab=slab, failures=noted)
        if outcome is None:
            for run in runs:
                self._frame_sizes.pop(run.segment_id, None)
                shared = self._size_key(run.segment_id, batch)
                if shared is not None:
                    _STREAM_SIZES.pop(shared, None)
            return None
        failures.extend(noted)
        with self._stats_lock:
            self._resumed += outcome[0]
            self._started += outcome[1]
            self._process_calls += 1
        return slab

    def _frame_size(self, run: PacketRun, packets: PacketColumn, batch: FieldBatch
                    ) -> tuple[int, int] | None:
        """``(height, width)`` of a segment's frames: known to this process already (same
        column, same segment version: :data:`_STREAM_SIZES`), else its first run's keyframe
        decoded here once (the slots must exist before the workers write); ``None`` if it gives
        no frame. A stream that changes size makes a worker report it, and the call decodes
        in-process."""
        size = self._frame_sizes.get(run.segment_id)
        if size is not None:
            return size
        shared = self._size_key(run.segment_id, batch)
        size = None if shared is None else _STREAM_SIZES.get(shared)
        if size is None:
            av = require_av()
            try:
                context = open_decoder(self.codec)
                frames = [*context.decode(av.Packet(packets.packet(run.start))),
                          *context.decode(None)]
            except (av.FFmpegError, ValueError, EOFError):
                return None
            if not frames:
                return None
            size = (frames[0].height, frames[0].width)
            if shared is not None:
                if len(_STREAM_SIZES) >= _STREAM_SIZES_MAX:
                    _STREAM_SIZES.clear()
                _STREAM_SIZES[shared] = size
        self._frame_sizes[run.segment_id] = size
        return size

    def _size_key(self, segment_id: str, batch: FieldBatch) -> tuple[str, str, str] | None:
        """The key of a segment's stream in :data:`_STREAM_SIZES`: ``None`` without a segment
        version to name its content (a batch built by hand, not by a dataset)."""
        if batch.open_segment is None or batch.path is None:
            return None
        version = getattr(batch.open_segment(segment_id), "version", None)
        return (self.codec, batch.path, version) if isinstance(version, str) else None

    def _jobs(self, batch: FieldBatch) -> int:
        """Decode jobs per call: a few per thread, taken from one queue (load balancing); one
        (a single decoder carrying on through the block's GOPs) when the call's share of the
        threads (:attr:`FieldBatch.decode_threads`) is one."""
        threads = self._pool.threads
        if batch.decode_threads is not None:
            threads = min(threads, batch.decode_threads)
        return 1 if threads <= 1 else JOBS_PER_THREAD * threads

    def _slab(self, keys: list[list[FrameKey] | Unresolved], batch: FieldBatch) -> FrameSlab:
        """The call's frame slots: one per request (its frame, in request order) when the
        results can be rows of the slab (:meth:`_as_rows`), else one per wanted frame in key
        order (so that the view bank can be the slab)."""
        if self._per_request(keys, is_windowed=batch.is_windowed):
            return FrameSlab([k[-1] for k in keys if not isinstance(k, Unresolved)],
                             output_format=self.output_format)
        wanted = {key for frame_keys in keys if not isinstance(frame_keys, Unresolved)
                  for key in frame_keys}
        return FrameSlab(sorted(wanted, key=frame_sort_key), output_format=self.output_format)

    def _per_request(self, keys: list[list[FrameKey] | Unresolved], *, is_windowed: bool) -> bool:
        """Single RGB frames that every sample owns (``"copy"``), all resolved: a slot each."""
        return (not is_windowed and self.output_format == "rgb" and self.window_storage == "copy"
                and not any(isinstance(k, Unresolved) for k in keys))

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

        self._pool.drain(job, jobs)

    def _guard(self, segment_id: str, run: Callable[[], bool],
               failures: list[tuple[str, str]]) -> bool | None:
        """Run one decode pass; a failure only costs the samples of that pass.

        Returns whether the pass continued an open session, ``None`` if it failed.
        """
        av = require_av()
        try:
            return run()
        except RunFailedError as failure:
            failures.append((failure.kind, f"segment {segment_id!r}: {failure}"))
        except UnknownCodecError as err:
            failures.append(("codec", str(err)))
        except (av.FFmpegError, ValueError, EOFError) as err:
            failures.append(("decode", f"segment {segment_id!r}: {type(err).__name__}: {err}"))
        return None

    def _warn(self, kind: str, message: str) -> None:
        """Log (not warn: as Rerun's, a failed sample is ``None`` and nothing more, so that
        ``filterwarnings=error`` does not turn a bad packet into an exception)."""
        if kind in self._warned:
            return
        self._warned.add(kind)
        LOG.warning("%r: %s; those samples are None (further '%s' failures of this decoder are "
                    "not reported)", self, message, kind)

    def _asset_of(self, batch: FieldBatch, segment_id: str,
                  failures: list[tuple[str, str]]) -> tuple[str, AssetPackets] | None:
        """The segment's video file, or ``None`` (with a failure noted) if it cannot be read."""
        if batch.open_segment is None:
            raise ConfigError(
                "VideoFrameDecoder needs FieldBatch.open_segment to read video assets "
                f"(segment {segment_id!r})"
            )
        try:
            return self._assets.lookup(batch.open_segment(segment_id), batch.path)
        except (RemoteError, LocalStorageError, CatalogError):
            raise  # the network, the disk or the catalog failed, not the video: never None
        except (FormatError, OSError, LookupError) as err:
            failures.append(("asset", f"segment {segment_id!r}: video asset: {err}"))
            return None

    # ------------------------------------------------------------------------------- output
    def _as_rows(self, keys: list[list[FrameKey] | Unresolved], slab: FrameSlab, *,
                 is_windowed: bool) -> TensorRows | None:
        """The results as rows of the slab's ``[K, 3, H, W]`` bank, with no per-sample objects
        (a batching dataset cuts batches straight out of it): single RGB frames, every request
        decoded into its slots. ``None`` otherwise.

        With ``"copy"`` the slab has a slot per request (a frame shown twice is in two slots), so
        request ``i`` is row ``i``; with ``"view"`` requests showing one frame share its row."""
        if is_windowed or self.output_format != "rgb":
            return None
        slots = slab.slots()
        if slots is None:
            return None
        banks, slot_of = slots
        captured = slab.captured
        if any(isinstance(k, Unresolved) or k[-1] not in captured for k in keys):
            return None
        bank = slab_bank(banks, next(iter(captured.values())))
        if self._per_request(keys, is_windowed=is_windowed):
            return TensorRows(bank)
        return TensorRows(bank, np.fromiter((slot_of[k[-1]] for k in keys  # type: ignore[index]
                                             ), dtype=np.int64, count=len(keys)))

    def _assemble(self, requests: Sequence[DecodeRequest],
                  keys: list[list[FrameKey] | Unresolved], slab: FrameSlab,
                  failures: list[tuple[str, str]], batch: FieldBatch) -> list[Any]:
        is_windowed = batch.is_windowed
        captured = slab.captured
        outputs = (ViewOutputs(captured, slots=slab.slots()) if self.window_storage == "view"
                   else CopyOutputs(captured))
        results: list[Any] = []
        # Requests are built only for messages: a RequestArrays makes one per index.
        for i, frame_keys in enumerate(keys):
            if isinstance(frame_keys, Unresolved):
                request = requests[i]
                message = (f"segment {request.segment_id!r} at {request.index_value!r}: no "
                           f"decodable frame ({frame_keys.reason})")
                failures.append((frame_keys.reason, message))
                batch.report_failure(request, message)
                results.append(None)
                continue
            if any(k not in captured for k in frame_keys):
                request = requests[i]
                batch.report_failure(request, _failure_of(request.segment_id, failures))
                results.append(None)
                continue
            shapes = {captured[k].shape for k in frame_keys} if is_windowed else set()
            if len(shapes) > 1:
                request = requests[i]
                message = (f"segment {request.segment_id!r} at {request.index_value!r}: window "
                           f"frames differ in size {sorted(shapes)}")
                failures.append(("shape", message))
                batch.report_failure(request, message)
                results.append(None)
                continue
            results.append(outputs.take(frame_keys, is_windowed=is_windowed))
        return results


def _failure_of(segment_id: str, failures: list[tuple[str, str]]) -> str:
    """What went wrong for a segment's frames (its first noted failure, else the first)."""
    mine = [m for _, m in failures if f"segment {segment_id!r}" in m]
    if mine:
        return mine[0]
    return failures[0][1] if failures else "its frames were not decoded"


