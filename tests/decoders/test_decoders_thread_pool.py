"""ThreadPool.drain: the caller and the pool threads share one queue of jobs; default thread counts."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from rayform.decoders import _thread_pool as thread_pool
from rayform.decoders._thread_pool import ThreadPool


def test_drain_runs_every_job_once_with_the_caller_taking_part() -> None:
    pool = ThreadPool(3, name="test-drain", helpers=True)
    done: list[int] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def job(i: int) -> None:
        time.sleep(0.002)
        with lock:
            done.append(i)
            threads.add(threading.current_thread().name)

    pool.drain(job, list(range(40)))
    assert sorted(done) == list(range(40))
    assert threading.current_thread().name in threads
    assert len(threads) == 3
    pool.shutdown()


def test_drain_hands_a_slow_threads_share_to_the_others() -> None:
    # The first job a thread takes is slow (a thread the machine preempts): the other thread
    # takes the remaining jobs instead of waiting with its own fixed half.
    pool = ThreadPool(2, name="test-drain", helpers=True)
    ran_by: dict[int, str] = {}
    release = threading.Event()

    def job(i: int) -> None:
        ran_by[i] = threading.current_thread().name
        if i == 0:
            release.wait(timeout=10)
        elif len(ran_by) == 8:
            release.set()

    pool.drain(job, list(range(8)))
    slow = ran_by[0]
    assert [i for i, name in ran_by.items() if name == slow] == [0]
    pool.shutdown()


def test_drain_stops_taking_jobs_after_a_failure_and_reraises_it() -> None:
    pool = ThreadPool(2, name="test-drain", helpers=True)
    started: list[int] = []

    def job(i: int) -> None:
        started.append(i)
        if i == 1:
            raise ValueError(f"job {i} failed")
        time.sleep(0.01)

    with pytest.raises(ValueError, match="job 1 failed"):
        pool.drain(job, list(range(50)))
    assert len(started) < 50
    pool.shutdown()


def test_drain_with_one_thread_runs_in_order_in_the_caller() -> None:
    pool = ThreadPool(1, name="test-drain", helpers=True)
    seen: list[tuple[int, str]] = []
    pool.drain(lambda i: seen.append((i, threading.current_thread().name)), [0, 1, 2])
    assert seen == [(i, threading.current_thread().name) for i in range(3)]


@pytest.mark.parametrize(("cpus", "workers", "local_ranks", "expected"), [
    (16, None, None, 8),  # the main process: every CPU, at most 8
    (2, None, None, 2),
    (2, 2, None, 1),  # 2 workers on 2 CPUs: one thread each
    (16, 2, None, 8),  # few workers on many CPUs: the CPUs shared out, not 1 each
    (16, 4, None, 4),
    (16, 16, None, 1),
    (16, 32, None, 1),  # never below 1
    (16, 2, "2", 4),  # two ranks on this machine share its CPUs too
    (16, 2, "bad", 8),
])
def test_default_decode_threads_share_the_cpus_among_workers_and_ranks(
        monkeypatch: pytest.MonkeyPatch, cpus: int, workers: int | None,
        local_ranks: str | None, expected: int) -> None:
    monkeypatch.setattr(thread_pool, "available_cpus", lambda: cpus)
    info = None if workers is None else SimpleNamespace(id=0, num_workers=workers)
    monkeypatch.setattr(thread_pool, "get_worker_info", lambda: info)
    if local_ranks is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_ranks)
    assert thread_pool.default_decode_threads() == expected
    assert ThreadPool(None, name="test-default").threads == expected
