"""Every format registers (and exports) with torch absent: the catalog layers never import it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from format_sources import synthetic_frames, write_lerobot_v21, write_lerobot_v30
from mcap_sources import write_ros2_mcap
from recording_factories import RobotEpisode, write_robot_episode
from rlds_sources import SyntheticEpisode, write_rlds_builder
from rosbag_sources import write_ros1_bag, write_rosbag2
from rrd_sources import write_rrd
from zarr_sources import write_replay_buffer

from rayform.media import write_video_mp4

_REGISTER_WITHOUT_TORCH = textwrap.dedent("""
    import json, sys, warnings
    sys.modules["torch"] = None  # any `import torch` now raises ImportError
    warnings.simplefilter("ignore")  # conversion warnings are not what this test checks
    import rayform.catalog
    from rayform.catalog import Catalog
    from rayform.exporters import export_lerobot, export_rrd

    sources = json.loads(sys.argv[1])
    catalog = Catalog.create(sys.argv[2])
    counts = {}
    for name, path in sources.items():
        dataset = catalog.create_dataset(name)
        counts[name] = len(dataset.register(path).wait().segment_ids)
    mp4 = catalog.get_dataset("mp4")
    export_lerobot(mp4, sys.argv[3], fps=10)
    native = catalog.get_dataset("native")
    export_rrd(native, native.segment_ids()[0], sys.argv[4])
    loaded = sorted(m for m, mod in sys.modules.items()
                    if mod is not None and (m == "torch" or m.startswith("torch.")))
    print(json.dumps({"counts": counts, "torch_modules": loaded}))
""")


@pytest.mark.slow
def test_every_format_registers_with_torch_blocked(tmp_path: Path) -> None:
    pytest.importorskip("rerun")
    pytest.importorskip("mcap_ros2")
    pytest.importorskip("av")
    pytest.importorskip("rosbags")
    pytest.importorskip("zarr")
    pytest.importorskip("google_crc32c")
    src = tmp_path / "src"
    src.mkdir()
    write_lerobot_v21(src / "lerobot21", lengths={0: 4, 1: 3}, video=True)
    write_lerobot_v30(src / "lerobot30", lengths={0: 4, 1: 3})
    write_rrd(src / "rec.rrd", "rec", num_frames=6)
    write_ros2_mcap(src / "run.mcap", with_bad_schema=False)
    write_video_mp4(src / "clip.mp4", synthetic_frames(6), codec="h264", gop=3, fps=10)
    write_robot_episode(src / "ep.rfr", RobotEpisode(recording_id="ep", num_frames=6))
    write_ros1_bag(src / "run.bag")
    write_rosbag2(src / "db3_bag", storage="sqlite3")
    write_rlds_builder(src / "rlds", {"train": [[SyntheticEpisode(3, 1), SyntheticEpisode(2, 2)]]})
    write_replay_buffer(str(src / "buf.zarr"), [2, 3, 1])
    sources = {
        "native": str(src / "ep.rfr"),
        "rrd": str(src / "rec.rrd"),
        "mcap": str(src / "run.mcap"),
        "lerobot21": str(src / "lerobot21"),
        "lerobot30": str(src / "lerobot30"),
        "mp4": str(src / "clip.mp4"),
        "rosbag1": str(src / "run.bag"),
        "rosbag2_sqlite3": str(src / "db3_bag"),
        "rlds": str(src / "rlds"),
        "zarr": str(src / "buf.zarr"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _REGISTER_WITHOUT_TORCH, json.dumps(sources),
         str(tmp_path / "catalog"), str(tmp_path / "out-lerobot"), str(tmp_path / "out.rrd")],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["counts"] == {"native": 1, "rrd": 1, "mcap": 1, "lerobot21": 2,
                                "lerobot30": 2, "mp4": 1, "rosbag1": 1, "rosbag2_sqlite3": 1,
                                "rlds": 2, "zarr": 3}
    assert result["torch_modules"] == []
    assert (tmp_path / "out-lerobot" / "meta" / "info.json").is_file()
    assert (tmp_path / "out.rrd").stat().st_size > 0
