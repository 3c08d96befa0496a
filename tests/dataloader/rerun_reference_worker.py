"""Runs rerun-sdk 0.41's own ``RerunMapDataset`` against a local ``rerun server`` and saves every
sample, for the differential test (it runs in the separate environment that test builds).

Usage: ``python rerun_reference_worker.py URL DATASET SPEC_JSON OUT_NPZ``. ``SPEC_JSON`` holds
``{"index": …, "rate_hz": … | null, "fields": {key: {"path": …, "decoder": "numeric" | "image" |
"video", "codec": …, "window": [...] | null}}}``. The npz holds ``meta`` (JSON: the sample count
and the sample index's segments) and ``{i}/{key}`` (every sample's decoded values; a missing value
is not stored) and ``{i}/index`` (its index value as int64).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np


def main() -> None:
    url, dataset_name, spec_json, out = sys.argv[1:5]
    spec = json.loads(spec_json)
    import rerun as rr
    from rerun.experimental import dataloader as dl

    client = rr.catalog.CatalogClient(url)
    dataset = client.get_dataset(name=dataset_name)
    fields: dict[str, Any] = {}
    for key, f in spec["fields"].items():
        decoder = {"numeric": lambda f: dl.NumericDecoder(),
                   "image": lambda f: dl.ImageDecoder(),
                   "video": lambda f: dl.VideoFrameDecoder(codec=f["codec"])}[f["decoder"]](f)
        window = None if f["window"] is None else tuple(f["window"])
        fields[key] = dl.Field(f["path"], decode=decoder, window=window)
    sampling = None if spec["rate_hz"] is None else dl.FixedRateSampling(rate_hz=spec["rate_hz"])
    data = dl.RerunMapDataset(dl.DataSource(dataset=dataset), spec["index"], fields,
                              timeline_sampling=sampling)
    index = data.sample_index
    segments = [[s.segment_id, _int(s.index_start), _int(s.index_end), int(s.num_samples)]
                for s in index.segments]
    arrays: dict[str, np.ndarray] = {}
    for i in range(len(data)):
        sample = data[i]
        _, value = index.global_to_local(i)
        arrays[f"{i}/index"] = np.array(_int(value), dtype=np.int64)
        for key in fields:
            if sample.get(key) is not None:
                arrays[f"{i}/{key}"] = sample[key].numpy()
    meta = {"num_samples": len(data), "segments": segments}
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)


def _int(value: Any) -> int:
    if isinstance(value, np.datetime64 | np.timedelta64):
        return int(value.astype("int64"))
    return int(value)


if __name__ == "__main__":
    main()
