"""A TFDS builder folder: ``dataset_info.json``, its splits and the TFRecord shards of each.

The shard names come from each split's ``filepathTemplate`` (TFDS's default
``{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}``) and ``shardLengths``; a name that would leave
the folder is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rayform.errors import CorruptRecordingError, FormatError
from rayform.importers.rlds._features import FEATURES_FILE

INFO_FILE: Final = "dataset_info.json"
DEFAULT_TEMPLATE: Final = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_VERSION: Final = re.compile(r"^\d+\.\d+\.\d+$")
_SAFE_NAME: Final = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """One split: its name and shards (file, number of records the metadata promises)."""

    name: str
    shards: tuple[tuple[Path, int], ...]

    @property
    def num_episodes(self) -> int:
        return sum(n for _, n in self.shards)


@dataclass(frozen=True, slots=True, kw_only=True)
class BuilderInfo:
    """The parts of ``dataset_info.json`` the importer uses."""

    root: Path
    name: str
    version: str
    splits: tuple[Split, ...]


def is_builder_dir(path: Path) -> bool:
    return (path / INFO_FILE).is_file() and (path / FEATURES_FILE).is_file()


def builder_dir(path: Path) -> Path | None:
    """``path`` if it is a builder folder, else its newest ``X.Y.Z`` version folder that is one
    (TFDS lays datasets out as ``<name>/<version>/``); ``None`` if neither."""
    if is_builder_dir(path):
        return path
    if not path.is_dir():
        return None
    try:
        versions = [p for p in path.iterdir() if _VERSION.match(p.name) and is_builder_dir(p)]
    except OSError:
        return None
    if not versions:
        return None
    return max(versions, key=lambda p: tuple(int(x) for x in p.name.split(".")))


def _text(raw: dict[str, Any], key: str, path: Path) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise FormatError(f"{path}: {key!r} must be a non-empty string, got {value!r}")
    return value


def read_builder_info(root: Path) -> BuilderInfo:
    """Parse ``root/dataset_info.json``.

    Raises:
        FormatError: missing keys, a file format other than TFRecord, or shard names that leave
            the folder.
    """
    path = root / INFO_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CorruptRecordingError(f"{path}: not valid JSON ({err}); re-download it") from err
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: expected a JSON object")
    name = _text(raw, "name", path)
    file_format = raw.get("fileFormat", "tfrecord")
    if file_format != "tfrecord":
        raise FormatError(f"{path}: fileFormat {file_format!r} is not supported (only tfrecord); "
                          "rebuild the dataset with file_format='tfrecord'")
    splits_raw = raw.get("splits")
    if not isinstance(splits_raw, list) or not splits_raw:
        raise FormatError(f"{path}: 'splits' must be a non-empty list")
    splits = tuple(_split(s, name, root, path) for s in splits_raw)
    return BuilderInfo(root=root, name=name, version=str(raw.get("version", root.name)),
                       splits=splits)


def _split(raw: Any, dataset: str, root: Path, path: Path) -> Split:
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: a split is not an object: {raw!r:.80}")
    name = _text(raw, "name", path)
    if not _SAFE_NAME.match(name):
        raise FormatError(f"{path}: split name {name!r} may only hold letters, digits and '_.-'")
    lengths_raw = raw.get("shardLengths")
    if not isinstance(lengths_raw, list) or not lengths_raw:
        raise FormatError(f"{path}: split {name!r} has no 'shardLengths'")
    try:
        lengths = [int(n) for n in lengths_raw]
    except (TypeError, ValueError) as err:
        raise FormatError(f"{path}: split {name!r}: bad shardLengths {lengths_raw!r}") from err
    template = raw.get("filepathTemplate") or DEFAULT_TEMPLATE
    if not isinstance(template, str):
        raise FormatError(f"{path}: split {name!r}: filepathTemplate must be a string")
    total = len(lengths)
    shards: list[tuple[Path, int]] = []
    for index, count in enumerate(lengths):
        file_name = (template.replace("{DATASET}", dataset).replace("{SPLIT}", name)
                     .replace("{FILEFORMAT}", "tfrecord")
                     .replace("{SHARD_X_OF_Y}", f"{index:05d}-of-{total:05d}")
                     .replace("{SHARD_INDEX}", f"{index:05d}").replace("{NUM_SHARDS}",
                                                                       f"{total:05d}"))
        if not _SAFE_NAME.match(file_name) or file_name in (".", ".."):
            raise FormatError(f"{path}: split {name!r}: shard name {file_name!r} (from template "
                              f"{template!r}) is not a plain file name in {root}")
        shards.append((root / file_name, count))
    return Split(name=name, shards=tuple(shards))
