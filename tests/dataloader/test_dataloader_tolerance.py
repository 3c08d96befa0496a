"""``FixedRateSampling(tolerance_s=…)``: grid instants read rows stored just after them.

The recording stores LeRobot-style timestamps: ``float32(k / 30)`` seconds, converted to ns, so
row ``k`` lies a few ns after the grid instant meant for it (or before it). Rerun's exact
latest-at (the default) then reads row ``k - 1`` for some ``k``; with a tolerance every instant
reads its own row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

import rayform
from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, FixedRateSampling, NumericDecoder, RerunMapDataset
from rayform.errors import ConfigError

FPS = 30
NUM_ROWS = 61
STATE = "/state:Scalars:scalars"


def stored_ns(frames: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """What a LeRobot importer stores: float32 seconds, rounded to ns."""
    seconds = (frames / FPS).astype(np.float32).astype(np.float64)
    return np.rint(seconds * 1e9).astype(np.int64)


@pytest.fixture(scope="module")
def rounded(tmp_path_factory: pytest.TempPathFactory) -> DatasetEntry:
    """One segment: ``/state`` holds the row number at LeRobot-rounded timestamps."""
    root = tmp_path_factory.mktemp("tolerance")
    frames = np.arange(NUM_ROWS, dtype=np.int64)
    path = root / "ep.rfr"
    with rayform.RecordingWriter(path, recording_id="ep") as rec:
        rec.log_scalars("/state", timelines={"timestamp": stored_ns(frames).astype(
            "timedelta64[ns]")}, values=frames[:, None].astype(np.float64))
    ds = rayform.Catalog.create(root / "cat").create_dataset("d")
    ds.register(path).wait()
    return ds


def read_rows(ds: DatasetEntry, sampling: FixedRateSampling, **kwargs: object
              ) -> tuple[list[int], list[int]]:
    fields = {"state": Field(STATE, NumericDecoder(), **kwargs)}  # type: ignore[arg-type]
    data = RerunMapDataset(DataSource(ds), "timestamp", fields, timeline_sampling=sampling,
                           sample_metadata=True)
    samples = [data[i] for i in range(len(data))]
    return ([int(s["meta"]["index_value"]) for s in samples],
            [int(s["state"].reshape(-1)[0]) for s in samples])


def latest_at(instants: list[int], *, tolerance_ns: int = 0) -> list[int]:
    times = stored_ns(np.arange(NUM_ROWS, dtype=np.int64))
    return [int(np.searchsorted(times, t + tolerance_ns, side="right")) - 1 for t in instants]


@pytest.mark.parametrize("rate_hz", [15, 30])
def test_default_is_rerun_exact_latest_at(rounded: DatasetEntry, rate_hz: int) -> None:
    instants, rows = read_rows(rounded, FixedRateSampling(rate_hz))
    assert rows == latest_at(instants)
    meant = [round(t * FPS / 1e9) for t in instants]
    assert rows != meant  # the float rounding bites: some instants read the row before
    assert instants[-1] <= int(stored_ns(np.array([NUM_ROWS - 1]))[0])


@pytest.mark.parametrize("rate_hz", [15, 30])
def test_tolerance_reads_the_row_meant(rounded: DatasetEntry, rate_hz: int) -> None:
    instants, rows = read_rows(rounded, FixedRateSampling(rate_hz, tolerance_s=1e-4))
    assert rows == [round(t * FPS / 1e9) for t in instants]
    assert rows == latest_at(instants, tolerance_ns=100_000)
    step = FPS // rate_hz
    assert rows == list(range(0, NUM_ROWS, step))  # the last row is a sample too


def test_tolerance_with_windows_and_padding(rounded: DatasetEntry) -> None:
    window = tuple(k / FPS for k in range(-1, 3))
    data = RerunMapDataset(DataSource(rounded), "timestamp",
                           {"state": Field(STATE, NumericDecoder(), window=window)},
                           timeline_sampling=FixedRateSampling(FPS, tolerance_s=1e-4),
                           edge="pad")
    assert len(data) == NUM_ROWS
    for i in (0, 1, 30, NUM_ROWS - 2, NUM_ROWS - 1):
        sample = data[i]
        wanted = np.arange(i - 1, i + 3)
        assert sample["state"].reshape(-1).tolist() == np.clip(wanted, 0, NUM_ROWS - 1).tolist()
        assert sample["state_is_pad"].tolist() == ((wanted < 0) | (wanted >= NUM_ROWS)).tolist()


@pytest.mark.parametrize("tolerance", [-1e-4, float("nan"), 1 / 60, True, "1e-4"])
def test_bad_tolerances(tolerance: object) -> None:
    with pytest.raises(ConfigError, match="tolerance_s"):
        FixedRateSampling(30, tolerance_s=tolerance)  # type: ignore[arg-type]


def test_tolerance_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        FixedRateSampling(30, 1e-4)  # type: ignore[misc]
    assert FixedRateSampling(30).tolerance_s == 0.0
    assert FixedRateSampling(rate_hz=30, tolerance_s=1e-4).tolerance_ns == 100_000

