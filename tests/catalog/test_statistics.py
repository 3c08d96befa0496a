"""Per-column statistics (single process and SQL) against numpy and exact-arithmetic references."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rayform.catalog import (
    Catalog,
    ColumnStatistics,
    DatasetEntry,
    RecordingWriter,
    compute_statistics,
)
from rayform.catalog._accumulator import (
    DEFAULT_QUANTILES,
    StatisticsAccumulator,
    _exact_sums,
    quantile_key,
)
from rayform.errors import ColumnNotFoundError, ConfigError

JOINTS = "/joints/position:Scalars:scalars"
GRIPPER = "/gripper:Scalars:scalars"
IMAGE = "/cam:EncodedImage:blob"
FRAMES = {"ep0": 40, "ep1": 25, "ep2": 33}


def _joints(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, 7)) * np.arange(1, 8) + 10.0 * seed).astype(np.float32)


@pytest.fixture
def stats_dataset(tmp_path: Path) -> DatasetEntry:
    """Three episodes: 7-D float32 joints on two timelines, int64 gripper every 3rd frame, images."""
    paths = []
    for seed, (sid, n) in enumerate(FRAMES.items()):
        path = tmp_path / f"{sid}.rfr"
        frames = np.arange(n)
        with RecordingWriter(path, recording_id=sid) as rec:
            rec.log_scalars("/joints/position", values=_joints(seed, n), timelines={
                "frame_index": frames, "real_time": (frames * 10_000_000).astype("datetime64[ns]")})
            rec.log_scalars("/gripper", timelines={"frame_index": frames[::3]},
                            values=(frames[::3] * (seed + 1)).astype(np.int64))
            rec.log_encoded_images("/cam", timelines={"frame_index": frames[::5]},
                                   blobs=[b"jpeg"] * len(frames[::5]), media_type="image/jpeg")
        paths.append(path)
    ds = Catalog.create(tmp_path / "catalog").create_dataset("robots")
    ds.register(paths).wait()
    return ds


def _reference(seed: int, n: int, column: str) -> np.ndarray:
    if column == JOINTS:
        return _joints(seed, n).astype(np.float64)
    frames = np.arange(n)[::3]
    return (frames * (seed + 1)).astype(np.float64)[:, None]


def _check_against_numpy(stats: ColumnStatistics, values: np.ndarray) -> None:
    assert stats.count == len(values)
    np.testing.assert_array_equal(stats.min, values.min(axis=0))
    np.testing.assert_array_equal(stats.max, values.max(axis=0))
    np.testing.assert_allclose(stats.mean, values.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(stats.std, values.std(axis=0), rtol=1e-12)
    for level in DEFAULT_QUANTILES:
        np.testing.assert_array_equal(stats.quantiles[level], np.quantile(values, level, axis=0))


def test_statistics_match_numpy_per_segment_and_overall(stats_dataset: DatasetEntry) -> None:
    stats = compute_statistics(stats_dataset)
    assert set(stats.overall) == {JOINTS, GRIPPER}  # images are not numeric
    assert stats.snapshot_version == stats_dataset.snapshot_version
    for column in (JOINTS, GRIPPER):
        parts = [_reference(seed, n, column) for seed, n in enumerate(FRAMES.values())]
        for sid, part in zip(FRAMES, parts, strict=True):
            _check_against_numpy(stats.column(column, segment_id=sid), part)
        _check_against_numpy(stats.column(column), np.concatenate(parts))
    assert stats.column(JOINTS).mean.shape == (7,)
    assert stats.column(GRIPPER).mean.shape == (1,)


def test_mean_is_correctly_rounded_and_std_exact_to_one_rounding(
        stats_dataset: DatasetEntry) -> None:
    stats = compute_statistics(stats_dataset, JOINTS, quantiles=())
    values = np.concatenate([_reference(s, n, JOINTS) for s, n in enumerate(FRAMES.values())])
    for d in range(7):
        exact = [Fraction(float(v)) for v in values[:, d]]
        mean = sum(exact, Fraction(0)) / len(exact)
        assert stats.column(JOINTS).mean[d] == float(mean)
        variance = sum(((v - mean) ** 2 for v in exact), Fraction(0)) / len(exact)
        assert stats.column(JOINTS).std[d] == np.sqrt(float(variance))
    assert stats.column(JOINTS).quantiles == {}


def test_filters_timeline_and_quantile_levels(stats_dataset: DatasetEntry) -> None:
    view = stats_dataset.filter_segments(["ep0", "ep2"])
    stats = compute_statistics(view, [GRIPPER], timeline="frame_index", quantiles=(0.25, 0.975))
    assert sorted(stats.segments) == ["ep0", "ep2"]
    values = np.concatenate([_reference(0, 40, GRIPPER), _reference(2, 33, GRIPPER)])
    np.testing.assert_array_equal(stats.column(GRIPPER).quantiles[0.975],
                                  np.quantile(values, 0.975, axis=0))
    # the gripper has no rows on real_time: no segment has statistics there
    on_real_time = compute_statistics(view, [GRIPPER], timeline="real_time")
    assert on_real_time.segments == {"ep0": {}, "ep2": {}}
    assert on_real_time.column(GRIPPER).count == 0
    assert np.isnan(on_real_time.column(GRIPPER).mean).all()


def test_exports_arrow_and_lerobot(stats_dataset: DatasetEntry) -> None:
    stats = compute_statistics(stats_dataset, [JOINTS, GRIPPER])
    table = stats.to_arrow()
    assert table.column_names == ["rerun_segment_id", "column", "count", "min", "max", "mean",
                                  "std", "q01", "q10", "q50", "q90", "q99"]
    assert table.num_rows == 2 + 3 * 2
    assert table.column("rerun_segment_id").null_count == 2
    lerobot = stats.to_lerobot(feature_names={JOINTS: "observation.state"})
    assert set(lerobot) == {"observation.state", GRIPPER}
    state = lerobot["observation.state"]
    assert sorted(state) == sorted(["min", "max", "mean", "std", "count", "q01", "q10", "q50",
                                    "q90", "q99"])
    assert state["count"] == [98] and len(state["mean"]) == 7
    episode = stats.to_lerobot(segment_id="ep1")
    assert episode[JOINTS]["count"] == [25]
    assert [quantile_key(q) for q in (0.01, 0.1, 0.5, 0.025, 0.999, 1.0)] == [
        "q01", "q10", "q50", "q2.5", "q99.9", "q100"]


def test_sql_vector_stats_equal_the_data_plane(stats_dataset: DatasetEntry) -> None:
    stats = compute_statistics(stats_dataset, JOINTS)
    catalog = stats_dataset.catalog
    rows = catalog.sql(
        f'SELECT rerun_segment_id AS s, vector_stats("{JOINTS}") AS v FROM robots."/joints/position" '
        "WHERE frame_index IS NOT NULL GROUP BY rerun_segment_id ORDER BY rerun_segment_id"
    ).to_arrow_table().to_pylist()
    overall = catalog.sql(
        f'SELECT vector_stats("{JOINTS}") AS v, vector_quantile("{JOINTS}", 0.3) AS q '
        'FROM robots."/joints/position"').to_arrow_table().to_pylist()[0]
    expected = stats.to_arrow()
    for row in [*rows, {"s": None, "v": overall["v"]}]:
        mine = expected.filter(pa.compute.equal(expected["rerun_segment_id"], row["s"])
                               if row["s"] else expected["rerun_segment_id"].is_null())
        mine_row = mine.to_pylist()[0]
        for key, value in row["v"].items():
            assert value == mine_row[key], (row["s"], key)
    values = np.concatenate([_reference(s, n, JOINTS) for s, n in enumerate(FRAMES.values())])
    assert overall["q"] == np.quantile(values, 0.3, axis=0).tolist()
    builtin = catalog.sql(
        f'SELECT min("{JOINTS}"[3]) AS lo, max("{JOINTS}"[3]) AS hi '
        'FROM robots."/joints/position"').to_arrow_table().to_pylist()[0]
    overall_stats = stats.column(JOINTS)
    assert builtin["lo"] == overall_stats.min[2] and builtin["hi"] == overall_stats.max[2]


def test_bad_requests_name_the_problem(stats_dataset: DatasetEntry, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="EncodedImage:blob"):
        compute_statistics(stats_dataset, [IMAGE])
    with pytest.raises(ColumnNotFoundError, match="nope"):
        compute_statistics(stats_dataset, ["/nope:Scalars:scalars"])
    with pytest.raises(ColumnNotFoundError, match="bad_tl"):
        compute_statistics(stats_dataset, timeline="bad_tl")
    with pytest.raises(ConfigError, match=r"1\.5"):
        compute_statistics(stats_dataset, quantiles=(0.5, 1.5))
    ragged = tmp_path / "ragged.rfr"
    with RecordingWriter(ragged, recording_id="ragged") as rec:
        rec.log_columns("/ragged", timelines={"frame_index": [0, 1]},
                        components={"Scalars:scalars": pa.array([[1.0, 2.0], [3.0]])})
    ds = stats_dataset.catalog.create_dataset("ragged")
    ds.register(ragged).wait()
    with pytest.raises(ConfigError, match="fixed size"):
        compute_statistics(ds)


def test_nan_and_infinity_propagate_like_numpy() -> None:
    acc = StatisticsAccumulator("c", keep_values=True)
    acc.add(np.array([[1.0, 1.0, np.inf], [np.nan, 2.0, 3.0], [2.0, np.inf, -np.inf]]))
    stats = acc.finish((0.5,))
    assert np.isnan(stats.min[0]) and np.isnan(stats.mean[0]) and np.isnan(stats.quantiles[0.5][0])
    assert stats.mean[1] == np.inf and np.isnan(stats.std[1]) and stats.max[1] == np.inf
    assert np.isnan(stats.mean[2]) and stats.min[2] == -np.inf


def test_merge_order_never_changes_a_bit() -> None:
    rng = np.random.default_rng(7)
    data = rng.normal(size=(5000, 3)) * 10.0 ** rng.integers(-8, 8, size=(5000, 1))
    whole = StatisticsAccumulator("c", keep_values=True)
    whole.add(data)
    parts = []
    for chunk in np.array_split(data, 9):
        acc = StatisticsAccumulator("c", keep_values=True)
        acc.add(chunk)
        parts.append(acc)
    random.Random(3).shuffle(parts)
    merged = StatisticsAccumulator("c", keep_values=True)
    for acc in parts:
        merged.merge(acc)
    a, b = whole.finish(DEFAULT_QUANTILES), merged.finish(DEFAULT_QUANTILES)
    for name in ("min", "max", "mean", "std"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for level in DEFAULT_QUANTILES:
        assert np.array_equal(a.quantiles[level], b.quantiles[level])


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 3)),
                  elements=st.floats(allow_nan=False, allow_infinity=False)))
def test_exact_sums_are_exact(values: np.ndarray) -> None:
    sums, squares = _exact_sums(values)
    for d in range(values.shape[1]):
        column = [Fraction(float(v)) for v in values[:, d]]
        assert Fraction(sums[d], 2 ** 1126) == sum(column, Fraction(0))
        assert Fraction(squares[d], 2 ** 2252) == sum((v * v for v in column), Fraction(0))


def test_a_static_row_is_not_counted_as_a_sample(tmp_path: Path) -> None:
    """An entity with static components (MCAP topics keep their schema so) has one row more in
    the wide table than it has samples; the statistics count the samples only."""
    t = (np.arange(10) * 10_000_000).astype("datetime64[ns]")
    with RecordingWriter(tmp_path / "s.rfr", recording_id="s") as rec:
        rec.log_scalars("/odom", timelines={"real_time": t},
                        values=np.arange(20, dtype=np.float64).reshape(10, 2))
        rec.log_static("/odom", components={"McapSchema:name": "nav_msgs/msg/Odometry"})
    ds = Catalog.create(tmp_path / "c").create_dataset("d")
    ds.register(tmp_path / "s.rfr").wait()
    stats = compute_statistics(ds, "/odom:Scalars:scalars")
    assert stats.column("/odom:Scalars:scalars").count == 10
    rows = ds.catalog.sql('SELECT count(*) AS n FROM d."/odom"').to_arrow_table().to_pylist()
    assert rows == [{"n": 11}]  # the SQL entity table keeps the static row
