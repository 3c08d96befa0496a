"""Video decoding in worker processes: a block's packet runs decoded off this process's GIL.

PyAV releases the GIL several times per packet; with two decoding threads in one process every
release hands the GIL to the other thread and back, which measured 1.3-1.7x the CPU per frame of
one thread alone. Here the runs of a call are decoded by worker processes
(:mod:`rayform.media._video_worker`, one thread each, no torch), which write RGB frames straight
into the call's frame slots in shared memory (:class:`SharedFramePool`), so nothing is copied
back. This process only plans: it keeps the decoder sessions' bookkeeping (which worker holds
which stream's decoder, and where it stopped), so a block that continues the last one still
resumes its decoder (a run goes to the worker holding its session; new runs to the least loaded).

The workers start in the background on first use; until they are ready (and for anything they do
not cover: video assets, YUV output, a stream whose frame size is not known yet or changes, a
full arena, a worker that died) the decoder decodes in-process as before, with identical frames.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Final

from rayform.decoders._shared_frames import SharedFramePool
from rayform.decoders._video_plan import PacketRun
from rayform.decoders._video_runs import RunDecoder, RunFailedError, check_run_start
from rayform.media._video_frames import PacketColumn
from rayform.media._video_session import DecoderSession, SessionCache
from rayform.media._video_worker import READY, STOP, TASKS, Result, Task

LOG: Final = logging.getLogger("rayform.decoders.video")
_WORKER_MODULE: Final = "rayform.media._video_worker"


class WorkerDiedError(RuntimeError):
    """A decode worker process exited or its pipe broke; the call is decoded in-process."""


class _Worker:
    """One worker process and the thread of this process that talks to it (one message at a
    time, in submission order)."""

    def __init__(self, index: int, arena: SharedFramePool) -> None:
        self.index = index
        parent, child = socket.socketpair()
        env = dict(os.environ)
        # The worker imports rayform from where this process does (a source checkout too).
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", _WORKER_MODULE, str(child.fileno()), str(arena.fd),
             str(arena.arena_bytes)],
            pass_fds=(child.fileno(), arena.fd), env=env, stdin=subprocess.DEVNULL)
        child.close()
        self.conn = Connection(parent.detach())
        self.ready = threading.Event()
        self.dead = False
        self.pending_work = 0  # packets submitted and not yet answered (for load balancing)
        self._queue: queue.SimpleQueue[tuple[Any, Future[list[Result]]] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"rayform-video-proc_{index}",
                                        daemon=True)
        self._thread.start()

    def submit(self, message: Any) -> Future[list[Result]]:
        future: Future[list[Result]] = Future()
        if self.dead:
            future.set_exception(WorkerDiedError(f"video decode worker {self.index} died"))
        else:
            self._queue.put((message, future))
        return future

    def _serve(self) -> None:
        try:
            if self.conn.recv() != (READY,):
                raise WorkerDiedError(f"video decode worker {self.index} did not start")
            self.ready.set()
            while (item := self._queue.get()) is not None:
                message, future = item
                self.conn.send(message)
                future.set_result(self.conn.recv())
        except (EOFError, OSError, WorkerDiedError) as err:
            self._die(err)
        except BaseException as err:  # a bug here must not hang a caller: fail its future
            self._die(err)
            raise

    def _die(self, err: BaseException) -> None:
        self.dead = True
        self.ready.set()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[1].set_exception(WorkerDiedError(f"video decode worker {self.index}: {err}"))

    def stop(self) -> None:
        if not self.dead:
            self._queue.put(None)
            with contextlib.suppress(OSError):
                self.conn.send((STOP,))
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.conn.close()


class DecodeProcesses:
    """A process's video decode workers and their shared frame memory.

    Args:
        count: worker processes.
    """

    def __init__(self, count: int) -> None:
        self.pool = SharedFramePool()
        self.pid = os.getpid()
        self._workers: list[_Worker] = []
        try:
            for i in range(count):
                self._workers.append(_Worker(i, self.pool))
        except BaseException:
            self.shutdown()
            raise
        self._slot_ids = itertools.count(1)
        self._free: list[list[int]] = [[] for _ in range(count)]
        self._lock = threading.Lock()
        self._warned = False

    @property
    def count(self) -> int:
        return len(self._workers)

    @property
    def worker_pids(self) -> list[int]:
        """The worker processes' ids (for accounting their CPU time)."""
        return [w.process.pid for w in self._workers]

    @property
    def usable(self) -> bool:
        """Every worker started and none died."""
        return all(w.ready.is_set() and not w.dead for w in self._workers)

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the workers to start; whether they are usable."""
        for worker in self._workers:
            worker.ready.wait(timeout_s)
        return self.usable

    def new_slot(self) -> int:
        return next(self._slot_ids)

    def free_slot(self, worker: int, slot: int) -> None:
        """Close ``slot``'s decoder in ``worker`` (told with the worker's next message)."""
        with self._lock:
            self._free[worker].append(slot)

    def least_loaded(self, extra: Sequence[int]) -> int:
        """The worker with the least work pending plus ``extra`` (this call's, per worker)."""
        return min(range(self.count),
                   key=lambda i: self._workers[i].pending_work + extra[i])

    def submit(self, worker: int, tasks: list[Task], work: int) -> Future[list[Result]]:
        with self._lock:
            free, self._free[worker] = self._free[worker], []
            self._workers[worker].pending_work += work
        return self._workers[worker].submit((TASKS, free, tasks))

    def done(self, worker: int, work: int) -> None:
        with self._lock:
            self._workers[worker].pending_work -= work

    def warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            LOG.warning("%s; video frames are decoded in-process from now on", message)

    def shutdown(self) -> None:
        for worker in self._workers:
            worker.stop()


_PROCESSES: dict[int, DecodeProcesses] = {}
_PROCESSES_LOCK = threading.Lock()


def decode_processes(count: int) -> DecodeProcesses:
    """This process's decode workers (started on first call, in the background)."""
    pid = os.getpid()
    with _PROCESSES_LOCK:
        current = _PROCESSES.get(pid)
        if current is None:
            _PROCESSES.clear()  # forked: the parent's workers are not ours
            current = _PROCESSES[pid] = DecodeProcesses(count)
        return current


@atexit.register
def _stop_processes() -> None:
    current = _PROCESSES.pop(os.getpid(), None)
    if current is not None:
        current.shutdown()


@dataclass(slots=True)
class _Planned:
    """A run on its way to a worker: its session (checked out), the rows its pts stand for."""

    run: PacketRun
    session: DecoderSession
    resumed: bool
    rows_of: dict[int, int]  # pts -> batch row
    feed: list[tuple[int, bytes]]  # (row, packet) sent, in order
    base: int  # pts of row 0


class ProcessRunDecoder:
    """One :class:`VideoFrameDecoder`'s packet runs decoded by the process's workers.

    Sessions are this decoder's (a ``DecoderSession`` whose ``context`` is ``(worker, slot)``);
    a session the cache drops has its worker's decoder closed.

    Args:
        codec: the packet streams' codec.
        thread_count: FFmpeg threads per decoder.
        max_sessions: open sessions kept between calls.
        processes: the worker count.
    """

    def __init__(self, *, codec: str, thread_count: int, max_sessions: int,
                 processes: int) -> None:
        self.codec = codec
        self.thread_count = thread_count
        self.processes = decode_processes(processes)
        self.sessions = SessionCache(max_sessions, on_evict=self._close)

    def _close(self, session: DecoderSession) -> None:
        worker, slot = session.context
        self.processes.free_slot(worker, slot)

    def decode(self, jobs: list[list[PacketRun]], *, packets: PacketColumn, slab: Any,
               failures: list[tuple[str, str]]) -> tuple[int, int] | None:
        """Decode ``jobs`` into ``slab`` (already holding its shared banks); ``(sessions resumed,
        sessions started)``, or ``None`` when this call must be decoded in-process instead (a
        worker died, or a frame of another size came out; nothing was reported)."""
        procs = self.processes
        load = [0] * procs.count
        # Per worker, the call's jobs in order: one message each (a worker runs its tasks in
        # order, so every job's runs still follow each other), not one per job: each message
        # costs a round trip, a wake-up of the worker and of this process's thread serving it.
        planned_by: list[list[_Planned]] = [[] for _ in range(procs.count)]
        tasks_by: list[list[Task]] = [[] for _ in range(procs.count)]
        sent: list[tuple[int, list[_Planned], Future[list[Result]], int]] = []
        try:
            for job in jobs:
                planned: list[_Planned] = []
                worker: int | None = None
                for run in job:
                    try:
                        plan = self._plan(run, packets, worker)
                    except RunFailedError as failure:
                        failures.append((failure.kind, f"segment {run.segment_id!r}: {failure}"))
                        continue
                    if plan.resumed:
                        worker = plan.session.context[0]
                    planned.append(plan)
                if not planned:
                    continue
                if worker is None:
                    worker = procs.least_loaded(load)
                tasks_by[worker].extend(self._task(p, worker, slab) for p in planned)
                planned_by[worker].extend(planned)
                load[worker] += sum(len(p.feed) for p in planned)
            for worker, planned in enumerate(planned_by):
                if planned:
                    work = load[worker]
                    sent.append((worker, planned, procs.submit(worker, tasks_by[worker], work),
                                 work))
        except BaseException:
            self._abandon(sent)
            for worker, planned in enumerate(planned_by):  # planned, never sent
                if not any(s[0] == worker for s in sent):
                    for plan in planned:
                        self._close(plan.session)
            raise
        return self._collect(sent, packets, slab, failures)

    def _plan(self, run: PacketRun, packets: PacketColumn, worker: int | None) -> _Planned:
        """Check out (or open) the run's session; one held by another worker than ``worker``
        (the job's, when set) is closed and the run starts anew."""
        anchor = packets.packet(run.start)
        key = (run.segment_id, len(anchor), hash(anchor))
        session = self.sessions.checkout(key)
        if session is not None and (
                not RunDecoder._can_resume(session, run, packets, anchor)
                or (worker is not None and session.context[0] != worker)):
            self._close(session)
            session = None
        resumed = session is not None
        if session is None:
            check_run_start(run, anchor, self.codec)
            session = DecoderSession(key=key, anchor=anchor, stream=(run.segment_id, self.codec),
                                     context=(-1, self.processes.new_slot()))
        base = session.pts_base - run.start
        first = run.start + session.next_position
        feed = [] if first > run.end else [(row, bytes(data))
                                          for row, data in packets.feed(first, run.end)]
        return _Planned(run=run, session=session, resumed=resumed,
                        rows_of={base + row: row for row in run.wanted_rows}, feed=feed,
                        base=base)

    def _task(self, plan: _Planned, worker: int, slab: Any) -> Task:
        session = plan.session
        session.context = (worker, session.context[1])
        feed = [(plan.base + row, data) for row, data in plan.feed]
        wanted = {pts: slab.offset_of(row) for pts, row in plan.rows_of.items()}
        return (session.context[1], self.codec, not plan.resumed, self.thread_count, feed,
                wanted, slab.size)

    def _collect(self, sent: list[tuple[int, list[_Planned], Future[list[Result]], int]],
                 packets: PacketColumn, slab: Any, failures: list[tuple[str, str]]
                 ) -> tuple[int, int] | None:
        resumed = started = 0
        fallback = False
        for worker, planned, future, work in sent:
            try:
                results = future.result()
            except WorkerDiedError as err:
                self.processes.warn_once(str(err))
                fallback = True
                for plan in planned:
                    self._close(plan.session)
                continue
            finally:
                self.processes.done(worker, work)
            for plan, result in zip(planned, results, strict=True):
                outcome = self._settle(plan, result, packets, slab, failures)
                if outcome is None:
                    fallback = True
                elif outcome:
                    resumed += 1
                else:
                    started += 1
        return None if fallback else (resumed, started)

    def _settle(self, plan: _Planned, result: Result, packets: PacketColumn, slab: Any,
                failures: list[tuple[str, str]]) -> bool | None:
        """Record one run's result; whether it resumed a session, ``None``: decode in-process."""
        captured, fed, last_pts, keyframe_pts, alive, error = result
        run, session = plan.run, plan.session
        if not 0 <= fed <= len(plan.feed) or any(p not in plan.rows_of for p in captured):
            self._close(session)  # not what was asked: trust nothing of it, decode here
            return None
        for pts in captured:
            slab.mark(plan.rows_of[pts])
        if error is not None and error[0] == "size":
            self._close(session)
            return None
        if error is not None:
            self._close(session)
            failures.append(("decode", f"segment {run.segment_id!r}: {error[1]}"))
            return plan.resumed
        session.last_pts = last_pts
        if fed:
            last_row = plan.feed[fed - 1][0]
            session.next_position = last_row - run.start + 1
            session.last_fed = packets.packet(last_row)
        missing = sorted(plan.rows_of[p] for p in set(plan.rows_of) - set(captured))
        if not alive:
            self._close(session)
            if missing:
                failures.append(("decode", f"segment {run.segment_id!r}: rows {missing} "
                                           "decoded to no frame"))
            return plan.resumed
        RunDecoder._rekey(session, run, packets, {p - session.pts_base for p in keyframe_pts})
        self.sessions.checkin(session)
        return plan.resumed

    def _abandon(self, sent: list[tuple[int, list[_Planned], Future[list[Result]], int]]
                 ) -> None:
        for worker, planned, future, work in sent:
            try:
                future.result()
            except WorkerDiedError:
                pass
            finally:
                self.processes.done(worker, work)
            for plan in planned:
                self._close(plan.session)
