"""One trace per document version and one per question, in the embedded profile (the dev stack's
PostgreSQL, the PostgreSQL bus carrying `traceparent` in its headers): a published document's
upstream span and the spans of parse, chunk, embed, extract, load and publish share one trace id,
each stage's span a child of the one before; a question's `query` span holds guard, route, plan,
execute (with one span per plan step) and assemble."""

from __future__ import annotations

import uuid

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


@pytest.fixture(scope="module")
def embedded(settings: ManifoldSettings, pg_conninfo: str,
             tmp_path_factory: pytest.TempPathFactory) -> ManifoldSettings:
    from manifold.deploy.compose import embedded as embedded_root
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded",
                                    "embedded": EmbeddedSettings(dir=tmp_path_factory.mktemp("trace")),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    embedded_root.prepare(s, quiet=True)
    return s


TENANT = f"trace-{uuid.uuid4().hex[:8]}"


def test_a_document_version_is_one_trace_across_every_stage(embedded: ManifoldSettings,
                                                             spans: InMemorySpanExporter) -> None:
    from manifold.deploy.compose import embedded as embedded_root
    from manifold.deploy.compose.embedded import open_bus, upstream_client

    s, tenant, doc = embedded, TENANT, "memo.md"
    bus = open_bus(s)
    try:
        version = upstream_client(s, bus).publish_bytes(
            tenant, doc, b"# Memo\n\nThe loading dock closes at 17:00 on Fridays.\n", "text/markdown")
        drained = embedded_root.drive(s, bus, quiet=True)
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


def test_a_question_is_one_trace_with_a_span_per_plan_step(embedded: ManifoldSettings,
                                                            spans: InMemorySpanExporter) -> None:
    from manifold.deploy.compose import embedded as embedded_root

    spans.clear()
    reply = embedded_root.answer(embedded, TENANT, "When does the loading dock close on Fridays?", None)
    assert reply.status in {"answered", "partial"}, reply
    finished = spans.get_finished_spans()
    [query] = [sp for sp in finished if sp.name == "query"]
    mine = [sp for sp in finished if sp.context.trace_id == query.context.trace_id]
    names = {sp.name for sp in mine}
    assert {"guard", "route", "plan", "execute", "assemble"} <= names, sorted(names)
    [execute] = [sp for sp in mine if sp.name == "execute"]
    steps = [sp for sp in mine if sp.name.startswith("step ")]
    assert sorted(sp.name for sp in steps) == sorted(f"step {st.step_id}" for st in reply.trace.steps)
    assert all(sp.parent is not None and sp.parent.span_id == execute.context.span_id for sp in steps)
    assert {sp.attributes["manifold.operator"] for sp in steps} == {st.operator for st in reply.trace.steps}


def test_manifold_trace_prints_every_step_of_the_version(embedded: ManifoldSettings, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from manifold.deploy.cli import main

    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(embedded.embedded.dir))
    assert main(["trace", "memo.md", "--tenant", TENANT, "--json"]) == 0
    timeline = json.loads(capsys.readouterr().out)
    events = [e["event"] for e in timeline["events"]]
    assert timeline["version"] == 1
    assert events == ["published upstream", "parsed", "chunked", "embedded", "extracted", "loaded (staged)",
                      "verified", "activated"], events
    times = [e["at"] for e in timeline["events"]]
    assert times == sorted(times)
    assert main(["trace", "memo.md", "--tenant", TENANT]) == 0
    assert "activated" in capsys.readouterr().out
    assert main(["trace", "nope.md", "--tenant", TENANT]) == 1
    assert "is not a document" in capsys.readouterr().err
