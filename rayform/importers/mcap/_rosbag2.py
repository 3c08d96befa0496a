"""Which MCAP files make a source: a single ``.mcap`` file or a rosbag2 folder (metadata.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rayform.errors import FormatError
from rayform.importers._rosbag2_metadata import (
    ROSBAG2_METADATA,
    listed_files,
    load_bag_information,
)

MCAP_MAGIC = b"\x89MCAP0\r\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class McapSource:
    """The MCAP files of one recording and what the bag's metadata says about it."""

    name: str
    files: tuple[Path, ...]
    properties: dict[str, str | int]


def is_mcap_file(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(MCAP_MAGIC)) == MCAP_MAGIC
    except OSError:
        return False


def is_rosbag2_folder(path: Path) -> bool:
    return path.is_dir() and (path / ROSBAG2_METADATA).is_file()


def resolve_source(path: Path) -> McapSource:
    """The MCAP files of ``path`` (a file, or a rosbag2 folder in split order).

    Raises:
        FormatError: a rosbag2 folder whose storage is not MCAP, or that lists no files.
        CorruptRecordingError: an unreadable metadata.yaml.
    """
    if path.is_file():
        return McapSource(name=path.stem, files=(path,), properties={"source_file": path.name})
    meta_path = path / ROSBAG2_METADATA
    info = load_bag_information(meta_path)
    storage = str(info.get("storage_identifier", "mcap"))
    if storage != "mcap":
        raise FormatError(
            f"{path}: rosbag2 storage {storage!r} is not supported; convert the bag to MCAP with "
            "'ros2 bag convert' (storage_id: mcap)")
    files = listed_files(path, info, meta_path=meta_path) or sorted(path.glob("*.mcap"))
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FormatError(f"{meta_path}: lists {len(missing)} missing file(s), e.g. {missing[0]}; "
                          "copy the whole bag folder")
    if not files:
        raise FormatError(f"{path}: the rosbag2 folder holds no .mcap file")
    properties: dict[str, str | int] = {"storage_identifier": storage}
    for key in ("version", "ros_distro", "message_count"):
        value = info.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            properties[f"rosbag2_{key}" if key == "version" else key] = value
    return McapSource(name=path.name, files=tuple(files), properties=properties)
