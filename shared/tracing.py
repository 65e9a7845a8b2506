"""Tracing with OpenTelemetry: one trace per document version, one per question.

Guarantees:
- `configure(settings)` installs the SDK tracer provider once per process (later calls return the
  same provider). Spans are created and the W3C `traceparent` travels even with the exporter off
  (the default), so a trace id always connects the stages; exporting is what the setting adds:
  `console` (JSON lines on stderr) or `otlp` (OTLP/HTTP to `endpoint`, which must be a loopback
  address: traces carry document ids and never leave the machine by accident).
- `inject` / `extract` carry the context in message headers (`[(name, bytes)]`, Kafka's and the
  PostgreSQL bus's shape). Only `traceparent` and `tracestate` are written; a malformed header
  is ignored (a new trace starts), never an error.
- Span attributes are ids and counts, never document text or question text.
- Nothing here connects or exports at import time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from manifold.shared.loopback import is_loopback

log = logging.getLogger(__name__)

Exporter = Literal["none", "console", "otlp"]
HeaderList = Sequence[tuple[str, bytes | str | None]]
_FIELDS = ("traceparent", "tracestate")
_lock = threading.Lock()
_provider: TracerProvider | None = None


def _loopback(endpoint: str) -> bool:
    return is_loopback(urlsplit(endpoint).hostname or "")


def configure(exporter: Exporter = "none", *, endpoint: str = "", service: str = "manifold") -> TracerProvider:
    """Install (once) and return the process's tracer provider."""
    global _provider
    with _lock:
        if _provider is not None:
            return _provider
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        if exporter == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif exporter == "otlp":
            if not _loopback(endpoint):
                raise ValueError(f"tracing endpoint {endpoint!r} must be a loopback address (127.0.0.1, ::1)")
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        trace.set_tracer_provider(provider)
        _provider = provider
        return provider


def configure_from(settings: Any, service: str) -> TracerProvider:
    """`configure` from `settings.tracing` (`TracingSettings`)."""
    t = settings.tracing
    return configure(t.exporter, endpoint=t.endpoint, service=service)


def add_processor(processor: SpanProcessor) -> None:
    """Add a span processor (e.g. an in-memory exporter in tests) to the configured provider."""
    configure().add_span_processor(processor)


def tracer(name: str = "manifold") -> trace.Tracer:
    return trace.get_tracer(name)


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return value


def extract(headers: HeaderList | None) -> otel_context.Context:
    """The context carried by message headers (an empty context when there is none)."""
    carrier: dict[str, str] = {}
    for name, value in headers or ():
        key = name.lower() if isinstance(name, str) else ""
        text = _text(value)
        if key in _FIELDS and text is not None and len(text) <= 512:
            carrier[key] = text
    try:
        return get_global_textmap().extract(carrier)
    except Exception:  # noqa: BLE001 - a malformed header starts a new trace, never fails a message
        return otel_context.Context()


def inject(headers: list[tuple[str, bytes]] | None = None,
           ctx: otel_context.Context | None = None) -> list[tuple[str, bytes]]:
    """`headers` without any old trace fields, plus the current (or `ctx`'s) trace context."""
    carrier: dict[str, str] = {}
    get_global_textmap().inject(carrier, context=ctx)
    kept = [(n, v) for n, v in headers or [] if n.lower() not in _FIELDS]
    return kept + [(k, v.encode("ascii")) for k, v in carrier.items() if k in _FIELDS]


@contextmanager
def span(name: str, *, parent: HeaderList | otel_context.Context | None = None,
         attributes: Mapping[str, Any] | None = None) -> Iterator[trace.Span]:
    """A span named `name`, child of `parent` (message headers or a context), else of the
    current span. Exceptions are recorded on the span and re-raised."""
    configure()
    ctx = parent if isinstance(parent, otel_context.Context) else (extract(parent) if parent is not None else None)
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer().start_as_current_span(name, context=ctx, attributes=clean) as current:
        yield current


def trace_id(span_: trace.Span | None = None) -> str | None:
    """The 32-hex trace id of `span_` (or the current span), None when there is none."""
    ctx = (span_ or trace.get_current_span()).get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def start_span(name: str, *, parent: HeaderList | None = None,
               attributes: Mapping[str, Any] | None = None) -> trace.Span:
    """A started span that is NOT made current (for work that interleaves several messages,
    such as a stage runner's micro-batch); the caller ends it."""
    configure()
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    return tracer().start_span(name, context=extract(parent), attributes=clean)


def headers_for(span_: trace.Span, headers: list[tuple[str, bytes]] | None = None) -> list[tuple[str, bytes]]:
    """`headers` plus the trace context of `span_` (so the next stage's span is its child)."""
    return inject(headers, trace.set_span_in_context(span_))
