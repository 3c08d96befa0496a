"""A TFDS builder's ``features.json``: the flat list of features an RLDS record holds.

TFDS describes features as a tree (``FeaturesDict`` inside ``FeaturesDict``, a ``Dataset``
``sequence`` for ``steps``); a serialized record holds each leaf under its ``/``-joined path
(``steps/observation/image_0``). Leaves under ``steps`` carry one value per step, stacked.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np

from rayform.errors import CorruptRecordingError, FormatError

FEATURES_FILE: Final = "features.json"
STEPS: Final = "steps"
LeafKind = Literal["tensor", "image", "text"]

_DTYPES: Final = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
                  "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
                  "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
                  "uint64": np.uint64, "bool": np.bool_}
_ENCODINGS: Final = ("none", "bytes", "zlib")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeafSpec:
    """One leaf feature: its record key, what it holds, its per-step (or episode) shape."""

    key: str
    kind: LeafKind
    dtype: str
    shape: tuple[int, ...]
    encoding: str = "none"
    image_format: str | None = None

    @property
    def in_steps(self) -> bool:
        return self.key.startswith(STEPS + "/")

    @property
    def name(self) -> str:
        """The key without its ``steps/`` or ``episode_metadata/`` group."""
        return self.key.split("/", 1)[1] if "/" in self.key else self.key

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        return np.dtype(_DTYPES[self.dtype])

    @property
    def size(self) -> int | None:
        """Values per step (or per episode): ``None`` when a dimension is unknown."""
        return None if any(d < 0 for d in self.shape) else math.prod(self.shape)


def read_features(root: Path) -> list[LeafSpec]:
    """The leaves of ``root/features.json``, in file order.

    Raises:
        FormatError: the file is missing, not JSON, or describes a feature rayform cannot map.
    """
    path = root / FEATURES_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise FormatError(f"{root}: an RLDS / TFDS builder folder needs {FEATURES_FILE}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CorruptRecordingError(f"{path}: not valid JSON ({err}); re-download it") from err
    leaves: list[LeafSpec] = []
    _walk(raw, "", leaves, path)
    if not any(leaf.in_steps for leaf in leaves):
        raise FormatError(f"{path}: no '{STEPS}' sequence; an RLDS dataset stores its episodes "
                          "as 'steps' (a plain TFDS dataset is not an episode dataset)")
    return leaves


def _walk(node: Any, prefix: str, out: list[LeafSpec], path: Path) -> None:
    where = prefix or "(root)"
    if not isinstance(node, dict):
        raise FormatError(f"{path}: feature {where!r} is not an object")
    if "featuresDict" in node:
        features = node["featuresDict"].get("features") if isinstance(
            node["featuresDict"], dict) else None
        if not isinstance(features, dict):
            raise FormatError(f"{path}: feature {where!r} has no 'features' object")
        for name, child in features.items():
            if not name or "/" in name:
                raise FormatError(f"{path}: feature name {name!r} under {where!r} is not valid")
            _walk(child, f"{prefix}/{name}" if prefix else name, out, path)
        return
    if "sequence" in node:
        if prefix != STEPS:
            raise FormatError(f"{path}: feature {where!r} is a sequence; RLDS importing supports "
                              f"only the '{STEPS}' sequence of an episode")
        inner = node["sequence"].get("feature") if isinstance(node["sequence"], dict) else None
        _walk(inner, prefix, out, path)
        return
    out.append(_leaf(node, prefix, path))


def _shape(spec: dict[str, Any], key: str, path: Path) -> tuple[int, ...]:
    dims = (spec.get("shape") or {}).get("dimensions") or []
    try:
        return tuple(int(d) for d in dims)
    except (TypeError, ValueError) as err:
        raise FormatError(f"{path}: feature {key!r} has a bad shape {dims!r}") from err


def _leaf(node: dict[str, Any], key: str, path: Path) -> LeafSpec:
    if "text" in node:
        return LeafSpec(key=key, kind="text", dtype="string", shape=())
    if "classLabel" in node:
        return LeafSpec(key=key, kind="tensor", dtype="int64", shape=())
    if "image" in node:
        spec = node["image"]
        fmt = spec.get("encodingFormat") or "png"
        return LeafSpec(key=key, kind="image", dtype=str(spec.get("dtype", "uint8")),
                        shape=_shape(spec, key, path), image_format=str(fmt))
    if "tensor" in node:
        spec = node["tensor"]
        dtype = str(spec.get("dtype", ""))
        encoding = str(spec.get("encoding", "none") or "none")
        if dtype == "string":
            return LeafSpec(key=key, kind="text", dtype="string", shape=_shape(spec, key, path))
        if dtype not in _DTYPES:
            raise FormatError(f"{path}: feature {key!r} has dtype {dtype!r}; supported: "
                              f"{sorted(_DTYPES)} and string")
        if encoding not in _ENCODINGS:
            raise FormatError(f"{path}: feature {key!r} has encoding {encoding!r}; supported: "
                              f"{list(_ENCODINGS)}")
        return LeafSpec(key=key, kind="tensor", dtype=dtype, shape=_shape(spec, key, path),
                        encoding=encoding)
    kind = node.get("pythonClassName", "?")
    raise FormatError(f"{path}: feature {key!r} is a {kind}, which RLDS importing does not map "
                      "(supported: tensors, scalars, images, text, class labels)")
