"""The robomimic layout, shared by MimicGen, LIBERO and RoboCasa: many demos per file.

As robomimic's documentation ("Dataset structure") describes it::

    data                 attrs: total (samples in all demos), env_args (JSON: env_name, type,
                         env_kwargs …); LIBERO adds problem_info (JSON: language_instruction …)
      demo_<N>           attrs: num_samples, model_file (XML); RoboCasa adds ep_meta (JSON: lang)
        actions (T, A)   rewards (T,)   dones (T,)   states (T, S)
        obs/<key>        (T, …): low-dimensional vectors, uint8 (T, H, W, 3) images
        next_obs/<key>   (T, …)
        …                any other (T, …) dataset or group (MimicGen's datagen_info/…)
    mask                 <split>: the demo names in a split (train, valid, 20_percent …)

Each demo becomes the segment ``<file stem>_demo_<N>``, every ``(T, …)`` dataset under it the
entity of its path inside the demo (``/obs/agentview_image``, ``/actions``). Properties: the demo's
name and number, ``num_samples``, ``task`` (LIBERO's ``problem_info.language_instruction``,
RoboCasa's ``ep_meta.lang``), ``env_name`` and ``env_args``, and one bool ``mask/<split>`` per
split, so that a slice selects a split: ``where='"property:mask/train"'``. The rate is
``env_args.env_kwargs.control_freq`` (robosuite) unless ``rate_hz`` is given.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rayform.errors import ConversionWarning, CorruptRecordingError, FormatError
from rayform.importers._source_ids import segment_id_from_name
from rayform.importers.hdf5._columns import log_array
from rayform.importers.hdf5._file import attribute_text, h5py_module, read_dataset, reading
from rayform.importers.hdf5._properties import property_value, set_attribute_properties
from rayform.importers.hdf5._timing import describe_grid, frame_timelines
from rayform.recording._columns import TASK_PROPERTY
from rayform.recording._writer import RecordingWriter

DATA: Final = "data"
MASK: Final = "mask"
MASK_PREFIX: Final = "mask/"
_DEMO: Final = re.compile(r"demo_(\d+)")
# Demo attributes that are not copied as properties (``model_file`` is the MuJoCo XML).
_SKIPPED_ATTRS: Final = frozenset({"model_file", "ep_meta"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FileInfo:
    """What the ``data`` group and ``mask`` say about every demo of one file."""

    env_args: dict[str, Any]
    env_args_text: str | None
    task: str | None
    masks: dict[str, frozenset[str]]
    total: int | None


def is_robomimic(file: Any) -> bool:
    """True for a file with a ``data`` group holding ``demo_<N>`` groups (or robomimic's attrs)."""
    data = file.get(DATA)
    if not isinstance(data, h5py_module().Group):
        return False
    return "env_args" in data.attrs or "total" in data.attrs or any(
        _DEMO.fullmatch(name) for name in data)


def write_robomimic(file: Any, path: Path, staging: Path, *, rate_hz: float | None,
                    rate_source: str) -> list[Path]:
    """One recording per demo, written one demo at a time (a demo's data is what is in memory)."""
    info = read_file_info(file, path)
    if rate_hz is None:
        rate_hz, rate_source = control_freq(info.env_args), "env_args.env_kwargs.control_freq"
    outputs = []
    for name, demo in demos(file, path):
        outputs.append(_write_demo(path, staging, name, demo, info, rate_hz=rate_hz,
                                   rate_source=rate_source))
    if not outputs:
        raise FormatError(f"{path}: the 'data' group holds no demo_<N> groups")
    return outputs


def demos(file: Any, path: Path) -> Iterator[tuple[str, Any]]:
    """``(name, group)`` of each ``data/demo_<N>``, by ``N``."""
    h5py = h5py_module()
    with reading(path, "listing data/"):
        data = file[DATA]
        names = [n for n in data if _DEMO.fullmatch(n)]
    for name in sorted(names, key=lambda n: int(n.split("_", 1)[1])):
        with reading(path, f"opening data/{name}"):
            group = data[name]
        if isinstance(group, h5py.Group):
            yield name, group


def read_file_info(file: Any, path: Path) -> FileInfo:
    with reading(path, "the data group"):
        data = file[DATA]
    env_text = attribute_text(path, data, "env_args")
    env_args = _json_object(env_text, path, "data attribute 'env_args'")
    problem = _json_object(attribute_text(path, data, "problem_info"), path,
                           "data attribute 'problem_info'")
    kwargs = env_args.get("env_kwargs")
    candidates = [problem.get("language_instruction"), env_args.get("language_instruction"),
                  kwargs.get("language_instruction") if isinstance(kwargs, dict) else None]
    task = next((c for c in candidates if isinstance(c, str) and c), None)
    with reading(path, "data attribute 'total'"):
        total = property_value(data.attrs.get("total"))
    return FileInfo(env_args=env_args, env_args_text=env_text,
                    task=task,
                    masks=read_masks(file, path),
                    total=total if isinstance(total, int) else None)


def read_masks(file: Any, path: Path) -> dict[str, frozenset[str]]:
    """``mask/<split>`` → the demo names it lists."""
    h5py = h5py_module()
    group = file.get(MASK)
    if not isinstance(group, h5py.Group):
        return {}
    out: dict[str, frozenset[str]] = {}
    with reading(path, "listing mask/"):
        items = [(name, group[name]) for name in group]
    for name, dataset in items:
        if not isinstance(dataset, h5py.Dataset):
            continue
        values = read_dataset(path, dataset).reshape(-1)
        names = {v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                 for v in values.tolist()}
        out[name] = frozenset(names)
    return out


def control_freq(env_args: dict[str, Any]) -> float | None:
    """robosuite's ``env_kwargs.control_freq`` (Hz) when ``env_args`` has a positive one."""
    kwargs = env_args.get("env_kwargs")
    value = kwargs.get("control_freq") if isinstance(kwargs, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _write_demo(path: Path, staging: Path, name: str, demo: Any, info: FileInfo, *,
                rate_hz: float | None, rate_source: str) -> Path:
    datasets = _demo_datasets(demo, path, name)
    count = _num_samples(demo, datasets, path, name)
    segment_id = segment_id_from_name(f"{path.stem}_{name}")
    out = staging / f"{segment_id}.rfr"
    timelines = frame_timelines(count, rate_hz)
    with RecordingWriter(out, recording_id=segment_id, application_id="hdf5") as rec:
        rec.set_properties(source_file=path.name, layout="robomimic", demo=name,
                           demo_index=int(name.split("_", 1)[1]), num_samples=count)
        set_attribute_properties(rec, path, demo, prefix="", skip=_SKIPPED_ATTRS)
        describe_grid(rec, rate_hz, rate_source=rate_source)
        _set_file_properties(rec, info, name)
        episode_task = _ep_meta_task(demo, path, name)
        if episode_task or info.task:
            rec.set_property(TASK_PROPERTY, episode_task or info.task or "")
        for key, dataset in datasets:
            where = f"{path}: data/{name}/{key}"
            if not dataset.shape or dataset.shape[0] != count:
                warnings.warn(f"{where} has shape {dataset.shape}, not {count} rows (the demo's "
                              "num_samples); it is not registered", ConversionWarning,
                              stacklevel=6)
                continue
            log_array(rec, "/" + key, read_dataset(path, dataset), timelines=timelines,
                      where=where)
    return out


def _set_file_properties(rec: RecordingWriter, info: FileInfo, name: str) -> None:
    env_name = info.env_args.get("env_name")
    if isinstance(env_name, str):
        rec.set_property("env_name", env_name)
    if info.env_args_text is not None:
        rec.set_property("env_args", info.env_args_text)
    if info.total is not None:
        rec.set_property("dataset_total", info.total)
    for split, members in sorted(info.masks.items()):
        rec.set_property(MASK_PREFIX + split, name in members)


def _demo_datasets(demo: Any, path: Path, name: str) -> list[tuple[str, Any]]:
    h5py = h5py_module()
    found: list[tuple[str, Any]] = []

    def visit(key: str, node: Any) -> None:
        if isinstance(node, h5py.Dataset):
            found.append((key, node))

    with reading(path, f"listing data/{name}"):
        demo.visititems(visit)
    return sorted(found, key=lambda item: item[0])


def _num_samples(demo: Any, datasets: list[tuple[str, Any]], path: Path, name: str) -> int:
    with reading(path, f"attribute num_samples of data/{name}"):
        declared = property_value(demo.attrs.get("num_samples"))
    actions = dict(datasets).get("actions")
    rows = int(actions.shape[0]) if actions is not None and actions.shape else None
    if isinstance(declared, int) and not isinstance(declared, bool):
        if rows is not None and rows != declared:
            raise CorruptRecordingError(
                f"{path}: data/{name} declares num_samples={declared} but its actions have "
                f"{rows} rows")
        return declared
    if rows is None:
        raise FormatError(f"{path}: data/{name} has neither a num_samples attribute nor actions")
    return rows


def _ep_meta_task(demo: Any, path: Path, name: str) -> str | None:
    meta = _json_object(attribute_text(path, demo, "ep_meta"), path,
                        f"attribute 'ep_meta' of data/{name}")
    lang = meta.get("lang")
    return lang if isinstance(lang, str) and lang else None


def _json_object(text: str | None, path: Path, what: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise CorruptRecordingError(f"{path}: {what} is not valid JSON ({err})") from err
    return value if isinstance(value, dict) else {}
