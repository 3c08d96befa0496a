"""Decode failures in training follow the dataset's policy: raise (default) naming the segment,
entity and index value; skip with a warning; or None with a warning. Missing data is not a
failure, and unknown segment ids are refused."""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import (
    DataSource,
    Field,
    ImageDecoder,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
)
from rayform.errors import ConfigError, DecodeError, SegmentNotFoundError

NUM_FRAMES = 6
BAD_FRAME = 3
CAM = "/cam:EncodedImage:blob"
STEP = "/step:Scalars:scalars"
FAILURE = (r"dataset 'cams': field 'image' \(entity '/cam', column '/cam:EncodedImage:blob'\) "
           rf"of segment 'bad' at frame_index = {BAD_FRAME} could not be decoded: .*the image "
           r"bytes cannot be decoded")


def _jpeg(value: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (value, value, value)).save(buf, format="JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def cams(tmp_path_factory: pytest.TempPathFactory) -> DatasetEntry:
    """Segments 'good' and 'bad' (frame 3 of 'bad' holds bytes that are not an image) and
    'sparse' (no image at frame 2: missing data, not a failure)."""
    root = tmp_path_factory.mktemp("cams")
    paths = []
    for name in ("bad", "good", "sparse"):
        frames = np.arange(NUM_FRAMES)
        blobs = [_jpeg(10 * i) for i in frames]
        if name == "bad":
            blobs[BAD_FRAME] = b"\xff\xd8\xff\xe0 this is not a JPEG"
        cam_frames = frames[frames != 2] if name == "sparse" else frames
        with RecordingWriter(root / f"{name}.rfr", recording_id=name) as rec:
            rec.log_encoded_images("/cam", timelines={"frame_index": cam_frames},
                                   blobs=[blobs[i] for i in cam_frames], media_type="image/jpeg")
            rec.log_scalars("/step", timelines={"frame_index": frames}, values=frames)
        paths.append(root / f"{name}.rfr")
    dataset = Catalog.create(root / "catalog").create_dataset("cams")
    dataset.register(paths).wait()
    return dataset


FIELDS = {"image": Field(CAM, ImageDecoder()), "step": Field(STEP, NumericDecoder())}


def _map(cams: DatasetEntry, policy: str | None = None, segments: list[str] | None = None
         ) -> RerunMapDataset:
    options = {} if policy is None else {"on_decode_error": policy}
    return RerunMapDataset(DataSource(cams, segments=segments), "frame_index", FIELDS,
                           sample_metadata=True, **options)  # type: ignore[arg-type]


def _position(ds: RerunMapDataset, segment: str, frame: int) -> int:
    for i in range(len(ds)):
        local = ds.sample_index.global_to_local(i)
        if local[0].segment_id == segment and int(local[1]) == frame:
            return i
    raise AssertionError((segment, frame))


def test_map_dataset_raises_by_default_naming_segment_entity_and_index(cams: DatasetEntry
                                                                        ) -> None:
    ds = _map(cams)
    bad = _position(ds, "bad", BAD_FRAME)
    with pytest.raises(DecodeError, match=FAILURE):
        ds[bad]
    with pytest.raises(DecodeError, match=FAILURE):
        next(iter(DataLoader(ds, batch_size=len(ds))))
    assert ds[_position(ds, "bad", BAD_FRAME + 1)]["image"].shape == (3, 6, 8)


def test_missing_data_is_not_a_failure(cams: DatasetEntry) -> None:
    ds = _map(cams, segments=["sparse"])
    sample = ds[_position(ds, "sparse", 2)]  # latest-at serves frame 1's image
    assert sample["image"] is not None
    first = RerunMapDataset(DataSource(cams, segments=["sparse"]), "frame_index",
                            {"image": Field(CAM, ImageDecoder(), window=(-2, 0))})
    assert all(s["image"] is None or s["image"].shape[0] == 2 for s in first.__getitems__(
        list(range(len(first)))))


def test_skip_drops_failed_samples_from_the_batch_with_one_warning(cams: DatasetEntry) -> None:
    ds = _map(cams, "skip")
    everything = list(range(len(ds)))
    with pytest.warns(RuntimeWarning, match=FAILURE + r".*such samples are dropped") as record:
        batch = ds.__getitems__(everything)
        again = ds.__getitems__(everything)
    assert len(record) == 1
    assert len(batch) == len(again) == len(ds) - 1
    assert ("bad", BAD_FRAME) not in {(s["meta"]["segment_id"], s["meta"]["index_value"])
                                      for s in batch}
    with pytest.raises(DecodeError, match=FAILURE):
        ds[_position(ds, "bad", BAD_FRAME)]  # one item: nothing to give instead


def test_none_keeps_the_sample_with_a_warning(cams: DatasetEntry) -> None:
    ds = _map(cams, "none")
    bad = _position(ds, "bad", BAD_FRAME)
    with pytest.warns(RuntimeWarning, match=FAILURE + r".*such samples are None"):
        sample = ds.__getitems__([bad])[0]
    assert sample["image"] is None
    assert torch.equal(sample["step"], torch.tensor([float(BAD_FRAME)], dtype=torch.int64)
                       .to(sample["step"].dtype))


def test_iterable_dataset_raises_or_skips(cams: DatasetEntry) -> None:
    source = DataSource(cams)
    strict = RerunIterableDataset(source, "frame_index", FIELDS, shuffle_strategy=NoShuffle())
    with pytest.raises(DecodeError, match=FAILURE):
        list(strict)
    lenient = RerunIterableDataset(source, "frame_index", FIELDS, shuffle_strategy=NoShuffle(),
                                   on_decode_error="skip", sample_metadata=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        samples = list(lenient)
    messages = [str(w.message) for w in record]
    assert any(re.search(FAILURE + r".*such samples are dropped", m) for m in messages), messages
    kept = {(s["meta"]["segment_id"], s["meta"]["index_value"]) for s in samples}
    assert ("bad", BAD_FRAME) not in kept
    assert ("bad", BAD_FRAME + 1) in kept


def test_bad_policy_and_unknown_segments_are_refused(cams: DatasetEntry) -> None:
    with pytest.raises(ConfigError, match="on_decode_error must be 'raise', 'skip' or 'none'"):
        _map(cams, "ignore")
    with pytest.raises(SegmentNotFoundError, match=r"has no segment\(s\) \['typo'\]"):
        _map(cams, segments=["good", "typo"])
    with pytest.raises(SegmentNotFoundError, match=r"has no segment\(s\) \['typo'\]"):
        cams.filter_segments(["typo"])


def test_a_pickled_dataset_keeps_its_policy(cams: DatasetEntry, tmp_path: Path) -> None:
    import pickle

    ds = pickle.loads(pickle.dumps(_map(cams, "none")))
    with pytest.warns(RuntimeWarning, match="such samples are None"):
        assert ds.__getitems__([_position(ds, "bad", BAD_FRAME)])[0]["image"] is None


def test_skip_drops_the_same_samples_with_and_without_row_tables(
        cams: DatasetEntry, monkeypatch: pytest.MonkeyPatch) -> None:
    import rayform.dataloader._row_tables as row_tables

    ds = _map(cams, "skip")
    everything = list(range(len(ds)))
    with pytest.warns(RuntimeWarning, match=FAILURE):
        cached = ds.__getitems__(everything)
    assert ds.pipeline._row_tables["image"] is not None
    monkeypatch.setattr(row_tables, "ROW_TABLE_MAX_BYTES", 0)
    plain_ds = _map(cams, "skip")
    with pytest.warns(RuntimeWarning, match=FAILURE):
        plain = plain_ds.__getitems__(everything)
    assert plain_ds.pipeline._row_tables["image"] is None
    assert [s["meta"] for s in cached] == [s["meta"] for s in plain]
    for a, b in zip(cached, plain, strict=True):
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["step"], b["step"])
