"""What a dataset does with data that exists but cannot be decoded: raise, skip or ``None``.

Missing data (no row at or before a sample, a null row) is not a failure: it stays ``None`` as in
Rerun. A *failure* is data that is there and cannot be decoded — a corrupt JPEG, an undecodable
video frame — reported by the decoder (:meth:`rayform.decoders.FieldBatch.report_failure`):

* ``"raise"`` (the default): :class:`~rayform.errors.DecodeError` naming the field, its entity,
  the segment and the index value;
* ``"skip"``: a ``RuntimeWarning`` (once per field), and the sample is dropped — from a map
  dataset's batch, and from an iterable dataset's stream (which skips samples with a ``None``);
* ``"none"``: a ``RuntimeWarning`` (once per field), and the value is ``None``.

Network, offline, disk and catalog errors are never decode failures: they always propagate.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from rayform.decoders import DecodeRequest
from rayform.errors import ConfigError, DecodeError
from rayform.recording._columns import entity_of

DecodeErrorPolicy = Literal["raise", "skip", "none"]
DECODE_ERROR_POLICIES: Final = ("raise", "skip", "none")


def check_decode_policy(value: str) -> DecodeErrorPolicy:
    """Validate an ``on_decode_error`` argument.

    Raises:
        ConfigError: not one of ``"raise"``, ``"skip"``, ``"none"``.
    """
    if value not in DECODE_ERROR_POLICIES:
        raise ConfigError(f"on_decode_error must be 'raise', 'skip' or 'none', got {value!r}")
    return value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """One sample's field that could not be decoded."""

    key: str
    path: str
    sample_position: int
    segment_id: str
    index_value: object
    reason: str


class FailureLog:
    """The failures reported during one decode call (decoders report from several threads)."""

    def __init__(self) -> None:
        self.failures: list[DecodeFailure] = []
        self._lock = threading.Lock()

    def listener(self, key: str, path: str) -> Callable[[DecodeRequest, str], None]:
        """The ``FieldBatch.on_failure`` of field ``key`` (column ``path``)."""

        def report(request: DecodeRequest, reason: str) -> None:
            failure = DecodeFailure(key=key, path=path, sample_position=request.sample_position,
                                    segment_id=request.segment_id,
                                    index_value=request.index_value, reason=reason)
            with self._lock:
                self.failures.append(failure)

        return report


def apply_decode_policy(failures: list[DecodeFailure], policy: DecodeErrorPolicy, *,
                        dataset: str, index: str, warned: set[str]) -> set[int]:
    """Raise, or warn (once per field key in ``warned``); the failed sample positions.

    Raises:
        DecodeError: ``policy`` is ``"raise"`` and something failed (naming the first failure).
    """
    if not failures:
        return set()
    first = min(failures, key=lambda f: f.sample_position)
    where = (f"dataset {dataset!r}: field {first.key!r} (entity {entity_of(first.path)!r}, column "
             f"{first.path!r}) of segment {first.segment_id!r} at {index} = "
             f"{first.index_value!r} could not be decoded: {first.reason}")
    if policy == "raise":
        raise DecodeError(
            f"{where}; repair or unregister the segment, or pass on_decode_error='skip' (drop "
            "such samples with a warning) or 'none' (keep None)"
        )
    for failure in failures:
        if failure.key in warned:
            continue
        warned.add(failure.key)
        action = "dropped" if policy == "skip" else "None"
        warnings.warn(f"{where}; such samples are {action} (on_decode_error={policy!r}; further "
                      f"failures of field {failure.key!r} are not reported)",
                      RuntimeWarning, stacklevel=4)
        break
    return {f.sample_position for f in failures}
