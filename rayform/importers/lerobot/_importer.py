"""Register a LeRobot dataset folder (v2.0, v2.1 or v3.0): one segment per episode."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from rayform.errors import ConversionWarning, FormatError, RayformError
from rayform.importers._base import Importer
from rayform.importers.lerobot._episode import write_episode
from rayform.importers.lerobot._layout import EPISODE_INDEX, segment_id_for_episode
from rayform.importers.lerobot._metadata import (
    DatasetInfo,
    EpisodeInfo,
    read_episodes,
    read_info,
    read_parquet,
    read_tasks,
)
from rayform.importers.lerobot._stats import (
    DATASET_PREFIX,
    EPISODE_PREFIX,
    episode_stats,
    read_dataset_stats,
    read_episode_stats,
    stats_properties,
)
from rayform.importers.mp4._probe import VideoProbe, probe_video


class LeRobotImporter(Importer):
    """Reads LeRobot dataset folders without the ``lerobot`` package (see ``_layout`` for columns).

    Each episode becomes the segment ``episode_<index:06d>``; its tasks, length, index, the
    dataset's fps / robot type and the statistics the dataset stores (``_stats``) are
    properties; videos are kept as-is as video assets (a v3.0 file holding many episodes is
    stored once and each episode points into it). Episodes the
    metadata lists but whose data file is missing (a partial download) are skipped with a
    :class:`~rayform.errors.ConversionWarning` naming them; a missing video file only drops that
    camera from the episode, with a warning.

    Any folder that no earlier importer claims is offered here, so that a folder which is not a
    LeRobot dataset gets an error saying so.
    """

    name = "lerobot"

    def sniff(self, path: Path) -> bool:
        return path.is_dir()

    def segment_ids(self, path: Path) -> list[str] | None:
        episodes = read_episodes(read_info(path))
        return [segment_id_for_episode(e.index) for e in episodes if e.data_path.is_file()]

    def convert(self, path: Path, staging: Path) -> list[Path]:
        with _metadata_errors(path, "meta/info.json"):
            info = read_info(path)
        with _metadata_errors(path, "meta/tasks"):
            tasks = read_tasks(info)
        with _metadata_errors(path, "meta/episodes"):
            episodes = read_episodes(info)
        with _metadata_errors(path, "meta/*stats*"):
            v21_stats = read_episode_stats(info)
            dataset_stats = stats_properties(DATASET_PREFIX, read_dataset_stats(info))
        present = [e for e in episodes if e.data_path.is_file()]
        _report_missing(info, episodes, present)
        if not present:
            raise FormatError(
                f"{path}: none of the {len(episodes)} episodes listed in its metadata has a data "
                f"file (looked for e.g. {episodes[0].data_path if episodes else info.data_path}); "
                "download the data/ folder"
            )
        probes: dict[Path, VideoProbe] = {}

        def probe(video: Path) -> VideoProbe:
            found = probes.get(video)
            if found is None:
                found = probes[video] = probe_video(video)
            return found

        outputs: list[Path] = []
        by_file: dict[Path, list[EpisodeInfo]] = {}
        for episode in present:
            by_file.setdefault(episode.data_path, []).append(episode)
        for data_path, group in by_file.items():
            table = read_parquet(data_path)
            for episode in group:
                rows = _episode_rows(table, episode, data_path, is_v3=info.is_v3)
                out = staging / f"{segment_id_for_episode(episode.index)}.rfr"
                with _metadata_errors(path, "meta/*stats*"):
                    stored = {**stats_properties(EPISODE_PREFIX,
                                                 episode_stats(info, episode, v21_stats)),
                              **dataset_stats}
                outputs.append(write_episode(out, info=info, episode=episode, table=rows,
                                             tasks=tasks, probe=probe, stored=stored))
        return outputs


@contextmanager
def _metadata_errors(root: Path, what: str) -> Iterator[None]:
    """A value of the wrong type deep in LeRobot metadata is a FormatError naming the file."""
    try:
        yield
    except RayformError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as err:
        raise FormatError(f"{root}: {what} holds a value of the wrong type or range "
                          f"({type(err).__name__}: {str(err)[:200]}); fix or re-download the "
                          "dataset's meta/ folder") from err


def _episode_rows(table: pa.Table, episode: EpisodeInfo, data_path: Path, *, is_v3: bool
                  ) -> pa.Table:
    if EPISODE_INDEX not in table.column_names:
        if is_v3:
            raise FormatError(f"{data_path}: a v3.0 data file needs an 'episode_index' column")
        return table
    mask = pc.equal(table.column(EPISODE_INDEX), pa.scalar(episode.index, pa.int64()))
    rows = table.filter(mask)
    if rows.num_rows == 0:
        raise FormatError(
            f"{data_path}: holds no rows of episode {episode.index}, which the metadata places "
            "there; the dataset's metadata and data disagree"
        )
    return rows


def _report_missing(info: DatasetInfo, listed: list[EpisodeInfo],
                    present: list[EpisodeInfo]) -> None:
    have = {e.index for e in present}
    missing = [e for e in listed if e.index not in have]
    if missing:
        names = ", ".join(segment_id_for_episode(e.index) for e in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        warnings.warn(
            f"{info.root}: partial LeRobot dataset: registering the {len(present)} episodes "
            f"present; {len(missing)} listed in its metadata have no data file ({names}{more})",
            ConversionWarning, stacklevel=4)
    for episode in present:
        lost = [k for k, loc in episode.videos.items() if not loc.path.is_file()]
        for key in lost:
            warnings.warn(
                f"{info.root}: episode {episode.index}: video {key!r} is missing "
                f"({episode.videos[key].path}); the episode is registered without it",
                ConversionWarning, stacklevel=4)

