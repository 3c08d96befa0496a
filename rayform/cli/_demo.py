"""``rayform demo``: write the demo catalog, summarise it in SQL, and show where to go next."""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import textwrap

from rayform._defaults import default_catalog_url
from rayform.cli._args import add_command, catalog_url, positive_int
from rayform.cli._printing import OutputFormat, print_table

NEXT_SQL = 'SELECT rerun_segment_id, "property:task", "property:success" FROM demo.segments'


def next_steps(url: str, first_segment: str) -> str:
    """Three things to try next, as text to copy: a query, Python that loads the data, the viewer."""
    default = os.path.abspath(os.path.expanduser(default_catalog_url()))
    catalog = "" if url == default else f" --catalog {shlex.quote(url)}"
    python = textwrap.dedent(f"""\
        import rayform
        from torch.utils.data import DataLoader
        from rayform.dataloader import (DataSource, Field, FixedRateSampling, NumericDecoder,
                                        RerunMapDataset)

        demo = rayform.Catalog.open({url!r}).get_dataset("demo")
        fields = {{"state": Field("/joints/position:Scalars:scalars", decode=NumericDecoder()),
                  "action": Field("/joints/position_delta:Scalars:scalars", decode=NumericDecoder(),
                                  window=tuple(k / 15 for k in range(16)))}}
        samples = RerunMapDataset(DataSource(demo), "real_time", fields,
                                  timeline_sampling=FixedRateSampling(rate_hz=15))
        loader = DataLoader(samples, batch_size=32, shuffle=True)
        print(next(iter(loader))["action"].shape)""")
    return "\n".join([
        "next steps:",
        "  1. query it from the shell:",
        f"     rayform{catalog} sql {shlex.quote(NEXT_SQL)}",
        "  2. load it in Python (README.md, docs/dataloader.md):",
        textwrap.indent(python, "     "),
        "  3. look at an episode in the Rerun viewer:",
        f"     rayform{catalog} view demo {first_segment}",
    ])


# What the demo needs, and the one extra that brings all of it.
DEMO_PACKAGES = {"torch": "PyTorch", "PIL": "Pillow", "av": "PyAV"}
DEMO_EXTRA = "torch"


def missing_packages() -> list[str]:
    """The demo's packages that do not import here."""
    missing = []
    for module in DEMO_PACKAGES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def cmd_demo(args: argparse.Namespace) -> int:
    from rayform.cli._errors import CommandError, install_hint

    missing = missing_packages()
    if missing:
        names = ", ".join(f"{DEMO_PACKAGES[m]} ({m!r})" for m in missing)
        raise CommandError(f"rayform demo needs {names}: {install_hint(DEMO_EXTRA)} brings "
                           f"{', '.join(DEMO_PACKAGES.values())}")
    from rayform.demo import SUMMARY_SQL, DemoSpec, build_demo, existing_demo

    url = catalog_url(args)
    spec = DemoSpec(num_episodes=args.episodes)
    kept = None if args.replace else existing_demo(url)
    if kept is not None:  # one line; the summary and the timed epochs only when asked
        count = len(kept.segment_ids())
        asked = "" if count == args.episodes else f" (not {args.episodes})"
        print(f"kept the existing demo dataset at {url}: {count} episode"
              f"{'' if count == 1 else 's'}{asked}; "
              f"--replace rewrites it with --episodes N", file=sys.stderr)
        return 0
    print(f"writing the demo catalog at {url} …", file=sys.stderr)
    dataset = build_demo(url, spec, replace=args.replace, progress=sys.stderr.isatty())
    print(f"dataset {dataset.name!r}: {len(dataset.segment_ids())} episodes, "
          f"columns: {', '.join(dataset.schema().component_columns())}")
    table = dataset.catalog.sql(SUMMARY_SQL).to_arrow_table()
    print_table(table, OutputFormat())
    print("\nthe SQL behind this summary:")
    print(textwrap.indent(textwrap.dedent(SUMMARY_SQL).strip(), "  "))
    from rayform.demo import loader_pass

    print()
    print(loader_pass(dataset, progress=sys.stderr.isatty()))
    print()
    print(next_steps(dataset.catalog.url, dataset.segment_ids()[0]))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "demo", summary="write the demo catalog and print what is in it",
                    example="rayform demo --episodes 2",
                    details="A synthetic 7-joint arm: joints at 100 Hz, a JPEG camera (cam0/rgb) "
                            "and an H.264 camera (wrist/rgb) at 30 Hz, in dataset 'demo'. Needs "
                            "rayform[torch] (PyAV and Pillow come with it).")
    p.add_argument("--episodes", type=positive_int, default=4, metavar="N",
                   help="how many 4-second episodes to write (default: 4)")
    p.add_argument("--replace", action="store_true",
                   help="rewrite an existing demo dataset (otherwise it is kept as it is)")
    p.set_defaults(func=cmd_demo)
