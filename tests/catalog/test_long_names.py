"""Long but legal names (a 250-character recording name) register: temporaries and asset folders
derived from a name stay within the 255-byte limit of a file name."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rayform._atomic import write_atomic
from rayform.catalog import Catalog, RecordingWriter
from rayform.recording._writer import asset_dir_for


def test_a_250_character_recording_with_an_asset_registers(tmp_path: Path,
                                                           catalog: Catalog) -> None:
    segment_id = "a" * 250
    path = tmp_path / f"{segment_id}.rfr"
    with RecordingWriter(path, recording_id=segment_id) as rec:
        rec.add_asset(b"side file", media_type="text/plain")
        rec.log_scalars("/x", timelines={"frame_index": np.arange(3)}, values=np.ones((3, 1)))
    assert len(asset_dir_for(path).name.encode()) <= 255
    ds = catalog.create_dataset("long")
    ds.register(path)
    assert ds.segment_ids() == [segment_id]


def test_atomic_writes_to_a_255_byte_name(tmp_path: Path) -> None:
    dest = tmp_path / ("b" * 255)
    write_atomic(dest, b"x")
    assert dest.read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [dest.name]
