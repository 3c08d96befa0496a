"""Freeze the signatures of rerun-sdk 0.41's dataloader and catalog client into a JSON golden file.

``test_dataloader_signatures.py`` compares rayform's API against this file, so it runs without
rerun-sdk. Regenerate (only when moving to another Rerun release) with an environment that has
``rerun-sdk==0.41.*`` installed::

    python tests/dataloader/make_rerun_signatures.py > tests/dataloader/rerun_0_41_signatures.json

torchvision (needed by Rerun's ``ImageDecoder`` module at import) is stubbed when absent: only
signatures are read, nothing is run.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import types
import warnings
from typing import Any

# (class, method) pairs whose signatures are part of the contract, besides every public name.
METHODS = {
    "DataSource": ["filter_segments"],
    "Field": ["to_recipe"],
    "FieldBatch": ["take_decode_rows", "take_output_rows"],
    "ColumnDecoder": ["decode", "prior_keyframe_path"],
    "SampleIndex": ["build", "global_to_local", "resolve_local_index", "offset_index",
                    "output_index_values"],
    "ShuffleStrategy": ["epoch_order", "emission_buffer"],
    "RerunMapDataset": ["from_manifest", "__getitem__", "__getitems__"],
    "RerunIterableDataset": ["from_manifest", "set_epoch"],
    "Manifest": ["generate", "from_parquet", "write_parquet", "shuffle", "to_arrow",
                 "validate_topology", "worker_assignments", "worker_plan"],
    "Yuv420Frame": ["stack", "clone", "pin_memory", "to_rgb"],
    "PooledBatchCollator": ["stats"],
}
CATALOG_CLIENT_METHODS = ["entries", "datasets", "tables", "entry_names", "dataset_names",
                          "table_names", "get_dataset", "get_table", "create_dataset",
                          "create_table"]


def _stub_torchvision() -> None:
    if importlib.util.find_spec("torchvision") is not None:
        return
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.pil_to_tensor = lambda image: image  # type: ignore[attr-defined]
    sys.modules["torchvision"] = types.ModuleType("torchvision")
    sys.modules["torchvision.transforms"] = types.ModuleType("torchvision.transforms")
    sys.modules["torchvision.transforms.functional"] = functional


def describe(target: Any) -> list[list[str | None]]:
    """``[name, kind, repr(default) or None]`` per parameter, without ``self`` / ``cls`` and
    private ``_x`` ones."""
    params = list(inspect.signature(target).parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return [[p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
            for p in params if not p.name.startswith("_")]


def main() -> None:
    _stub_torchvision()
    warnings.simplefilter("ignore")
    import rerun
    import rerun.catalog as catalog
    import rerun.experimental.dataloader as dl

    signatures: dict[str, Any] = {}
    for name in sorted(dl.__all__):
        obj = getattr(dl, name)
        if callable(obj) and (inspect.isclass(obj) or inspect.isfunction(obj)):
            signatures[name] = describe(obj)
        for method in METHODS.get(name, []):
            signatures[f"{name}.{method}"] = describe(getattr(obj, method))
    client = {m: describe(getattr(catalog.CatalogClient, m)) for m in CATALOG_CLIENT_METHODS}
    client["__init__"] = describe(catalog.CatalogClient)
    golden: dict[str, Any] = {"rerun_sdk": rerun.__version__,
                              "dataloader_all": sorted(dl.__all__),
                              "signatures": signatures, "catalog_client": client}
    # One parameter list per line keeps the file short and its diffs readable.
    lines = ["{", f' "rerun_sdk": {json.dumps(golden["rerun_sdk"])},',
             f' "dataloader_all": {json.dumps(golden["dataloader_all"])},']
    for section in ("signatures", "catalog_client"):
        entries = golden[section]
        body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(entries[k])}" for k in sorted(entries))
        lines.append(f' "{section}": {{\n{body}\n }}' + ("," if section == "signatures" else ""))
    lines.append("}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
