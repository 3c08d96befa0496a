"""Limits on user SQL: size before planning, a memory pool for every context, an optional deadline.

DataFusion plans and evaluates expressions recursively, so one long flat chain
(``SELECT 1 + 1 + …`` with 10,000 terms, or a ``WHERE`` of 10,000 ``OR``) overflows the native
stack and kills the interpreter with SIGSEGV, and its planning time grows faster than linearly
long before that. The bound here is cheap and conservative: outside string literals and quoted
names, the number of operators (``AND``, ``OR``, ``NOT``, arithmetic, comparison and
concatenation symbols) and the query's length in bytes are counted before DataFusion sees the
text. Lists (``IN (…)``, ``SELECT a, b, …``) do not nest and are not bounded beyond the length.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from rayform.errors import ConfigError, QueryError

if TYPE_CHECKING:
    from datafusion import SessionContext

MAX_QUERY_BYTES = 1 << 20
MAX_QUERY_OPERATORS = 1000
MEMORY_ENV = "RAYFORM_SQL_MEMORY_BYTES"
_DEFAULT_MEMORY_CAP = 4 << 30

# String literals ('it''s'), quoted names ("a""b") and comments are dropped before counting.
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)
_OPERATOR = re.compile(r"\b(?:AND|OR|NOT|LIKE|ILIKE|BETWEEN|IS)\b|[-+*/%^|&<>=!~:]+",
                       re.IGNORECASE)


def check_query_size(query: str, *, what: str) -> None:
    """Refuse SQL too large to plan safely (``what`` names it in the error).

    Raises:
        QueryError: the query is longer than :data:`MAX_QUERY_BYTES` or has more than
            :data:`MAX_QUERY_OPERATORS` operators.
    """
    size = len(query.encode("utf-8", errors="surrogatepass"))
    if size > MAX_QUERY_BYTES:
        raise QueryError(f"{what[:200]}… is {size} bytes; the limit on one query is "
                         f"{MAX_QUERY_BYTES} bytes (MAX_QUERY_BYTES): pass values as "
                         "param_values or filter in several queries")
    operators = len(_OPERATOR.findall(_QUOTED.sub(" ", query)))
    if operators > MAX_QUERY_OPERATORS:
        raise QueryError(
            f"{what[:200]}… has {operators} operators; the limit on one query is "
            f"{MAX_QUERY_OPERATORS} (MAX_QUERY_OPERATORS), because DataFusion plans long "
            "chains recursively: write `x IN (…)` instead of a chain of `x = … OR …`, or "
            "split the query")


def memory_limit_bytes() -> int:
    """The memory pool of each SQL context: ``$RAYFORM_SQL_MEMORY_BYTES``, else a default.

    The default is half the machine's memory, at most 4 GiB.

    Raises:
        ConfigError: the variable is not a positive integer.
    """
    raw = os.environ.get(MEMORY_ENV)
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise ConfigError(f"{MEMORY_ENV}={raw!r}: expected a positive number of bytes, "
                              "e.g. 2147483648")
        return value
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return _DEFAULT_MEMORY_CAP
    return max(1 << 28, min(_DEFAULT_MEMORY_CAP, physical // 2))


def new_session_context() -> SessionContext:
    """A DataFusion ``SessionContext`` with a fair spill pool of :func:`memory_limit_bytes`.

    Operators that track memory (sorts, joins, aggregations, repartitions) fail with
    "Resources exhausted" beyond it, which :mod:`rayform.catalog._query_errors` reports as
    :class:`QueryError`, instead of growing until the process is killed.
    """
    from datafusion import RuntimeEnvBuilder, SessionConfig
    from datafusion import SessionContext as Context

    runtime = RuntimeEnvBuilder().with_fair_spill_pool(memory_limit_bytes())
    # information_schema on, as a plain SessionContext() has it (SELECT * FROM
    # information_schema.tables lists the datasets' tables).
    return Context(SessionConfig().with_information_schema(True), runtime)


class _DeadlineExceeded(BaseException):
    """Raised by the alarm handler inside DataFusion's signal check; never escapes a deadline."""


def check_timeout(timeout_s: float | None) -> None:
    """Validate a ``timeout_s`` argument.

    Raises:
        ConfigError: not a positive finite number, or set outside the main thread (the deadline
            interrupts DataFusion through a signal, which only the main thread receives).
    """
    if timeout_s is None:
        return
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not (
            0 < timeout_s < 1e9):
        raise ConfigError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("timeout_s works on the main thread only (DataFusion is interrupted "
                          "through SIGALRM); run the query there or leave timeout_s unset")


@contextmanager
def deadline(timeout_s: float | None, *, what: str) -> Iterator[None]:
    """Interrupt DataFusion after ``timeout_s`` seconds with :class:`QueryError`.

    DataFusion checks Python's signals while it waits for a result; the alarm's handler raises
    there, which cancels the running plan.
    """
    if timeout_s is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    armed = [True]

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if armed[0]:
            raise _DeadlineExceeded

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    except _DeadlineExceeded:
        raise QueryError(f"{what[:200]} ran past its timeout_s={timeout_s} s and was "
                         "cancelled; add a WHERE or LIMIT, or raise timeout_s") from None
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["MAX_QUERY_BYTES", "MAX_QUERY_OPERATORS", "MEMORY_ENV", "check_query_size",
           "check_timeout", "deadline", "memory_limit_bytes", "new_session_context"]
