"""Rerun scripts' call shapes work as written: positional Field arguments and Rerun Selectors."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch
from dataloader_factories import JOINTS

from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset


def test_field_takes_rerun_positional_arguments() -> None:
    select = pc.list_flatten
    field = Field(JOINTS, NumericDecoder(), select, (-1, 0), 2)
    assert (field.select, field.window, field.max_staleness) == (select, (-1, 0), 2)


def test_a_rerun_selector_picks_values(robots_dataset: DatasetEntry) -> None:
    chunk = pytest.importorskip("rerun.chunk")
    source = DataSource(robots_dataset)
    plain = RerunMapDataset(source, "frame_index",  # the same sample space (window trims)
                            {"q": Field(JOINTS, NumericDecoder()),
                             "w": Field(JOINTS, NumericDecoder(), window=(-1, 0))})
    picked = RerunMapDataset(source, "frame_index",
                             {"q0": Field(JOINTS, NumericDecoder(), chunk.Selector(".[0]")),
                              "w": Field(JOINTS, NumericDecoder(), chunk.Selector(".[2]"),
                                         (-1, 0))})
    for i in (0, 7, 40):
        full, one = plain[i]["q"], picked[i]
        assert torch.equal(one["q0"], full[:1])
        assert one["w"].shape == (2, 1) and torch.equal(one["w"][:, 0], plain[i]["w"][:, 2])
    assert repr(picked.fields["q0"].select) in picked.fields["q0"].to_recipe()["select"]
    clone = pickle.loads(pickle.dumps(picked))  # spawned workers get the query back
    assert torch.equal(clone[7]["q0"], picked[7]["q0"])


def test_a_suppressed_selector_error_is_missing_data(robots_dataset: DatasetEntry) -> None:
    chunk = pytest.importorskip("rerun.chunk")
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index",
                         {"q": Field(JOINTS, NumericDecoder(), chunk.Selector(".nope?"))})
    assert ds[3]["q"] is None


def test_select_must_be_a_function_or_a_selector() -> None:
    with pytest.raises(TypeError, match="Rerun Selector"):
        Field(JOINTS, NumericDecoder(), select="[0]")  # type: ignore[arg-type]
    assert Field(JOINTS, NumericDecoder(), select=lambda rows: rows).select is not None
    assert pa.types.is_list(pa.array([[1.0]]).type)
