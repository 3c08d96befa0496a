"""The CLI's ``--ray`` variants give the single-process results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rayform.catalog import Catalog
from rayform.cli import main

pytestmark = [
    pytest.mark.ray,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]


def test_register_and_stats_with_ray(ray_cluster: Any, episode_files: list[Path],
                                     make_catalog: Callable[[], Catalog],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    local = make_catalog()
    distributed = make_catalog()
    files = [str(p) for p in episode_files]
    assert main(["--catalog", local.url, "register", "d", *files, "--create"]) == 0
    assert main(["--catalog", distributed.url, "register", "d", *files, "--create",
                 "--ray"]) == 0
    capsys.readouterr()
    ids = Catalog.open(local.url).get_dataset("d").segment_ids()
    assert Catalog.open(distributed.url).get_dataset("d").segment_ids() == ids

    assert main(["--catalog", local.url, "stats", "d", "--per-segment"]) == 0
    single = capsys.readouterr().out
    assert main(["--catalog", distributed.url, "stats", "d", "--per-segment", "--ray"]) == 0
    assert capsys.readouterr().out == single
    assert all(i in single for i in ids)
