"""Micro-batches end to end on the embedded profile (PostgreSQL bus, PostgreSQL stores, the real
model): one batch holding good documents, a malformed event, poison, a corrupt file, an event
signed by a producer not allowed that tenant, and a store outage halfway through the load. The
good documents publish, each bad one goes to the DLQ with its own reason, nothing is
half-published, and replaying the whole batch changes nothing.
Under CI=true a missing PostgreSQL fails (tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores.pg_text import PostgresTextIndex

GOOD = {f"good-{i}.txt": f"Report {i}: the cooling pump P-{i} was inspected and its seals replaced. "
        f"Next inspection of pump P-{i} is due in {i + 2} months." for i in range(1, 6)}
OUTAGE_DOC = "good-3.txt"
SCOPED = ("batch-scoped", "batch-scoped-producer-key-0123456789abcdef")
"""An upstream producer this test's pipeline accepts only for tenant `batch-scope-only`."""


class TextIndexWithOutage(PostgresTextIndex):
    """The real PostgreSQL text index, unreachable for one document while `down` is set: any write
    holding it fails (the whole batch first, then, written one by one, that document alone)."""

    down = True

    def _write_all(self, conn: Any, docs: Any) -> Any:
        if self.down and any(doc.doc.document_id == OUTAGE_DOC for doc in docs):
            raise Transient("text index unavailable (injected outage)")
        return super()._write_all(conn, docs)


@pytest.fixture(scope="module")
def world(settings: ManifoldSettings, pg_conninfo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from manifold.deploy.compose.embedded import EmbeddedPipeline, build_ports, open_bus, prepare, upstream_client
    from manifold.shared.config import EmbeddedSettings, IngestSettings, ProducerKey

    s = settings.model_copy(update={
        "profile": "embedded", "embedded": EmbeddedSettings(dir=tmp_path_factory.mktemp("batch")),
        "ingest": IngestSettings(metrics_port=0, max_attempts=2, retry_initial_s=0.05, batch_max_messages=64,
                                 producers={SCOPED[0]: ProducerKey(key=SCOPED[1], tenants=["batch-scope-only"])})})
    prepare(s, quiet=True)
    bus = open_bus(s)
    ports = build_ports(s)
    ports.text = TextIndexWithOutage.from_settings(s)
    pipeline = EmbeddedPipeline(s, bus, ports)
    pipeline.drain()  # whatever earlier tests left pending, so this test's batch is its own
    yield s, bus, ports, pipeline, upstream_client(s, bus)
    pipeline.close()


def _state(settings: ManifoldSettings, tenant: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(settings.postgres.ingest_conninfo()) as conn:
        conn.execute("SELECT set_config('manifold.tenant_id', %s, false)", (tenant,))
        manifest = {(d, v): (st, str(exp)) for d, v, st, exp in conn.execute(
            "SELECT document_id, version, state, expected FROM manifold.version_manifest WHERE tenant_id = %s",
            (tenant,))}
        vectors = {cid: hashlib.sha256(e.encode()).hexdigest() for cid, e in conn.execute(
            "SELECT chunk_id, embedding::text FROM manifold.chunks WHERE tenant_id = %s", (tenant,))}
        text_rows = conn.execute("SELECT count(*) FROM manifold.text_chunks WHERE tenant_id = %s",
                                 (tenant,)).fetchone()[0]
    return {"manifest": manifest, "vectors": vectors, "text_rows": text_rows}


def test_a_mixed_batch_publishes_the_good_and_dead_letters_each_bad_one_with_its_reason(world) -> None:
    from manifold.deploy.compose.embedded import SOURCES
    from manifold.shared import topics
    from manifold.shared.envelope_auth import sign
    from manifold.shared.events import upserted
    from manifold.shared.log_bus import Record, redeliver

    settings, bus, ports, pipeline, client = world
    tenant = f"batch-{uuid.uuid4().hex[:8]}"
    start = {role: bus.end_offsets(src) for role, src in SOURCES.items()}
    for name, text in GOOD.items():
        client.publish_bytes(tenant, name, text.encode(), "text/plain")
    client.publish_bytes(tenant, "broken.pdf", b"%PDF-1.7\n this is not a pdf \x00\x01\x02", "application/pdf")
    foreign = sign(upserted(tenant, "foreign.txt", 1, b"published by another tenant's producer", "text/plain"), *SCOPED)
    bus.append([Record(topics.DOCUMENTS, f"{tenant}/malformed".encode(), b'{"type": "DocumentUpserted", "tenant'),
                Record(topics.DOCUMENTS, f"{tenant}/nested".encode(), b"[" * 100_000 + b"]" * 100_000),
                Record(topics.DOCUMENTS, foreign.key, foreign.model_dump_json().encode())])

    report = pipeline.drain()

    reasons = {(d.stage, d.document_id or d.key.decode().split("/", 1)[1]): (d.error_kind, d.error)
               for d in report.dead_letters}
    assert set(reasons) == {("parse", "malformed"), ("parse", "nested"), ("parse", "broken.pdf"),
                            ("parse", "foreign.txt"), ("load", OUTAGE_DOC)}, reasons
    assert reasons[("parse", "foreign.txt")][0] == "unauthorized"
    assert "may not publish for tenant" in reasons[("parse", "foreign.txt")][1]
    assert reasons[("parse", "nested")][0] in ("bad_input", "poison") and reasons[("parse", "nested")][1].strip()
    assert reasons[("parse", "broken.pdf")][0] == "bad_input"
    assert reasons[("load", OUTAGE_DOC)][0] == "exhausted" and "injected outage" in reasons[("load", OUTAGE_DOC)][1]
    state = _state(settings, tenant)
    active = {d for (d, _), (st, _) in state["manifest"].items() if st == "active"}
    assert active == set(GOOD) - {OUTAGE_DOC}
    assert (OUTAGE_DOC, 1) not in state["manifest"]  # never staged for publishing: nothing half-published

    # a retry of the whole batch (every stage from where it started) changes nothing
    for role, src in SOURCES.items():
        bus.commit(f"manifold.{role}", src, start[role])
        pipeline.runners[role].consumer.subscribe([src])
    again = pipeline.drain()
    # the same reasons again (every stage topic is re-read, so downstream messages come twice)
    assert {(d.stage, d.error_kind, d.error) for d in again.dead_letters} == {
        (d.stage, d.error_kind, d.error) for d in report.dead_letters}
    assert _state(settings, tenant) == state

    # the outage ends: replaying its dead letter publishes the document, and only that changes
    TextIndexWithOutage.down = False
    redeliver(bus, [d for d in report.dead_letters if d.stage == "load"])
    assert pipeline.drain().dead_letters == []
    after = _state(settings, tenant)
    assert {d for (d, _), (st, _) in after["manifest"].items() if st == "active"} == set(GOOD)
    assert {k: v for k, v in after["vectors"].items() if k in state["vectors"]} == state["vectors"]


class RefusesOneAppend:
    """The real PostgreSQL bus, except that the first append to `topic` fails (as when
    PostgreSQL restarts between a stage's work and its hand-off)."""

    def __init__(self, bus: Any, topic: str) -> None:
        self._bus, self._topic, self.refused = bus, topic, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    def append(self, records: Any) -> Any:
        if not self.refused and any(r.topic == self._topic for r in records):
            self.refused += 1
            raise Transient("bus database unavailable (injected)")
        return self._bus.append(records)


def test_a_drain_whose_outputs_were_refused_redelivers_them_on_the_next_drain(world) -> None:
    """A failed drain rewinds every stage to its committed offsets: the same pipeline's next drain
    handles the messages again instead of going on past them (two updates were lost so in the
    embedded fault suite, when PostgreSQL restarted under a long-running `manifold serve`)."""
    from manifold.deploy.compose.embedded import EmbeddedPipeline
    from manifold.shared import topics

    settings, bus, ports, pipeline, client = world
    pipeline.drain()  # nothing of this test's is pending yet
    flaky = RefusesOneAppend(bus, topics.STAGE_CHUNKED)
    ours = EmbeddedPipeline(settings, flaky, ports)
    tenant = f"rewind-{uuid.uuid4().hex[:8]}"
    try:
        assert client.publish_bytes(tenant, "pump.txt", b"The cooling pump P-9 is inspected every 3 months.\n",
                                    "text/plain") == 1
        with pytest.raises(Transient, match="injected"):
            ours.drain()
        assert flaky.refused == 1
        ours.drain()  # the same pipeline, as `manifold serve`'s thread retries
    finally:
        ours.close()
    assert {d: st for (d, _), (st, _) in _state(settings, tenant)["manifest"].items()} == {"pump.txt": "active"}


def test_a_backlog_flows_through_the_stages_batch_by_batch(world) -> None:
    """One batch per stage per pass: the first document of a backlog is published before the
    last one is parsed, so a long queue (a server restarted with thousands of uploads waiting)
    makes documents active from the start instead of after the whole queue was parsed."""
    from manifold.deploy.compose.embedded import EmbeddedPipeline

    settings, bus, ports, pipeline, client = world
    pipeline.drain()  # nothing of this test's is pending yet
    tenant = f"flow-{uuid.uuid4().hex[:8]}"
    docs = [f"note-{i}.txt" for i in range(3)]
    for i, doc in enumerate(docs):
        client.publish_bytes(tenant, doc, f"Note {i}: the compressor C-{i} was serviced.\n".encode(), "text/plain")
    ours = EmbeddedPipeline(settings, bus, ports, batch=1)
    seen: list[str] = []
    try:
        ours.drain(lambda role, _n: seen.append(role))
    finally:
        ours.close()
    parses = [i for i, role in enumerate(seen) if role == "parse"]
    assert len(parses) == 3 and seen.index("publish") < parses[-1], seen
    assert {d: st for (d, _), (st, _) in _state(settings, tenant)["manifest"].items()} == dict.fromkeys(docs, "active")
