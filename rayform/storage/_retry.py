"""Retries with exponential backoff for remote catalog requests, and the error that asks for one.

A transport raises :class:`TransientError` for failures worth another try (a dropped connection, a
truncated body, a timeout, HTTP 5xx / 429); anything else propagates at once — in particular a
failure to write locally (a full cache disk) is never transient. After the last attempt, or once
the operation's total deadline has passed, the failure becomes a
:class:`rayform.errors.RemoteError` naming what was being done.

Time limits (all configurable through the environment):

* ``connect_timeout_s`` (``RAYFORM_REMOTE_CONNECT_TIMEOUT_S``, 10 s): opening a connection;
* ``timeout_s`` (``RAYFORM_REMOTE_TIMEOUT_S``, 30 s): the longest wait for the next bytes;
* ``deadline_s`` (``RAYFORM_REMOTE_DEADLINE_S``, 60 s): the total time one operation may spend
  waiting for a server across all its attempts. No attempt starts after it, and over HTTPS no
  attempt waits past it for a response; a download that is making progress is not cut.
  A server that accepts connections and never answers therefore fails an HTTPS operation after
  ``deadline_s``, and an S3 one after at most ``deadline_s + timeout_s``.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from rayform.errors import ConfigError, RemoteError

_T = TypeVar("_T")

RETRIES_ENV = "RAYFORM_REMOTE_ATTEMPTS"
BACKOFF_ENV = "RAYFORM_REMOTE_BACKOFF_S"
TIMEOUT_ENV = "RAYFORM_REMOTE_TIMEOUT_S"
CONNECT_TIMEOUT_ENV = "RAYFORM_REMOTE_CONNECT_TIMEOUT_S"
DEADLINE_ENV = "RAYFORM_REMOTE_DEADLINE_S"
MIN_WAIT_S = 0.05

_running = threading.local()  # the deadline (time.monotonic) of the operation this thread runs


def response_timeout_s(timeout_s: float) -> float:
    """How long the current attempt may wait for a response: ``timeout_s``, capped by what is
    left of the running operation's deadline (at least :data:`MIN_WAIT_S`)."""
    deadline: float | None = getattr(_running, "deadline", None)
    if deadline is None:
        return timeout_s
    return max(MIN_WAIT_S, min(timeout_s, deadline - time.monotonic()))


class TransientError(Exception):
    """A remote failure that another attempt may not hit (raised by transports only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How remote requests are retried.

    Attributes:
        max_attempts: attempts per request, the first included (``>= 1``).
        backoff_s: sleep before the second attempt; doubles each time, with jitter.
        max_backoff_s: cap of one sleep.
        timeout_s: the longest wait for the next bytes of a response (a stall, not a duration).
        connect_timeout_s: the longest wait for a connection to open.
        deadline_s: the total time one operation may spend on attempts and backoff.
    """

    max_attempts: int = 5
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    deadline_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts!r}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError(
                f"RetryPolicy backoff must be >= 0, got backoff_s={self.backoff_s!r}, "
                f"max_backoff_s={self.max_backoff_s!r}"
            )
        for name in ("timeout_s", "connect_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ConfigError(f"RetryPolicy.{name} must be > 0, got {value!r}")

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """The default policy, overridden by ``RAYFORM_REMOTE_ATTEMPTS``, ``…_BACKOFF_S``,
        ``…_TIMEOUT_S``, ``…_CONNECT_TIMEOUT_S`` and ``…_DEADLINE_S``."""
        default = cls()
        names = (RETRIES_ENV, BACKOFF_ENV, TIMEOUT_ENV, CONNECT_TIMEOUT_ENV, DEADLINE_ENV)
        try:
            return cls(
                max_attempts=int(os.environ.get(RETRIES_ENV, default.max_attempts)),
                backoff_s=float(os.environ.get(BACKOFF_ENV, default.backoff_s)),
                timeout_s=float(os.environ.get(TIMEOUT_ENV, default.timeout_s)),
                connect_timeout_s=float(os.environ.get(CONNECT_TIMEOUT_ENV,
                                                       default.connect_timeout_s)),
                deadline_s=float(os.environ.get(DEADLINE_ENV, default.deadline_s)),
            )
        except ValueError as err:
            raise ConfigError(
                f"bad remote retry setting in {'/'.join(names)}: {err}"
            ) from err

    def delay_s(self, attempt: int) -> float:
        """Sleep after failed attempt number ``attempt`` (1-based), with ±50 % jitter."""
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return float(base * random.uniform(0.5, 1.5))

    def run(self, fn: Callable[[], _T], *, what: str) -> _T:
        """Call ``fn`` until it does not raise :class:`TransientError`, attempts run out, or the
        deadline passes (see the module docstring).

        Raises:
            RemoteError: every attempt failed transiently, or the deadline passed; the message
                names ``what``, the attempts, the time spent and the last failure.
        """
        start = time.monotonic()
        deadline = start + self.deadline_s
        outer = getattr(_running, "deadline", None)  # a nested run keeps the outer deadline
        _running.deadline = deadline if outer is None else min(outer, deadline)
        try:
            for attempt in range(1, self.max_attempts + 1):
                try:
                    return fn()
                except TransientError as err:
                    pause = self.delay_s(attempt)
                    spent = time.monotonic() - start
                    if attempt == self.max_attempts:
                        raise RemoteError(
                            f"{what} failed after {attempt} attempt(s) in {spent:.1f} s: {err}; "
                            f"check the network and the server, or raise {RETRIES_ENV} (now "
                            f"{self.max_attempts})"
                        ) from err
                    if time.monotonic() + pause >= _running.deadline:
                        raise RemoteError(
                            f"{what} failed: gave up after {attempt} attempt(s) in {spent:.1f} s, "
                            f"the deadline of one operation ({DEADLINE_ENV}={self.deadline_s:g} "
                            f"s); last failure: {err}; check the network and the server, or "
                            f"raise {DEADLINE_ENV}"
                        ) from err
                    time.sleep(pause)
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            _running.deadline = outer
