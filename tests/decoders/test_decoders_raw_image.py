"""RawImageDecoder: raw Image:buffer frames read with their Image:format, pixel-exact."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch
from hdf5_sources import ALOHA_CAMERAS, write_aloha

from rayform.catalog import Catalog, ImportOptions
from rayform.dataloader import DataSource, Field, ImageDecoder, RerunMapDataset
from rayform.decoders import DecodeRequest, FieldBatch, RawImageDecoder
from rayform.errors import ConfigError, DecodeError

RGB8 = {"width": 4, "height": 2, "pixel_format": None, "color_model": 2, "channel_datatype": 6}


def _column(frames: Sequence[bytes | None]) -> pa.Array:
    return pa.array([None if f is None else [f] for f in frames], pa.list_(pa.binary()))


def _decode(decoder: RawImageDecoder, column: pa.Array, outputs: Sequence[Sequence[int]], *,
            windowed: bool = False, failures: list[str] | None = None
            ) -> list[torch.Tensor | None]:
    requests = [DecodeRequest(i, "s", i, tuple(sorted(set(o))), tuple(o))
                for i, o in enumerate(outputs)]
    batch = FieldBatch(column=column, is_windowed=windowed, path="/cam:Image:buffer",
                       on_failure=None if failures is None
                       else (lambda _r, why: failures.append(why)))
    return list(decoder.decode(batch, requests))


def _frames(count: int, h: int, w: int, c: int, dtype: Any = np.uint8) -> np.ndarray:
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (count, h, w, c), dtype=dtype, endpoint=True)


def test_rgb8_frames_come_back_chw_with_the_stored_bytes() -> None:
    frames = _frames(3, 2, 4, 3)
    out = _decode(RawImageDecoder(RGB8), _column([f.tobytes() for f in frames]), [[0], [2], [1]])
    for got, row in zip(out, (0, 2, 1), strict=True):
        assert got is not None and got.dtype == torch.uint8 and got.shape == (3, 2, 4)
        assert got.is_contiguous()
        assert np.array_equal(got.numpy().transpose(1, 2, 0), frames[row])


def test_bgr_is_reordered_to_rgb_and_grey_uint16_keeps_its_dtype() -> None:
    frames = _frames(1, 2, 4, 3)
    bgr = dict(RGB8, color_model=4)
    got = _decode(RawImageDecoder(bgr), _column([frames[0].tobytes()]), [[0]])[0]
    assert got is not None
    assert np.array_equal(got.numpy().transpose(1, 2, 0), frames[0][:, :, ::-1])
    deep = _frames(1, 2, 4, 1, np.uint16)
    mono16 = dict(RGB8, color_model=1, channel_datatype=8)
    got = _decode(RawImageDecoder(mono16), _column([deep[0].astype("<u2").tobytes()]), [[0]])[0]
    assert got is not None and got.dtype == torch.uint16 and got.shape == (1, 2, 4)
    assert np.array_equal(got.numpy()[0], deep[0, :, :, 0])


def test_a_window_stacks_frames_and_a_missing_row_is_none() -> None:
    frames = _frames(3, 2, 4, 3)
    column = _column([frames[0].tobytes(), None, frames[2].tobytes()])
    window, missing = _decode(RawImageDecoder(RGB8), column, [[0, 2, 2], [0, 1]], windowed=True)
    assert window is not None and window.shape == (3, 3, 2, 4)
    assert np.array_equal(window.numpy().transpose(0, 2, 3, 1), frames[[0, 2, 2]])
    assert missing is None


def test_a_buffer_of_the_wrong_length_is_a_reported_failure_naming_the_column() -> None:
    failures: list[str] = []
    out = _decode(RawImageDecoder(RGB8), _column([b"\x00" * 23]), [[0]], failures=failures)
    assert out == [None]
    assert len(failures) == 1
    assert "/cam:Image:buffer" in failures[0] and "23 bytes" in failures[0] and "24" in failures[0]


@pytest.mark.parametrize(("bad", "words"), [
    (dict(RGB8, pixel_format=26, color_model=None, channel_datatype=None), "pixel_format 26"),
    (dict(RGB8, color_model=9), "color_model 9"),
    (dict(RGB8, channel_datatype=99), "channel_datatype 99"),
    (dict(RGB8, width=0), "width and height"),
])
def test_a_format_it_cannot_read_is_a_config_error(bad: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        RawImageDecoder(bad)


def test_without_a_format_or_a_segment_the_decoder_says_what_it_needs() -> None:
    with pytest.raises(ConfigError, match="image_format"):
        _decode(RawImageDecoder(), _column([b"\x00" * 24]), [[0]])


# ------------------------------------------------------------------- an imported ALOHA episode
def test_aloha_raw_cameras_decode_to_the_frames_h5py_reads(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    src = tmp_path / "episode_0.hdf5"
    written = write_aloha(src, count=6, height=24, width=32)
    catalog = Catalog.create(tmp_path / "catalog")
    ds = catalog.create_dataset("aloha")
    ds.register(src, import_options=ImportOptions(rate_hz=50)).wait()
    fields = {cam: Field(f"/observations/images/{cam}:Image:buffer", RawImageDecoder())
              for cam in ALOHA_CAMERAS}
    data = RerunMapDataset(DataSource(ds), "frame_index", fields)
    assert len(data) == 6
    for i in range(6):
        sample = data[i]
        for cam in ALOHA_CAMERAS:
            got = sample[cam]
            assert got.dtype == torch.uint8 and got.shape == (3, 24, 32)
            assert got.numpy().transpose(1, 2, 0).tobytes() == \
                written[f"observations/images/{cam}"][i].tobytes()
    # Rerun's ImageDecoder opens encoded files only: on a raw buffer it has nothing to decode.
    encoded = RerunMapDataset(DataSource(ds), "frame_index", {
        "top": Field("/observations/images/top:Image:buffer", ImageDecoder())})
    with pytest.raises(DecodeError):
        encoded[0]


def test_an_image_logged_with_the_rerun_sdk_decodes_to_what_was_logged(tmp_path: Path) -> None:
    rr = pytest.importorskip("rerun")
    path = tmp_path / "raw.rrd"
    rec = rr.RecordingStream("rayform-tests", recording_id="raw")
    rec.save(path)
    rgb = _frames(3, 5, 7, 3)
    for frame in range(3):
        rec.set_time("frame", sequence=frame)
        rec.log("/cam", rr.Image(rgb[frame], color_model="BGR"))
        rec.log("/depth", rr.Image(rgb[frame, :, :, 0].astype(np.uint16) * 200,
                                   color_model="L"))
    rec.flush()
    rec.disconnect()
    catalog = Catalog.create(tmp_path / "catalog")
    ds = catalog.create_dataset("rerun")
    ds.register(path).wait()
    data = RerunMapDataset(DataSource(ds), "frame", {
        "cam": Field("/cam:Image:buffer", RawImageDecoder()),
        "depth": Field("/depth:Image:buffer", RawImageDecoder())})
    for frame in range(3):
        sample = data[frame]
        # Logged as BGR: the viewer shows (and the decoder gives) the channels reversed.
        assert np.array_equal(sample["cam"].numpy().transpose(1, 2, 0), rgb[frame][:, :, ::-1])
        assert sample["depth"].dtype == torch.uint16
        assert np.array_equal(sample["depth"].numpy()[0],
                              rgb[frame, :, :, 0].astype(np.uint16) * 200)
