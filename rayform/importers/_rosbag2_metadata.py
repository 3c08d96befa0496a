"""A rosbag2 folder's ``metadata.yaml``, read as untrusted: bounded, aliases refused, paths kept inside.

Any rosbag2 storage (MCAP, sqlite3) reads its metadata through :func:`load_bag_information` and
its file list through :func:`listed_files`:

- the file is at most :data:`MAX_METADATA_BYTES`; YAML anchors and aliases are refused (a
  555-byte "billion laughs" document expands to gigabytes through them; rosbag2 never writes
  any);
- ``relative_file_paths`` is a list of at most :data:`MAX_LISTED_FILES` strings, each a relative
  path that stays inside the bag folder (no ``..``, no absolute path, no NUL).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rayform._optional import require
from rayform._paths import path_under
from rayform.errors import CorruptRecordingError, FormatError, InvalidNameError

ROSBAG2_METADATA = "metadata.yaml"
BAG_INFORMATION = "rosbag2_bagfile_information"
MAX_METADATA_BYTES = 16 << 20
MAX_LISTED_FILES = 100_000


def _safe_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader that refuses anchors and aliases (they can expand exponentially)."""

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise yaml.constructor.ConstructorError(
                    None, None, "YAML anchors and aliases are not accepted in rosbag2 metadata",
                    event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasLoader


def load_bag_information(meta_path: Path) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` mapping of ``meta_path``.

    Raises:
        CorruptRecordingError: the file is too large, not YAML, or uses anchors/aliases.
        FormatError: it holds no ``rosbag2_bagfile_information`` mapping.
    """
    yaml: Any = require("yaml", extra="mcap", feature="Reading rosbag2 metadata.yaml")
    try:
        with meta_path.open("rb") as fh:
            raw = fh.read(MAX_METADATA_BYTES + 1)
    except OSError as err:
        raise CorruptRecordingError(f"{meta_path}: cannot be read: {err}") from err
    if len(raw) > MAX_METADATA_BYTES:
        raise CorruptRecordingError(f"{meta_path}: larger than {MAX_METADATA_BYTES} bytes; a "
                                    "rosbag2 metadata file is a few kilobytes")
    try:
        meta = yaml.load(raw.decode("utf-8"), Loader=_safe_loader(yaml))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as err:
        raise CorruptRecordingError(f"{meta_path}: not valid rosbag2 metadata YAML: {err}"
                                    ) from err
    info = meta.get(BAG_INFORMATION) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        raise FormatError(f"{meta_path}: no {BAG_INFORMATION!r} mapping; this is not a rosbag2 "
                          "metadata file")
    return info


def listed_files(folder: Path, info: dict[str, Any], *, meta_path: Path) -> list[Path] | None:
    """The bag's files from ``relative_file_paths`` (``None`` when it lists none).

    Raises:
        FormatError: the list is not a bounded list of strings, or one of them leaves
            ``folder`` (``../x``, an absolute path).
    """
    listed = info.get("relative_file_paths")
    if listed is None or listed == []:
        return None
    if not isinstance(listed, list) or len(listed) > MAX_LISTED_FILES or not all(
            isinstance(rel, str) for rel in listed):
        raise FormatError(f"{meta_path}: 'relative_file_paths' must be a list of at most "
                          f"{MAX_LISTED_FILES} file names, got {str(listed)[:120]}")
    files = []
    for rel in listed:
        key = rel[2:] if rel.startswith("./") else rel
        try:
            files.append(path_under(folder, key, what=f"{meta_path}: relative_file_paths entry"))
        except InvalidNameError as err:
            raise FormatError(f"{meta_path}: relative_file_paths entry {rel[:200]!r} leaves the "
                              f"bag folder or is not a file name ({err}); list files inside "
                              "the folder") from err
    return files


__all__ = ["BAG_INFORMATION", "MAX_LISTED_FILES", "MAX_METADATA_BYTES", "ROSBAG2_METADATA",
           "listed_files", "load_bag_information"]
