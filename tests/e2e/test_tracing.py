"""One trace per document version: in the embedded profile (the dev stack's PostgreSQL, the
PostgreSQL bus carrying `traceparent` in its headers), a published document's upstream span and
the spans of parse, chunk, embed, extract, load and publish all share one trace id, each stage's
span a child of the one before."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from manifold.shared import tracing
from manifold.shared.config import ManifoldSettings

STAGES = ("parse", "chunk", "embed", "extract", "load", "publish")


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    tracing.add_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_a_document_version_is_one_trace_across_every_stage(settings: ManifoldSettings, pg_conninfo: str,
                                                             tmp_path: Path, spans: InMemorySpanExporter) -> None:
    from manifold.ingest.embedded import open_bus, upstream_client
    from manifold.shared import cli_embedded
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=tmp_path / "state"),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    cli_embedded.prepare(s, quiet=True)
    tenant, doc = f"trace-{uuid.uuid4().hex[:8]}", "memo.md"
    bus = open_bus(s)
    try:
        version = upstream_client(s, bus).publish_bytes(
            tenant, doc, b"# Memo\n\nThe loading dock closes at 17:00 on Fridays.\n", "text/markdown")
        drained = cli_embedded.drive(s, bus, quiet=True)
    finally:
        bus.close()
    assert version == 1 and not drained.dead_letters

    mine = [sp for sp in spans.get_finished_spans()
            if sp.attributes and sp.attributes.get("manifold.tenant_id") == tenant]
    by_name = {sp.name: sp for sp in mine}
    expected = ["upstream publish"] + [f"stage {stage}" for stage in STAGES]
    assert set(expected) <= set(by_name), sorted(by_name)
    assert len({sp.context.trace_id for sp in mine}) == 1, "the version's spans are not one trace"
    for parent, child in zip(expected, expected[1:], strict=False):
        assert by_name[child].parent is not None and by_name[child].parent.span_id == by_name[parent].context.span_id, \
            f"{child} is not a child of {parent}"
    assert all(sp.attributes.get("manifold.document_id") == doc and sp.attributes.get("manifold.version") == 1
               for sp in (by_name[name] for name in expected))
