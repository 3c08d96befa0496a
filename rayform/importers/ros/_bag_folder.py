"""rosbag2 bag folders: ``metadata.yaml`` read as untrusted input, and its storage files inside the folder.

The one place that reads a bag folder's metadata for every importer (MCAP and sqlite3 storage
alike) and builds the paths of the files it lists: a ``relative_file_paths`` entry that is
absolute, climbs out with ``..`` or resolves (through a symlink) outside the folder is refused,
as are YAML aliases (a "billion laughs" document expands to gigabytes from a few hundred bytes)
and metadata files too large to be a bag's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from rayform._optional import require
from rayform._paths import path_under
from rayform.errors import CorruptRecordingError, FormatError, InvalidNameError

ROSBAG2_METADATA: Final = "metadata.yaml"
_MAX_METADATA_BYTES: Final = 1 << 20
_STORAGE_SUFFIXES: Final = {"mcap": ".mcap", "sqlite3": ".db3"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BagFolder:
    """A rosbag2 folder: its storage plugin, its files in split order, what its metadata says."""

    path: Path
    storage: str
    files: tuple[Path, ...]
    info: dict[str, Any]

    def properties(self) -> dict[str, str | int]:
        """Segment properties from the metadata: storage, format version, distro, count."""
        properties: dict[str, str | int] = {"storage_identifier": self.storage}
        for key in ("version", "ros_distro", "message_count"):
            value = self.info.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool):
                properties[f"rosbag2_{key}" if key == "version" else key] = value
        return properties


def is_rosbag2_folder(path: Path) -> bool:
    return path.is_dir() and (path / ROSBAG2_METADATA).is_file()


def folder_storage(path: Path) -> str | None:
    """The folder's ``storage_identifier`` (cheap, for sniffing); ``None`` when unreadable."""
    try:
        return read_bag_folder_info(path, extra="mcap")[1]
    except (FormatError, ImportError, OSError):
        return None


def read_bag_folder_info(path: Path, *, extra: str) -> tuple[dict[str, Any], str]:
    """The ``rosbag2_bagfile_information`` mapping of a bag folder and its storage identifier.

    Raises:
        CorruptRecordingError: metadata.yaml is not valid YAML, too large, or uses aliases.
        FormatError: it holds no ``rosbag2_bagfile_information`` mapping.
    """
    meta_path = path / ROSBAG2_METADATA
    yaml: Any = require("yaml", extra=extra, feature="Reading rosbag2 metadata.yaml")
    with meta_path.open("rb") as fh:
        raw = fh.read(_MAX_METADATA_BYTES + 1)
    if len(raw) > _MAX_METADATA_BYTES:
        raise CorruptRecordingError(
            f"{meta_path}: larger than {_MAX_METADATA_BYTES} bytes; not a rosbag2 metadata file")
    try:
        meta = _load_without_aliases(yaml, raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise CorruptRecordingError(f"{meta_path}: not UTF-8 text: {err}") from err
    except yaml.YAMLError as err:
        raise CorruptRecordingError(f"{meta_path}: not valid YAML: {err}") from err
    info = meta.get("rosbag2_bagfile_information") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        raise FormatError(f"{meta_path}: no 'rosbag2_bagfile_information' mapping; this is not a "
                          "rosbag2 metadata file")
    return info, str(info.get("storage_identifier", "mcap"))


def _load_without_aliases(yaml: Any, text: str) -> Any:
    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"line {mark.line + 1}: YAML aliases are not allowed in "
                                     "rosbag2 metadata")
            return super().compose_node(parent, index)

    return yaml.load(text, Loader=NoAliasLoader)


def bag_folder(path: Path, info: dict[str, Any], storage: str) -> BagFolder:
    """The bag folder at ``path`` (its metadata read by :func:`read_bag_folder_info`), its
    storage files checked to exist inside it.

    Raises:
        FormatError: a listed file outside the folder or missing, or no storage file at all.
    """
    meta_path = path / ROSBAG2_METADATA
    listed = info.get("relative_file_paths") or []
    if not isinstance(listed, list):
        raise FormatError(f"{meta_path}: 'relative_file_paths' is not a list, got {listed!r}")
    suffix = _STORAGE_SUFFIXES.get(storage, "")
    if _is_before_version_4(info):  # the paths then started with the bag folder's name
        listed = [_without_folder_name(rel, path.name) for rel in listed]
    files = [member_path(path, rel, source=meta_path) for rel in listed] if listed \
        else sorted(path.glob(f"*{suffix}")) if suffix else []
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FormatError(f"{meta_path}: lists {len(missing)} missing file(s), e.g. {missing[0]}; "
                          "copy the whole bag folder")
    if not files:
        raise FormatError(f"{path}: the rosbag2 folder holds no {suffix or 'storage'} file")
    return BagFolder(path=path, storage=storage, files=tuple(files), info=info)


def _is_before_version_4(info: dict[str, Any]) -> bool:
    version = info.get("version")
    return isinstance(version, int) and not isinstance(version, bool) and version < 4


def _without_folder_name(relative: object, name: str) -> object:
    if isinstance(relative, str):
        parts = PurePosixPath(relative.replace("\\", "/")).parts
        if len(parts) > 1 and parts[0] == name:
            return "/".join(parts[1:])
    return relative


def member_path(folder: Path, relative: object, *, source: Path) -> Path:
    """``folder / relative`` for a file a bag's metadata lists, refused if it leaves the folder.

    The name is checked by :func:`rayform._paths.path_under` (no absolute path, ``..``,
    separator other than ``/`` or NUL), then its resolved path must stay inside the folder (a
    symlink pointing out is refused too).

    Raises:
        FormatError: ``relative`` is not a plain relative path inside ``folder``.
    """
    try:
        if not isinstance(relative, str) or not relative:
            raise InvalidNameError(f"{relative!r} is not a file name")
        candidate = path_under(folder, relative, what="bag file")
    except InvalidNameError as err:
        raise FormatError(
            f"{source}: relative_file_paths entry {relative!r} is not a file inside the bag "
            f"folder ({err}); a bag lists only its own files, by names relative to its folder"
        ) from None
    resolved = candidate.resolve()
    if not resolved.is_relative_to(folder.resolve()):
        raise FormatError(
            f"{source}: relative_file_paths entry {relative!r} resolves outside the bag folder "
            f"({resolved}); a bag lists only its own files")
    return candidate
