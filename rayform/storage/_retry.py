"""Retries with exponential backoff for remote catalog requests, and the error that asks for one.

A transport raises :class:`TransientError` for failures worth another try (a dropped connection, a
truncated body, a timeout, HTTP 5xx / 429); anything else propagates at once. After the last
attempt the failure becomes a :class:`rayform.errors.RemoteError` naming what was being done.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from rayform.errors import ConfigError, RemoteError

_T = TypeVar("_T")

RETRIES_ENV = "RAYFORM_REMOTE_ATTEMPTS"
BACKOFF_ENV = "RAYFORM_REMOTE_BACKOFF_S"
TIMEOUT_ENV = "RAYFORM_REMOTE_TIMEOUT_S"


class TransientError(Exception):
    """A remote failure that another attempt may not hit (raised by transports only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How remote requests are retried.

    Attributes:
        max_attempts: attempts per request, the first included (``>= 1``).
        backoff_s: sleep before the second attempt; doubles each time, with jitter.
        max_backoff_s: cap of one sleep.
        timeout_s: socket timeout of one attempt (connect and each read).
    """

    max_attempts: int = 5
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts!r}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError(
                f"RetryPolicy backoff must be >= 0, got backoff_s={self.backoff_s!r}, "
                f"max_backoff_s={self.max_backoff_s!r}"
            )
        if self.timeout_s <= 0:
            raise ConfigError(f"RetryPolicy.timeout_s must be > 0, got {self.timeout_s!r}")

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """The default policy, overridden by ``RAYFORM_REMOTE_ATTEMPTS``, ``…_BACKOFF_S``, ``…_TIMEOUT_S``."""
        default = cls()
        try:
            return cls(
                max_attempts=int(os.environ.get(RETRIES_ENV, default.max_attempts)),
                backoff_s=float(os.environ.get(BACKOFF_ENV, default.backoff_s)),
                timeout_s=float(os.environ.get(TIMEOUT_ENV, default.timeout_s)),
            )
        except ValueError as err:
            raise ConfigError(
                f"bad remote retry setting in {RETRIES_ENV}/{BACKOFF_ENV}/{TIMEOUT_ENV}: {err}"
            ) from err

    def delay_s(self, attempt: int) -> float:
        """Sleep after failed attempt number ``attempt`` (1-based), with ±50 % jitter."""
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return float(base * random.uniform(0.5, 1.5))

    def run(self, fn: Callable[[], _T], *, what: str) -> _T:
        """Call ``fn`` until it does not raise :class:`TransientError` or attempts run out.

        Raises:
            RemoteError: every attempt failed transiently; the message names ``what``, the number
                of attempts and the last failure.
        """
        for attempt in range(1, self.max_attempts + 1):
            try:
                return fn()
            except TransientError as err:
                if attempt == self.max_attempts:
                    raise RemoteError(
                        f"{what} failed after {attempt} attempt(s): {err}; check the network and "
                        f"the server, or raise {RETRIES_ENV} (now {self.max_attempts})"
                    ) from err
                time.sleep(self.delay_s(attempt))
        raise AssertionError("unreachable")  # pragma: no cover
