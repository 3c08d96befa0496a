"""Tracing spans for the data path: OpenTelemetry spans when ``opentelemetry-api`` is installed.

``tracing_scope(name)`` (a context manager) and ``with_tracing(name)`` (a decorator) have the
signatures of Rerun's helpers. Spans go to whatever tracer provider the application configured
(``opentelemetry.trace.set_tracer_provider``), as OpenTelemetry expects of a library; with the API
installed but no provider, no span is made (they would be non-recording). Without the package
(``pip install 'rayform[tracing]'`` adds it) both helpers are no-ops: ``tracing_scope`` returns one
shared do-nothing context manager and ``with_tracing`` calls the function straight through.

The dataloader opens ``rayform.fetch`` (resolving and gathering a block's rows),
``rayform.decode`` (decoding it) and ``rayform.collate`` (:class:`PooledBatchCollator`) spans.
DataLoader worker processes trace only if they configure a provider themselves (e.g. in
``worker_init_fn``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

AttributeValue = bool | int | float | str
F = TypeVar("F", bound=Callable[..., Any])

TRACER_NAME = "rayform"
_NOOP: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
_UNRESOLVED = object()
_tracer: Any = _UNRESOLVED
_trace: Any = None  # the ``opentelemetry.trace`` module, once resolved


def _get_tracer() -> Any:
    """The OpenTelemetry tracer, or ``None`` when ``opentelemetry-api`` is not installed."""
    global _tracer, _trace
    if _tracer is _UNRESOLVED:
        try:
            _trace = importlib.import_module("opentelemetry.trace")
        except ImportError:
            _tracer = None
        else:
            # A proxy tracer: it follows a provider the application sets later.
            _tracer = _trace.get_tracer(TRACER_NAME)
    return _tracer


def _recording_tracer() -> Any:
    """The tracer when an application has set a tracer provider, else ``None``: before that
    every span is non-recording, so none is made (a non-recording span costs ~30 µs, several
    per batch)."""
    tracer = _get_tracer()
    if tracer is None or isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return None
    return tracer


def tracing_enabled() -> bool:
    """Whether spans are created (``opentelemetry-api`` is importable)."""
    return _get_tracer() is not None


def tracing_scope(name: str, *, attributes: Mapping[str, AttributeValue] | None = None
                  ) -> contextlib.AbstractContextManager[Any]:
    """A span named ``name`` around a ``with`` block (a shared no-op without OpenTelemetry).

    Args:
        name: the span name, e.g. ``"epoch 3"``.
        attributes: span attributes (rayform option; Rerun's helper takes only the name).
    """
    tracer = _recording_tracer()
    if tracer is None:
        return _NOOP
    return cast("contextlib.AbstractContextManager[Any]",
                tracer.start_as_current_span(name, attributes=dict(attributes or {})))


def with_tracing(name: str) -> Callable[[F], F]:
    """Decorate a function so that each call runs inside a span named ``name``.

    Without OpenTelemetry a call costs one extra function call and a ``None`` check.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if _get_tracer() is None:
                return func(*args, **kwargs)
            with tracing_scope(name):
                return func(*args, **kwargs)

        return cast(F, traced)

    return decorate


def set_span_attributes(attributes: Mapping[str, AttributeValue]) -> None:
    """Attach ``attributes`` to the current span (nothing without OpenTelemetry)."""
    if _get_tracer() is None:
        return
    trace = importlib.import_module("opentelemetry.trace")
    span = trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(key, value)
