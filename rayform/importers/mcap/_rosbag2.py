"""Which MCAP files make a source: a single ``.mcap`` file or a rosbag2 folder of MCAP storage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rayform.errors import FormatError
from rayform.importers.ros._bag_folder import bag_folder, read_bag_folder_info

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


def resolve_source(path: Path) -> McapSource:
    """The MCAP files of ``path`` (a file, or a rosbag2 folder in split order).

    Raises:
        FormatError: a rosbag2 folder whose storage is not MCAP, that lists no files or files
            outside the folder.
        CorruptRecordingError: an unreadable metadata.yaml.
    """
    if path.is_file():
        return McapSource(name=path.stem, files=(path,), properties={"source_file": path.name})
    info, storage = read_bag_folder_info(path, extra="mcap")
    if storage != "mcap":
        raise FormatError(
            f"{path}: rosbag2 storage {storage!r} is not supported; convert the bag to MCAP "
            "with 'ros2 bag convert' (storage_id: mcap)")
    folder = bag_folder(path, info, storage)
    return McapSource(name=path.name, files=folder.files, properties=folder.properties())
