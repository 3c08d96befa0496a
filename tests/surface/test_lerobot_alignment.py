"""On real LeRobot data (Unitree G1), ``EpisodeDataset`` serves the frame LeRobot's rule picks."""

from __future__ import annotations

from pathlib import Path

import pytest
from lerobot_alignment import G1, REALDATA, Alignment, Episode, episode_dataset, load_episodes, measure

from rayform.torch import ReadOptions

pytestmark = [pytest.mark.realdata, pytest.mark.slow]


@pytest.fixture(scope="module")
def g1_root() -> Path:
    pytest.importorskip("av")
    if not (REALDATA / G1).is_dir():
        pytest.skip(f"real data folder {REALDATA / G1} is absent")
    return (REALDATA / G1).resolve()


@pytest.fixture(scope="module")
def episodes(g1_root: Path) -> dict[str, Episode]:
    return load_episodes(g1_root)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("g1")


@pytest.mark.parametrize("fps", [15.0, 30.0])
def test_every_sample_is_on_its_frame(g1_root: Path, workdir: Path, episodes: dict[str, Episode],
                                      fps: float) -> None:
    result = measure(episode_dataset(g1_root, workdir, fps=fps), episodes)
    print(result.line())
    assert result.no_lerobot_frame == 0
    assert (result.frame_off, result.state_off) == (0, 0), result.line()
    rows = {sid: len(ep.timestamps_s) for sid, ep in episodes.items()}
    step = round(30 / fps)
    assert {sid: n for sid, (n, _) in result.per_segment.items()} == \
        {sid: (n - 1) // step + 1 for sid, n in rows.items()}  # every row on the grid, the last too


def test_exact_latest_at_serves_the_right_frame_on_the_snapped_grid(
        g1_root: Path, workdir: Path, episodes: dict[str, Episode]) -> None:
    """Rerun's exact rule (``tolerance_s=0``) served the previous frame for most samples while the
    time timeline held LeRobot's float32 seconds; the importer now puts it on the exact grid."""
    exact: Alignment = measure(episode_dataset(g1_root, workdir, fps=15.0,
                                               options=ReadOptions(tolerance_s=0.0)), episodes)
    print(exact.line())
    assert exact.samples > 200
    assert (exact.frame_off, exact.state_off) == (0, 0)
