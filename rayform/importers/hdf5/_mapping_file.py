"""HDF5 mapping files: a declared layout (YAML or JSON) so that any lab's HDF5 registers.

Validated strictly with pydantic; an error names the file and the key. The format is documented
in docs/formats.md ("HDF5 mapping files")::

    format: rayform-hdf5-mapping
    format_version: 1
    episodes: {groups: "/episodes/*"}      # or {ends: "/meta/episode_ends"}, or {axis: 0};
                                          # left out: the whole file is one episode
    rate_hz: 30                           # for datasets without timestamps
    timestamp: {dataset: t, unit: s}      # or a timestamps dataset (kind duration / timestamp)
    task_attribute: instruction           # the episode group's (or file's) attribute with the task
    properties: {robot: franka}
    datasets:
      obs/qpos: {entity: /joints/position}
      obs/front: {entity: /cam/front, kind: image, rate_hz: 15}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rayform.errors import ConfigError
from rayform.importers.hdf5._columns import Kind
from rayform.recording._names import validate_entity_path

MAPPING_FORMAT: Final = "rayform-hdf5-mapping"
MAPPING_VERSION: Final = 1
UNIT_NS: Final = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


def _rate(value: float | None) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ValueError(f"a rate must be finite and > 0 Hz, got {value!r}")
    return value


def _int_as_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


# A rate in Hz: an int is taken as a float (strict parsing would refuse it), finite and > 0.
RateHz = Annotated[float | None, BeforeValidator(_int_as_float), AfterValidator(_rate)]


class TimestampSpec(BaseModel):
    """A dataset of per-row times: ``unit`` per value; ``duration`` (since the episode's or the
    device's start) or ``timestamp`` (since the Unix epoch)."""

    model_config = _STRICT
    dataset: str = Field(min_length=1)
    unit: Literal["s", "ms", "us", "ns"] = "s"
    kind: Literal["duration", "timestamp"] = "duration"


class EpisodeSpec(BaseModel):
    """Where the episodes are: at most one of ``groups``, ``ends`` and ``axis``."""

    model_config = _STRICT
    groups: str | None = Field(default=None, min_length=1)
    ends: str | None = Field(default=None, min_length=1)
    axis: Literal[0, 1] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> EpisodeSpec:
        given = [n for n in ("groups", "ends", "axis") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of groups, ends and axis, not {given}")
        return self


class DatasetSpec(BaseModel):
    """One dataset: its entity, its kind, and (overriding the file's) its rate or timestamps."""

    model_config = _STRICT
    entity: str
    kind: Kind = "auto"
    rate_hz: RateHz = None
    timestamp: TimestampSpec | None = None
    lengths: str | None = Field(default=None, min_length=1)

    @field_validator("entity")
    @classmethod
    def _entity(cls, value: str) -> str:
        try:
            validate_entity_path(value)
        except Exception as err:  # InvalidNameError / ConfigError with its own message
            raise ValueError(str(err)) from err
        return value


class Hdf5Mapping(BaseModel):
    """A declared HDF5 layout (see the module docstring)."""

    model_config = _STRICT
    format: Literal["rayform-hdf5-mapping"]
    format_version: Literal[1]
    episodes: EpisodeSpec = EpisodeSpec()
    rate_hz: RateHz = None
    timestamp: TimestampSpec | None = None
    task_attribute: str | None = Field(default=None, min_length=1)
    properties: dict[str, str | int | float | bool] = Field(default_factory=dict)
    datasets: dict[str, DatasetSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_timeline_kind(self) -> Hdf5Mapping:
        kinds = {self.time_kind(spec) for spec in self.datasets.values()} - {None}
        if len(kinds) > 1:
            raise ValueError("the datasets' times mix durations (rates, duration timestamps) and "
                             "timestamps since the epoch; the 'timestamp' timeline takes one kind")
        entities = [spec.entity for spec in self.datasets.values()]
        twice = sorted({e for e in entities if entities.count(e) > 1})
        if twice:
            raise ValueError(f"entities {twice} are given to several datasets")
        return self

    def timestamp_of(self, spec: DatasetSpec) -> TimestampSpec | None:
        """The timestamps of a dataset (its own, else the file's unless it has its own rate)."""
        if spec.timestamp is not None or spec.rate_hz is not None:
            return spec.timestamp
        return self.timestamp

    def rate_of(self, spec: DatasetSpec, given: float | None) -> float | None:
        """A dataset's rate: its own, else ``given`` (``--fps``), else the file's."""
        return spec.rate_hz or given or self.rate_hz

    def time_kind(self, spec: DatasetSpec) -> str | None:
        stamp = self.timestamp_of(spec)
        if stamp is not None:
            return stamp.kind
        return "duration" if (spec.rate_hz or self.rate_hz) is not None else None


def load_mapping(path: Path) -> Hdf5Mapping:
    """Read and validate a mapping file (``.yaml`` / ``.yml`` with PyYAML, else JSON).

    Raises:
        ConfigError: unreadable, not YAML/JSON, or not a valid mapping; the message names the
            file and the key.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"HDF5 mapping file {path}: cannot be read ({err})") from err
    payload = _parse(path, text)
    if not isinstance(payload, dict):
        raise ConfigError(f"HDF5 mapping file {path}: must be a mapping (an object) at the top, "
                          f"got {type(payload).__name__}")
    if payload.get("format") != MAPPING_FORMAT:
        raise ConfigError(f"HDF5 mapping file {path}: needs format: {MAPPING_FORMAT} "
                          f"(got {payload.get('format')!r})")
    if payload.get("format_version") != MAPPING_VERSION:
        raise ConfigError(f"HDF5 mapping file {path}: format_version "
                          f"{payload.get('format_version')!r} is not supported (this rayform "
                          f"reads {MAPPING_VERSION})")
    try:
        return Hdf5Mapping.model_validate(payload)
    except ValidationError as err:
        problems = "; ".join(
            f"key {'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
            for e in err.errors()[:5])
        raise ConfigError(f"HDF5 mapping file {path}: {problems}") from err


def _parse(path: Path, text: str) -> Any:
    if path.suffix.lower() in (".yaml", ".yml"):
        from rayform._optional import require

        yaml: Any = require("yaml", extra="hdf5", feature="Reading YAML mapping files")
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"HDF5 mapping file {path}: not valid YAML ({err})") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"HDF5 mapping file {path}: not valid JSON ({err}); name YAML files "
                          "*.yaml or *.yml") from err
