"""Skipping incomplete samples in a stream: warn once per field, give up after too many in a row."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Mapping

from rayform.errors import ConfigError

DEFAULT_MAX_CONSECUTIVE_SKIPPED = 1000


def check_max_skipped(value: int | None) -> int | None:
    """Validate ``max_consecutive_skipped_samples`` (``None``: no limit).

    Raises:
        ConfigError: negative or not an integer.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"max_consecutive_skipped_samples must be an integer >= 0 or None, got {value!r}"
        )
    return value


class SkipCounter:
    """Counts skipped samples of one stream.

    Args:
        limit: the most consecutive skips allowed (``None``: unlimited).
    """

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._consecutive = 0
        self._total = 0
        self._per_field: Counter[str] = Counter()
        self._warned: set[str] = set()

    @property
    def total(self) -> int:
        return self._total

    def skip(self, missing_keys: Iterable[str]) -> None:
        """Record a skipped sample whose ``missing_keys`` had no value.

        Raises:
            RuntimeError: more than ``limit`` consecutive samples were skipped.
        """
        keys = list(missing_keys)
        self._consecutive += 1
        self._total += 1
        self._per_field.update(keys)
        self._warn(keys)
        self._check(self._consecutive)

    def skip_runs(self, per_field: Mapping[str, int], total: int, longest_run: int) -> None:
        """Record skips counted in bulk (``longest_run``: the most in a row among them).

        Raises:
            RuntimeError: ``longest_run`` exceeds the limit.
        """
        self._total += total
        self._per_field.update({k: n for k, n in per_field.items() if n})
        self._warn([k for k, n in per_field.items() if n])
        self._check(longest_run)

    def _warn(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(
                    f"Skipping samples where field {key!r} has no value (no row at or before the "
                    "sample in its segment, no prior keyframe, or an undecodable blob); further "
                    "skips of this field are not reported",
                    RuntimeWarning,
                    stacklevel=5,
                )

    def _check(self, consecutive: int) -> None:
        if self._limit is not None and consecutive > self._limit:
            counts = ", ".join(f"{k}={n}" for k, n in sorted(self._per_field.items()))
            raise RuntimeError(
                f"Exceeded max_consecutive_skipped_samples={self._limit}: {consecutive} "
                f"samples in a row had missing fields ({self._total} skipped in total; missing "
                f"fields: {counts}); check the field paths and index timeline, or raise the limit"
            )

    def keep(self) -> None:
        """Record a complete sample (resets the consecutive count)."""
        self._consecutive = 0

