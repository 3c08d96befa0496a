"""``rayform.torch.EpisodeDataset``: the guide's code, sample contents, order, workers, frames."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from surface_data import (
    EPOCH_NS,
    FRAME_NS,
    build_catalog,
    joints,
    pose_opencv,
    pose_ros,
    write_episode,
)
from surface_servers import Https
from torch.utils.data import DataLoader

import rayform
from rayform.errors import ColumnNotFoundError, ConfigError, OfflineError
from rayform.storage import LocalStore, Store
from rayform.storage._cache import ObjectCache

torch.set_num_threads(1)

OBS = ["cam0/rgb", "wrist/rgb", "joints/position"]


@pytest.fixture
def guide_catalog(tmp_path: Path) -> rayform.Catalog:
    """Three 2-second episodes at 30 Hz: long enough for a 16-step action chunk at 15 fps."""
    return build_catalog(tmp_path / "guide", tmp_path / "guide-src", num_frames=60)


def keys_of(samples: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(s["meta"]["segment"], int(s["t_ns"])) for s in samples]


def unbatch(batches: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(seg, int(t)) for b in batches for seg, t in zip(b["meta"]["segment"], b["t_ns"],
                                                              strict=True)]


# The guide asks for 8 workers; torch warns that this machine has fewer cores.
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_the_guides_five_lines(guide_catalog: rayform.Catalog,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_CATALOG", guide_catalog.url)
    slice_id = rayform.Client().slices.create("robots").id

    # --- the guide, as written (its slice id swapped for ours) ---
    client = rayform.Client()
    slice_ = client.slices.get(slice_id)

    dataset = rayform.torch.EpisodeDataset(
        slice_,
        obs=["cam0/rgb", "wrist/rgb", "joints/position"],
        action="joints/position_delta",
        fps=15,
        horizon=16,            # action chunk length
        frame="ros",
    )
    loader = DataLoader(dataset, batch_size=64, num_workers=8, shuffle=True,
                        persistent_workers=True)
    # ---

    batches = list(loader)
    n = len(dataset)
    assert n == 3 * 15  # 2 s at 15 Hz, less the last second the action chunk reaches into
    assert sum(len(b["t_ns"]) for b in batches) == n
    batch = batches[0]
    b = len(batch["t_ns"])
    assert batch["cam0/rgb"].shape == (b, 3, 12, 16) and batch["cam0/rgb"].dtype == torch.uint8
    assert batch["wrist/rgb"].shape == (b, 3, 12, 16)
    assert batch["joints/position"].shape == (b, 7)
    assert batch["joints/position"].dtype == torch.float32
    assert batch["action"].shape == (b, 16, 7) and batch["action"].dtype == torch.float32
    assert batch["t_ns"].shape == (b,) and batch["t_ns"].dtype == torch.int64
    assert set(batch["meta"]) == {"slice", "segment", "segment_version", "site"}
    assert set(batch["meta"]["slice"]) == {slice_.id}
    assert sorted(unbatch(batches)) == sorted(keys_of([dataset[i] for i in range(n)]))


def test_sample_values_follow_the_recordings(guide_catalog: rayform.Catalog) -> None:
    slice_ = rayform.Client(guide_catalog).slices.create("robots")
    ds = rayform.torch.EpisodeDataset(slice_, obs=OBS, action="joints/position_delta", fps=15,
                                      horizon=4, seed=None)
    versions = slice_.segment_versions
    for i in (0, 7, len(ds) - 1):
        s = ds[i]
        seed = int(s["meta"]["segment"][2:])
        frame = (int(s["t_ns"]) - EPOCH_NS) // FRAME_NS  # latest frame at the sample time
        q = joints(seed, np.arange(60))
        np.testing.assert_allclose(s["joints/position"].numpy(), q[frame], rtol=1e-6)
        future = [min(frame + 2 * k, 59) for k in range(4)]  # t + k / 15 s
        delta = np.diff(q, axis=0, append=q[-1:])
        np.testing.assert_allclose(s["action"].numpy(), delta[future], atol=1e-6)
        assert s["meta"]["segment_version"] == versions[s["meta"]["segment"]]
        assert s["meta"]["site"] == ("lab-a" if seed % 2 == 0 else "lab-b")
    natural = keys_of([ds[i] for i in range(len(ds))])
    assert natural == sorted(natural)  # seed=None: segment by segment, in time


def test_set_epoch_is_deterministic(guide_catalog: rayform.Catalog) -> None:
    slice_ = rayform.Client(guide_catalog).slices.create("robots")

    def order(seed: int, epoch: int) -> list[tuple[str, int]]:
        ds = rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15, seed=seed)
        ds.set_epoch(epoch)
        return keys_of(list(ds))

    assert order(0, 3) == order(0, 3)
    assert order(0, 3) != order(0, 4)
    assert order(1, 3) != order(0, 3)
    assert sorted(order(0, 3)) == sorted(order(0, 4))  # permutations of the same samples


# The guide asks for 8 workers; torch warns that this machine has fewer cores.
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_the_guides_loader_repeats_its_order_for_a_seed(guide_catalog: rayform.Catalog) -> None:
    """The guide's loader (``shuffle=True``) and its reproducibility snippet, run twice: with
    torch's seed set (as the docs say), every epoch comes in the same order; the documented
    ``shuffle=False`` needs no torch seed at all."""
    slice_id = rayform.Client(guide_catalog).slices.create("robots").id

    def run(torch_seed: int | None, *, shuffle: bool) -> list[list[tuple[str, int]]]:
        if torch_seed is not None:
            torch.manual_seed(torch_seed)
        else:
            torch.seed()  # a fresh, unknown seed
        client = rayform.Client(guide_catalog)
        slice_ = client.slices.get(slice_id)
        dataset = rayform.torch.EpisodeDataset(
            slice_,
            obs=["cam0/rgb", "wrist/rgb", "joints/position"],
            action="joints/position_delta",
            fps=15,
            horizon=16,            # action chunk length
            frame="ros",
        )
        loader = DataLoader(dataset, batch_size=64, num_workers=8, shuffle=shuffle,
                            persistent_workers=True)
        orders = []
        for epoch in range(2):
            dataset.set_epoch(epoch)   # same order for the same seed and epoch
            orders.append(unbatch(list(loader)))
        return orders

    first = run(1234, shuffle=True)
    assert first == run(1234, shuffle=True)
    assert first[0] != first[1] and sorted(first[0]) == sorted(first[1])
    assert run(None, shuffle=False) == run(None, shuffle=False)


def test_forked_workers_read_the_same_samples(https_catalog: Https,
                                             local_catalog: rayform.Catalog) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")  # published over HTTPS
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    ds = rayform.torch.EpisodeDataset(remote, obs=OBS, fps=15)
    ds.set_epoch(2)
    loader = DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context="fork",
                        persistent_workers=True)
    batches = list(loader)  # the workers fetch with their own connections
    expected = keys_of([ds[i] for i in range(len(ds))])
    assert unbatch(batches) == expected
    images = torch.stack([ds[i]["cam0/rgb"] for i in range(len(ds))])
    assert torch.equal(torch.cat([b["cam0/rgb"] for b in batches]), images)
    ds.set_epoch(3)  # persistent workers see the new epoch
    assert unbatch(list(loader)) == keys_of([ds[i] for i in range(len(ds))]) != expected


def test_remote_epochs_read_from_the_cache_after_the_first(https_catalog: Https,
                                                           local_catalog: rayform.Catalog
                                                           ) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.torch.EpisodeDataset(rayform.Client(https_catalog.url).slices.get(made.id),
                                          obs=OBS, fps=15)
    local = rayform.torch.EpisodeDataset(made, obs=OBS, fps=15)
    first = list(remote)
    fetched = len(https_catalog.log.object_gets())
    assert all(https_catalog.log.gets_of(d) == 1 for d in made.objects())
    for a, b in zip(first, list(local), strict=True):
        assert keys_of([a]) == keys_of([b])
        assert torch.equal(a["cam0/rgb"], b["cam0/rgb"])
        assert torch.equal(a["joints/position"], b["joints/position"])
    again = rayform.torch.EpisodeDataset(rayform.Client(https_catalog.url).slices.get(made.id),
                                         obs=OBS, fps=15)
    assert keys_of(list(again)) == keys_of(first)
    assert len(https_catalog.log.object_gets()) == fetched  # the second epoch reads from disk


def test_read_ahead_starts_with_the_objects_the_epoch_reads_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = build_catalog(tmp_path / "six", tmp_path / "six-src", num_episodes=6,
                            num_frames=60)
    slice_ = rayform.Client(catalog).slices.create("robots")
    hints: list[tuple[list[str], bool]] = []

    def prefetch(store: Store, digests: Iterable[str], *, first: bool = False) -> None:
        hints.append((list(digests), first))

    monkeypatch.setattr(LocalStore, "prefetch", prefetch)
    dataset = rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15, seed=3)
    read = [s["meta"]["segment"] for s in dataset.__getitems__(list(range(len(dataset))))]
    objects = {s.segment_id: s.objects for s in slice_.segments}
    by_first_use = [o for sid in dict.fromkeys(read) for o in objects[sid]]
    in_slice_order = [o for s in slice_.segments for o in s.objects]
    assert by_first_use != in_slice_order  # seed 3 shuffles the episodes' first reads
    # (then, after the first batch, the map dataset's own hint: the segments it has not read)
    assert hints[:2] == [(in_slice_order, False), (by_first_use, True)]


def test_offline_error_names_the_slice_to_pull(https_catalog: Https,
                                               local_catalog: rayform.Catalog, cache_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    made = rayform.Client(local_catalog).slices.create("robots")
    remote = rayform.Client(https_catalog.url).slices.get(made.id)
    ds = rayform.torch.EpisodeDataset(remote, obs=["joints/position"], fps=15)
    cache = ObjectCache(cache_dir)
    deadline = time.monotonic() + 20
    while not all(cache.path_of(d).exists() for d in made.objects()):  # read ahead when built
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for digest in made.objects():  # the metadata stays cached, the recordings go
        cache.path_of(digest).unlink()
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    fresh = rayform.torch.EpisodeDataset(rayform.Client(https_catalog.url).slices.get(made.id),
                                         obs=["joints/position"], fps=15)
    with pytest.raises(OfflineError, match=rf"rayform pull {made.id}"):
        fresh[0]
    del ds


def test_frame_conversion(tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(tmp_path / "cat")
    ds = catalog.create_dataset("robots")
    ds.register([write_episode(tmp_path / "a.rfr", "ros-ep", seed=0, convention="ros"),
                 write_episode(tmp_path / "b.rfr", "cv-ep", seed=0, convention="opencv")]).wait()
    slice_ = rayform.Client(catalog).slices.create("robots")
    frames = np.arange(24)
    expected = {"ros": np.concatenate(pose_ros(0, frames), axis=1),
                "opencv": np.concatenate(pose_opencv(0, frames), axis=1)}
    for frame in ("ros", "opencv"):
        data = rayform.torch.EpisodeDataset(slice_, obs=["ee/pose"], action="ee/pose", fps=15,
                                            horizon=2, frame=frame, seed=None)
        for s in data:
            f = (int(s["t_ns"]) - EPOCH_NS) // FRAME_NS
            np.testing.assert_allclose(s["ee/pose"].numpy(), expected[frame][f], atol=1e-6)
            np.testing.assert_allclose(s["action"].numpy(), expected[frame][[f, f + 2]],
                                       atol=1e-6)
    with pytest.raises(ConfigError, match="'ned' is not a known coordinate convention"):
        rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15, frame="ned")


def test_poses_need_a_declared_convention(tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(tmp_path / "cat")
    catalog.create_dataset("robots").register(
        write_episode(tmp_path / "a.rfr", "ep", seed=0, properties={"frame_convention": None})
    ).wait()
    slice_ = rayform.Client(catalog).slices.create("robots")
    with pytest.raises(ConfigError, match="'ep' holds poses but declares no"):
        rayform.torch.EpisodeDataset(slice_, obs=["ee/pose"], fps=15)
    assert len(rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15)) > 0


def test_time_range_and_bad_observations(guide_catalog: rayform.Catalog) -> None:
    slices = rayform.Client(guide_catalog).slices
    start = np.datetime64(EPOCH_NS + 10 * FRAME_NS, "ns")
    part = slices.create("robots", time_range=(start, start + np.timedelta64(500, "ms")))
    ds = rayform.torch.EpisodeDataset(part, obs=["joints/position"], fps=15)
    times = [int(s["t_ns"]) for s in ds]
    assert len(times) == 3 * 8
    assert min(times) >= EPOCH_NS + 10 * FRAME_NS
    assert max(times) <= EPOCH_NS + 10 * FRAME_NS + 500_000_000
    whole = slices.create("robots")
    with pytest.raises(ColumnNotFoundError, match="no entity /cam9"):
        rayform.torch.EpisodeDataset(whole, obs=["cam9"], fps=15)
    with pytest.raises(ConfigError, match="list of entity paths"):
        rayform.torch.EpisodeDataset(whole, obs="cam0/rgb", fps=15)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="reserved"):
        rayform.torch.EpisodeDataset(whole, obs=["t_ns"], fps=15)


def test_ddp_two_ranks_with_gloo(guide_catalog: rayform.Catalog, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    slice_id = rayform.Client(guide_catalog).slices.create("robots").id
    script = Path(__file__).with_name("ddp_worker.py")
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(tmp_path / "init"),
                               guide_catalog.url, slice_id, str(outs[r])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=os.environ.copy()) for r in range(2)]
    logs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    ranks = [json.loads(o.read_text()) for o in outs]
    n = ranks[0]["len"]
    assert n == 90
    every = {(s, t) for s, t in keys_of(list(rayform.torch.EpisodeDataset(
        rayform.Client(guide_catalog).slices.get(slice_id), obs=["cam0/rgb"], fps=15)))}
    # Iterated directly: each rank a disjoint, equal part of the epoch.
    direct = [{tuple(k) for k in r["direct"]} for r in ranks]
    assert ranks[0]["sizes"] == [n // 2, n // 2]
    assert not direct[0] & direct[1]
    assert direct[0] | direct[1] == every
    # Through DistributedSampler: the sampler shards, the dataset does not shard again.
    sampled = [{tuple(k) for k in r["sampler"]} for r in ranks]
    assert [len(r["sampler"]) for r in ranks] == [n // 2, n // 2]
    assert not sampled[0] & sampled[1]
    assert sampled[0] | sampled[1] == every
    # The guide's DataLoader(shuffle=True) without a sampler: the dataset shards by rank.
    assert [r["plain_len"] for r in ranks] == [n // 2, n // 2]
    assert [r["num_samples"] for r in ranks] == [n, n]
    plain = [[tuple(k) for k in r["plain"]] for r in ranks]
    assert [len(p) for p in plain] == [n // 2, n // 2]
    assert not set(plain[0]) & set(plain[1])
    assert set(plain[0]) | set(plain[1]) == every


def test_spawned_workers(guide_catalog: rayform.Catalog) -> None:
    slice_ = rayform.Client(guide_catalog).slices.create("robots", segments=["ep1"])
    ds = rayform.torch.EpisodeDataset(slice_, obs=["cam0/rgb", "joints/position"], fps=15,
                                      action="joints/position_delta", horizon=3)
    ds.set_epoch(5)
    loader = DataLoader(ds, batch_size=8, num_workers=1, multiprocessing_context="spawn")
    batches = list(loader)
    assert unbatch(batches) == keys_of([ds[i] for i in range(len(ds))])
    assert batches[0]["action"].shape == (8, 3, 7)


def test_a_horizon_longer_than_every_episode_is_refused(guide_catalog: rayform.Catalog) -> None:
    slice_ = rayform.Client(guide_catalog).slices.create("robots")
    with pytest.raises(ConfigError, match=r"EpisodeDataset has no samples: horizon=1000 at fps=15 "
                                          r"spans 66.6 s.*longest of the 3 segments.*"
                                          r"use horizon <= 3\d, or edge='pad'"):
        rayform.torch.EpisodeDataset(slice_, obs=OBS, action="joints/position_delta", fps=15,
                                     horizon=1000)
    padded = rayform.torch.EpisodeDataset(slice_, obs=OBS, action="joints/position_delta",
                                          fps=15, horizon=1000, edge="pad")
    assert len(padded) > 0


def test_a_raw_hdf5_camera_is_an_image_observation(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(3)
    top = rng.integers(0, 256, (20, 12, 16, 3), dtype=np.uint8)  # ALOHA's raw uint8 (T, H, W, 3)
    with h5py.File(tmp_path / "episode_0.hdf5", "w") as root:
        root.attrs["sim"] = True
        root["observations/images/top"] = top
        root["observations/qpos"] = rng.standard_normal((20, 14))
        root["action"] = rng.standard_normal((20, 14))
    catalog = rayform.Catalog.create(tmp_path / "catalog")
    aloha = catalog.create_dataset("aloha")
    aloha.register(tmp_path / "episode_0.hdf5",
                   import_options=rayform.catalog.ImportOptions(rate_hz=50)).wait()
    slice_ = rayform.Client(catalog).slices.create("aloha")
    ds = rayform.torch.EpisodeDataset(slice_, obs=["observations/images/top"], action="action",
                                      fps=50, horizon=2, seed=None)
    assert len(ds) > 0
    for i in (0, len(ds) - 1):
        sample = ds[i]
        frame = int(sample["t_ns"]) // 20_000_000  # the exact 50 Hz frame grid
        image = sample["observations/images/top"]
        assert image.dtype == torch.uint8 and image.shape == (3, 12, 16)
        assert np.array_equal(image.numpy().transpose(1, 2, 0), top[frame])
    batch = next(iter(DataLoader(ds, batch_size=4)))
    assert batch["observations/images/top"].shape == (4, 3, 12, 16)
