"""``rayform export`` (LeRobot v3.0, ``.rrd``) and ``rayform view`` (a segment in the Rerun viewer)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rayform.cli._args import add_command, catalog_url, positive_float
from rayform.cli._errors import CommandError, UsageError
from rayform.cli._register import add_ray_option, connect_ray

if TYPE_CHECKING:
    from rayform.catalog import DatasetEntry, DatasetView

VIEWER_ENV = "RAYFORM_VIEWER"
VIEWER_WAIT_S = 2.0  # a viewer that cannot open a window (no X server) fails within this
FPS_PROPERTY = "property:fps"


def selected(dataset: DatasetEntry, segment_ids: list[str]) -> DatasetView:
    """The dataset, or the view of ``segment_ids``; an unknown id is an error naming it."""
    from rayform.errors import SegmentNotFoundError

    if not segment_ids:
        return dataset
    known = dataset.segment_ids()
    for segment_id in segment_ids:
        if segment_id not in known:
            shown = ", ".join(known[:5]) + (", …" if len(known) > 5 else "")
            raise SegmentNotFoundError(
                f"no segment {segment_id!r} in dataset {dataset.name!r}; its segments: {shown} "
                f"(all of them: rayform segments {dataset.name})"
            )
    return dataset.filter_segments(segment_ids)


def refuse_overwrite(path: Path, *, force: bool) -> None:
    if path.exists() and not force:
        raise CommandError(f"{path} exists; pass --force to overwrite it")


def _export_rrd(view: DatasetView, args: argparse.Namespace) -> int:
    from rayform.exporters import export_rrd

    ids = view.segment_ids()
    if len(ids) != 1:
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        raise UsageError(f"export rrd writes one segment; name it with --segment ID (dataset "
                         f"{view.name!r} has {len(ids)}: {shown})")
    out = Path(args.out)
    refuse_overwrite(out, force=args.force)
    print(f"wrote {export_rrd(view, ids[0], out)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    dataset = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    view = selected(dataset, args.segment)
    if args.format == "rrd":
        return _export_rrd(view, args)
    if args.fps is None:
        args.fps = recorded_fps(view)
        print(f"using --fps {args.fps:g}: every segment's property:fps", file=sys.stderr)
    if connect_ray(args):
        from rayform.ray import export_lerobot as ray_export

        result = ray_export(view, args.out, fps=args.fps, timeline=args.timeline)
    else:
        from rayform.exporters import export_lerobot

        result = export_lerobot(view, args.out, fps=args.fps, timeline=args.timeline,
                                progress=sys.stderr.isatty())
    print(f"wrote LeRobot v3.0 dataset {result.root}: {result.num_episodes} episodes, "
          f"{result.num_frames} frames, features {', '.join(result.features)}")
    return 0


def recorded_fps(view: DatasetView) -> float:
    """The frame rate every segment of ``view`` declares in ``property:fps`` (a LeRobot import).

    Raises:
        UsageError: no such property, or segments that disagree: ``--fps`` must say it.
    """
    table = view.segment_table_arrow()
    column = FPS_PROPERTY if FPS_PROPERTY in table.column_names else None
    rates = set() if column is None else set(table.column(column).to_pylist())
    if len(rates) == 1 and None not in rates:
        (rate,) = rates
        if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
            return float(rate)
    found = "no segment has property:fps" if not rates else (
        f"the segments' property:fps differ: {sorted(map(str, rates))}")
    raise UsageError(f"export lerobot needs --fps, the frame rate of the LeRobot dataset's grid "
                     f"({found})")


def has_display() -> bool:
    """Whether a window can open here (macOS and Windows always; elsewhere X11 or Wayland)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def viewer_command() -> list[str]:
    """``$RAYFORM_VIEWER`` (a command line), else the Rerun viewer rerun-sdk installs: its
    ``rerun`` script beside this Python, or on PATH."""
    if os.environ.get(VIEWER_ENV):
        return shlex.split(os.environ[VIEWER_ENV])
    beside = Path(sys.executable).with_name("rerun")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("rerun")
    return [found] if found else [sys.executable, "-m", "rerun"]


def cmd_view(args: argparse.Namespace) -> int:
    from rayform._defaults import default_cache_dir
    from rayform.catalog import Catalog
    from rayform.exporters import export_rrd

    dataset = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    view = selected(dataset, [args.segment])
    if args.out is None:
        out = default_cache_dir() / "view" / dataset.name / f"{args.segment}.rrd"
    else:
        out = Path(args.out)
        refuse_overwrite(out, force=args.force)
    path = export_rrd(view, args.segment, out)
    print(path)
    if args.no_spawn or not has_display():
        reason = "--no-spawn" if args.no_spawn else "no display: DISPLAY and WAYLAND_DISPLAY are unset"
        print(f"wrote the recording ({reason}); open it where there is a display with: "
              f"rerun {path}", file=sys.stderr)
        return 0
    start_viewer([*viewer_command(), str(path)], path)
    print("opening it in the Rerun viewer", file=sys.stderr)
    return 0


def start_viewer(command: list[str], path: Path) -> None:
    """Start the viewer on ``path`` and wait :data:`VIEWER_WAIT_S` for it to fail.

    A viewer still running then, or one that handed the file to a running viewer and exited 0,
    succeeded.

    Raises:
        CommandError: the viewer could not start or exited with an error (no X server, …); the
            message keeps the recording and says how to open it elsewhere.
    """
    keep = (f"the recording is kept at {path}; open it where a viewer can run with: "
            f"rerun {shlex.quote(str(path))}")
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=log)
        except OSError as err:
            raise CommandError(f"the Rerun viewer did not start ({shlex.join(command[:-1])}: "
                               f"{err.strerror or err}); {keep}") from err
        try:
            status = proc.wait(timeout=VIEWER_WAIT_S)
        except subprocess.TimeoutExpired:
            return
        if status == 0:
            return
        log.seek(0)
        said = [line.strip() for line in log.read().decode(errors="replace").splitlines()
                if line.strip()]
    why = f": {said[-1]}" if said else ""
    raise CommandError(f"the Rerun viewer exited with status {status}{why}; {keep}")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "export",
                    summary="export to LeRobot v3.0 (a dataset) or Rerun .rrd (one segment)",
                    example="rayform export lerobot demo demo_lerobot --fps 15")
    p.add_argument("format", choices=["lerobot", "rrd"], help="lerobot (a folder) or rrd (a file)")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("out", help="the output folder (lerobot) or .rrd file")
    p.add_argument("--segment", action="append", default=[], metavar="ID",
                   help="only this segment (repeatable; rrd needs exactly one)")
    p.add_argument("--fps", type=positive_float, default=None,
                   help="lerobot: the frame rate of the output grid (default: the segments' "
                        "property:fps, which LeRobot imports have)")
    p.add_argument("--timeline", default=None,
                   help="lerobot: the timeline of the grid (default: the one every column shares)")
    p.add_argument("--force", action="store_true",
                   help="rrd: replace an existing file (lerobot never writes into a non-empty "
                        "folder)")
    add_ray_option(p)
    p.set_defaults(func=cmd_export)

    p = add_command(sub, "view", summary="open one segment in the Rerun viewer",
                    example="rayform view demo episode_000",
                    details="Writes the segment as a .rrd file (rayform[rerun]) and starts the "
                            "viewer rerun-sdk installs; without a display (no DISPLAY or "
                            "WAYLAND_DISPLAY), or with --no-spawn, only writes the file and says "
                            "how to open it. A viewer that fails at start (e.g. no X server) is "
                            "an error (exit 1) that keeps the file and says how to open it.")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("segment", help="the segment id (see rayform segments DATASET)")
    p.add_argument("--out", default=None, metavar="FILE.rrd",
                   help="where to write the recording (default: the cache, "
                        "~/.cache/rayform/view/DATASET/SEGMENT.rrd)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--no-spawn", action="store_true", help="write the file, do not start a viewer")
    p.set_defaults(func=cmd_view)
