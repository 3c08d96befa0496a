"""Sub-commands that create, index and list a catalog: init, index, datasets, segments, schema."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rayform.cli._args import (
    add_command,
    add_output_options,
    catalog_url,
    output_format,
)
from rayform.cli._lifecycle import add_dataset_actions
from rayform.cli._printing import print_table

if TYPE_CHECKING:
    from rayform.catalog import DatasetView

SHOWN_NAMES = 4  # a table shows this many dimension names of a column (csv and json: all)

# Columns of the segment table a terminal-sized listing leaves out (``--all-columns`` shows them).
WIDE_SEGMENT_COLUMNS = ("rerun_layer_names", "rerun_storage_urls", "rerun_last_updated_at",
                        "rayform_segment_version")


def _catalog_of(args: argparse.Namespace) -> str:
    return str(args.path) if args.path is not None else catalog_url(args)


def cmd_init(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    cat = Catalog.create(_catalog_of(args))
    print(f"catalog ready at {cat.url}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog, index_catalog

    url = _catalog_of(args)
    Catalog.open(url)  # refuse a folder that is not a catalog
    count = index_catalog(url)
    print(f"wrote the listing files of {count} folders in {url}; publish the folder as it is, "
          "hidden .listing.json files included")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from rayform.catalog import Catalog

    rows = [{"dataset": d.name, "segments": len(d.segment_ids()), "version": d.snapshot_version}
            for d in Catalog.open(catalog_url(args)).datasets()]
    schema = pa.schema([("dataset", pa.string()), ("segments", pa.int64()), ("version", pa.int64())])
    print_table(pa.Table.from_pylist(rows, schema=schema), output_format(args))
    return 0


def cmd_segments(args: argparse.Namespace) -> int:
    from rayform.catalog import Catalog

    table = Catalog.open(catalog_url(args)).get_dataset(args.dataset).segment_table_arrow()
    if args.format == "table" and not args.all_columns:
        table = table.drop_columns([c for c in WIDE_SEGMENT_COLUMNS if c in table.column_names])
    print_table(table, output_format(args))
    return 0


def _type_text(kind: object, width: int | None) -> str:
    """``list<item: float>`` as ``list<float>``, with ``[26]`` when every row has 26 values."""
    import pyarrow as pa

    if isinstance(kind, pa.ListType | pa.LargeListType | pa.FixedSizeListType):
        head = "fixed_size_list" if isinstance(kind, pa.FixedSizeListType) else (
            "large_list" if isinstance(kind, pa.LargeListType) else "list")
        return f"{head}<{kind.value_type}>" + ("" if width is None else f"[{width}]")
    return str(kind)


def vector_widths(dataset: DatasetView, columns: list[str]) -> dict[str, int]:
    """Per numeric list column, its row length when one segment's rows all share it (the first
    segment holding the column is read)."""
    import pyarrow.compute as pc

    from rayform.catalog._accumulator import is_numeric_list

    schema = dataset.schema()
    wanted = [c for c in columns if is_numeric_list(schema.field(c).type)]
    widths: dict[str, int] = {}
    records = dataset.segment_records() if wanted else []
    for column in wanted:
        entity, _, component = column.partition(":")
        for record in records:
            info = record.entities.get(entity)
            if info is None or component not in info.components or not info.ranges:
                continue
            rows = dataset.open_segment(record.segment_id).column(column, next(iter(info.ranges)))
            lengths = pc.unique(pc.list_value_length(rows.values)).to_pylist()
            if len(lengths) == 1 and lengths[0] is not None:
                widths[column] = int(lengths[0])
            break
    return widths


def image_shapes(dataset: DatasetView, columns: list[str]) -> dict[str, str]:
    """Per raw image column (``…:Image:buffer``), its frames' shape and datatype from the sibling
    ``Image:format`` (``"96×96×3 float32, RGB"``; the first segment holding it is read, and
    ``"varies"`` when its rows disagree)."""
    import pyarrow as pa

    from rayform.recording._columns import IMAGE_BUFFER, IMAGE_FORMAT
    from rayform.recording._image_format import describe_image_format

    wanted = [c for c in columns if c.endswith(":" + IMAGE_BUFFER)]
    shapes: dict[str, str] = {}
    records = dataset.segment_records() if wanted else []
    for column in wanted:
        entity = column[:-len(IMAGE_BUFFER) - 1]
        for record in records:
            info = record.entities.get(entity)
            if info is None or IMAGE_FORMAT not in info.components or not info.ranges:
                continue
            rows = dataset.open_segment(record.segment_id).column(
                f"{entity}:{IMAGE_FORMAT}", next(iter(info.ranges)))
            values = rows.values
            flat = values.flatten() if pa.types.is_list(values.type) else values
            distinct = {describe_image_format(v) for v in flat.drop_null().to_pylist()
                        if isinstance(v, dict)}
            if len(distinct) == 1 and None not in distinct:
                shapes[column] = str(distinct.pop())
            elif len(distinct) > 1:
                shapes[column] = "varies"
            break
    return shapes


def cmd_schema(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from rayform.catalog import Catalog, schema_gaps
    from rayform.catalog._statistics import dimension_names

    dataset = Catalog.open(catalog_url(args)).get_dataset(args.dataset)
    schema = dataset.schema()
    components = schema.component_columns()
    widths = vector_widths(dataset, components)
    shapes = image_shapes(dataset, components)
    names = dimension_names(dataset, widths)
    gaps = schema_gaps(dataset)  # the merged schema: which segments lack (part of) a column
    table = args.format == "table"
    rows = [{"column": name, "kind": "index",
             "type": f"{schema.timelines[name]} ({schema.field(name).type})",
             "names": "" if table else None, "segments": "" if table else None}
            for name in schema.index_columns()]
    for name in components:
        dims = list(names.get(name, ()))
        if table and len(dims) > SHOWN_NAMES:
            dims = [*dims[:SHOWN_NAMES], f"… ({len(dims)} names)"]
        gap = gaps[name].describe() if name in gaps else None
        rows.append({"column": name, "kind": "component",
                     "type": _type_text(schema.field(name).type, widths.get(name))
                             + (f" ({shapes[name]})" if name in shapes else ""),
                     "names": ", ".join(dims) or ("" if table else None),
                     "segments": gap or ("" if table else None)})
    fields = pa.schema([("column", pa.string()), ("kind", pa.string()), ("type", pa.string()),
                        ("names", pa.string()), ("segments", pa.string())])
    print_table(pa.Table.from_pylist(rows, schema=fields), output_format(args))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "init", summary="create an empty catalog (a directory)",
                    example="rayform init my-catalog")
    p.add_argument("path", nargs="?", default=None, metavar="PATH",
                   help="where to create it (default: --catalog, $RAYFORM_CATALOG or "
                        "~/.local/share/rayform/catalog)")
    p.set_defaults(func=cmd_init)

    p = add_command(sub, "index", summary="write the listing files a static HTTPS server needs",
                    example="rayform index my-catalog && rsync -a my-catalog/ web:/srv/catalog/",
                    details="Catalogs keep their listing files up to date by themselves; run this "
                            "on one written by an older rayform, or copied without its hidden "
                            "files, before serving it over https://.")
    p.add_argument("path", nargs="?", default=None, metavar="PATH",
                   help="the local catalog folder (default: --catalog)")
    p.set_defaults(func=cmd_index)

    p = add_command(sub, "datasets", summary="list the datasets, their segment counts and versions",
                    example="rayform datasets --format json",
                    details="`rayform datasets delete NAME` and `rayform datasets rename NAME "
                            "NEW_NAME` change them.")
    add_output_options(p)
    p.set_defaults(func=cmd_datasets)
    add_dataset_actions(p)

    p = add_command(sub, "segments", summary="print a dataset's segment table",
                    example="rayform segments demo --format csv > segments.csv",
                    details="A table leaves out " + ", ".join(WIDE_SEGMENT_COLUMNS)
                            + " unless --all-columns; csv and json hold every column.")
    p.add_argument("dataset", help="the dataset's name")
    p.add_argument("--all-columns", action="store_true",
                   help="also show layer names, storage URLs, update times and versions")
    add_output_options(p)
    p.set_defaults(func=cmd_segments)

    p = add_command(sub, "schema",
                    summary="print a dataset's timelines and columns, vector widths and names",
                    example="rayform schema demo")
    p.add_argument("dataset", help="the dataset's name")
    add_output_options(p, default_limit=1000)
    p.set_defaults(func=cmd_schema)
