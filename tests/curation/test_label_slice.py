"""A slice keeping only the ranges labelled ``grasp``: every loader (map, iterable,
``EpisodeDataset``) draws only samples whose window lies inside one."""

from __future__ import annotations

import numpy as np
import pytest
from defects import STATE_COLUMN

from rayform.catalog import Catalog, DatasetEntry, Slice
from rayform.cli import main
from rayform.curation import labelled_slice
from rayform.curation._label_slice import outside
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset
from rayform.errors import ConfigError

pytestmark = pytest.mark.realdata
SEGMENT = "episode_000029"
KEPT = ((30, 89), (150, 179))  # inclusive rows labelled "grasp"
WINDOW = (-2, -1, 0)


@pytest.fixture()
def grasp(real_dataset: DatasetEntry) -> Slice:
    for start, end in KEPT:
        real_dataset.annotate(SEGMENT, start, end + 1, "grasp")
    real_dataset.annotate("episode_000030", 0, 10, "reach")
    catalog = real_dataset.catalog
    assert isinstance(catalog, Catalog)
    return labelled_slice(catalog, real_dataset, ["grasp"], name="grasps")


def _inside(value: int) -> bool:
    return any(value + WINDOW[0] >= a and value + WINDOW[-1] <= b for a, b in KEPT)


def test_outside_is_the_complement() -> None:
    assert outside((0, 220), [(30, 89), (150, 179)]) == [(0, 29), (90, 149), (180, 220)]
    assert outside((0, 9), [(0, 9)]) == []
    assert outside((0, 9), [(5, 20), (0, 2)]) == [(3, 4)]


def test_slice_keeps_labelled_segments_only(grasp: Slice) -> None:
    assert grasp.segment_ids == [SEGMENT]
    rows = sorted((e.start, e.end) for e in grasp.excluded if e.timeline == "frame_index")
    assert rows == [(0, 29), (90, 149), (180, 220)]
    assert any(e.timeline == "timestamp" for e in grasp.excluded)


def test_map_dataset_samples_inside_labels(grasp: Slice) -> None:
    fields = {"state": Field(STATE_COLUMN, NumericDecoder(), window=WINDOW)}
    index = RerunMapDataset(DataSource(grasp), "frame_index", fields).sample_index
    _, values = index.locate(np.arange(len(index)))
    assert all(_inside(int(v)) for v in values)
    expected = sum(b - a + 1 - (len(WINDOW) - 1) for a, b in KEPT)
    assert len(values) == expected


def test_iterable_dataset_samples_inside_labels(grasp: Slice) -> None:
    from rayform.dataloader import RerunIterableDataset

    fields = {"state": Field(STATE_COLUMN, NumericDecoder(), window=WINDOW)}
    ds = RerunIterableDataset(DataSource(grasp), "frame_index", fields, sample_metadata=True)
    values = [int(s["meta"]["index_value"]) for s in ds]
    assert values and all(_inside(v) for v in values)
    assert len(values) == sum(b - a + 1 - (len(WINDOW) - 1) for a, b in KEPT)


def test_episode_dataset_samples_inside_labels(grasp: Slice) -> None:
    from rayform.torch import EpisodeDataset

    notes = grasp.view().catalog.sql(
        "SELECT start_ns, end_ns FROM g1.annotations WHERE label = 'grasp'").to_arrow_table()
    kept_ns = [(r["start_ns"], r["end_ns"] - 1) for r in notes.to_pylist()]
    ds = EpisodeDataset(grasp, obs=["/observation.state"], action="/action", fps=30, horizon=4)
    horizon_ns = round(3 / 30 * 1e9)
    assert len(ds) > 50
    for i in range(len(ds)):
        sample = ds[i]
        assert sample["meta"]["segment"] == SEGMENT
        t = int(sample["t_ns"])
        assert any(a <= t and t + horizon_ns <= b for a, b in kept_ns)


def test_no_such_label(real_dataset: DatasetEntry) -> None:
    catalog = real_dataset.catalog
    assert isinstance(catalog, Catalog)
    real_dataset.annotate(SEGMENT, 0, 10, "reach")
    with pytest.raises(ConfigError, match="labels present: \\['reach'\\]"):
        labelled_slice(catalog, real_dataset, ["grasp"])


def test_cli_keep_label(grasp: Slice, capsys: pytest.CaptureFixture[str]) -> None:
    url = grasp.catalog_url
    assert main(["--catalog", url, "slices", "create", "g1", "--keep-label", "grasp",
                 "--name", "grasps"]) == 0
    assert capsys.readouterr().out.strip() == grasp.id  # the same content: the same slice
