"""Tracing: fetch / decode / collate spans with OpenTelemetry, a free no-op without it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from dataloader_factories import CAMERA, JOINTS
from torch.utils.data import DataLoader

import rayform
from rayform import _tracing as tracing_module
from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    ImageDecoder,
    NoShuffle,
    NumericDecoder,
    PooledBatchCollator,
    RerunIterableDataset,
    tracing_scope,
    with_tracing,
)

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
sdk_export = pytest.importorskip("opentelemetry.sdk.trace.export")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")

_EXPORTER = in_memory.InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[object]:
    """The application's provider (set once per process, as OpenTelemetry allows)."""
    provider = trace.get_tracer_provider()
    if not getattr(provider, "_rayform_test", False):
        provider = sdk_trace.TracerProvider()
        provider.add_span_processor(sdk_export.SimpleSpanProcessor(_EXPORTER))
        provider._rayform_test = True
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def test_fetch_decode_and_collate_spans(robots_dataset: DatasetEntry, spans: object) -> None:
    fields = {"state": Field(JOINTS, NumericDecoder()), "image": Field(CAMERA, ImageDecoder())}
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", fields,
                              fetch_block_size=16, shuffle_strategy=NoShuffle())
    with tracing_scope("epoch 0"):
        batches = list(DataLoader(ds, batch_size=8, collate_fn=PooledBatchCollator()))
    finished = _EXPORTER.get_finished_spans()
    names = [s.name for s in finished]
    blocks = -(-len(ds) // 16) + len(robots_dataset.segment_ids())  # blocks stay in a segment
    assert 0 < names.count("rayform.fetch") == names.count("rayform.decode") <= blocks
    assert names.count("rayform.collate") == len(batches)
    assert names.count("epoch 0") == 1
    # Two blocks may be fetched at once (image fields), so spans finish in either order.
    fetched = [s.attributes["rayform.num_samples"] for s in finished if s.name == "rayform.fetch"]
    assert max(fetched) == 16 and sum(fetched) == len(ds)
    epoch = next(s for s in finished if s.name == "epoch 0")
    collate = [s for s in finished if s.name == "rayform.collate"]
    assert all(s.parent is not None and s.parent.span_id == epoch.context.span_id
               for s in collate), "collate runs in the caller's thread, under its span"


def test_with_tracing_wraps_a_call_in_a_span(spans: object) -> None:
    @with_tracing("train step")
    def step(x: int) -> int:
        return x + 1

    assert step(1) == 2 and step.__name__ == "step"
    assert [s.name for s in _EXPORTER.get_finished_spans()] == ["train step"]


def test_without_opentelemetry_tracing_is_a_no_op(robots_dataset: DatasetEntry,
                                                  tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        import torch
        from torch.utils.data import DataLoader
        from rayform import _tracing
        from rayform.catalog import Catalog
        from rayform.dataloader import (DataSource, Field, NumericDecoder, PooledBatchCollator,
                                        RerunMapDataset, tracing_scope, with_tracing)

        assert not _tracing.tracing_enabled()
        assert tracing_scope("a") is tracing_scope("b"), "one shared do-nothing context"

        @with_tracing("step")
        def step(x):
            return x * 2

        assert step(21) == 42
        dataset = Catalog.open({robots_dataset.catalog.url!r}).get_dataset("robots")
        ds = RerunMapDataset(DataSource(dataset), "frame_index",
                             {{"state": Field({JOINTS!r}, NumericDecoder())}})
        with tracing_scope("epoch"):
            n = sum(len(b["state"]) for b in DataLoader(ds, batch_size=8,
                                                        collate_fn=PooledBatchCollator()))
        assert n == len(ds)
        assert sys.modules["opentelemetry"] is None
        print("ok")
    """)
    root = str(Path(rayform.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=False, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_tracer_is_resolved_where_the_dataset_is_built(robots_dataset: DatasetEntry,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked DataLoader workers inherit it rather than each importing OpenTelemetry again."""
    monkeypatch.setattr(tracing_module, "_tracer", tracing_module._UNRESOLVED)
    RerunIterableDataset(DataSource(robots_dataset), "frame_index",
                         {"state": Field(JOINTS, NumericDecoder())})
    assert tracing_module._tracer is not tracing_module._UNRESOLVED


def test_no_span_is_made_before_the_application_sets_a_tracer_provider(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracing_module.tracing_enabled()
    # OpenTelemetry's stand-in until a provider is set: its spans would all be non-recording
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    assert tracing_scope("a") is tracing_scope("b"), "one shared do-nothing context"
    monkeypatch.undo()
    provider = sdk_trace.TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    assert tracing_scope("a") is not tracing_scope("b"), "a provider set later is followed"
