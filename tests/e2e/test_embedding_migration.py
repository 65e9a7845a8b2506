"""Embedding migration on the real stack: backfill a parallel configuration, verify, switch atomically.

The stack is shared (other tests, benchmarks), so this module ingests its own two fresh tenants
through the real pipeline handlers and stores in-process (`pipeline.run_*`, `publisher.handle`,
ports from `workers.build_ports`), without Kafka consumer groups another process could share.
Every configuration change is for these tenants only, and the module fixture restores `primary`
as active and retires the parallel configuration at the end, whatever happened.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from pipeline_support import migrate, test_settings

from manifold.ingest import embedding_migration as em
from manifold.ingest import pipeline, publisher, sample_world, workers
from manifold.ingest.media import guess_media_type
from manifold.query.executors.vector import VectorExecutor
from manifold.query.plan import VectorSearchParams
from manifold.query.types import StepResult
from manifold.shared.config import ManifoldSettings
from manifold.shared.embedding_configs import PRIMARY, ConfigEmbedders
from manifold.shared.events import MAX_INLINE_BYTES, ContentRef, upserted
from manifold.shared.stores.embedding_pg import ActivationRefused, PostgresEmbeddingStore
from manifold.shared.stores.pg_connections import TenantConnections

TITLED = "minilm-titled"
QUESTIONS = ("warranty period for the sensor", "returns policy refund window", "delivery delay notice")
T = 10.0


@dataclass
class Migrating:
    settings: ManifoldSettings
    ports: pipeline.Ports
    lifecycle: Any
    northstar: str
    southwind: str

    def ingest(self, tenant: str, folder: Path) -> list[str]:
        """Every file under `folder` as version 1, through every stage handler and the publisher."""
        done = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            content, document_id = path.read_bytes(), str(path.relative_to(folder))
            ref = None
            if len(content) > MAX_INLINE_BYTES:
                ref = ContentRef(sha256=self.ports.staging.put_blob(tenant, content), size=len(content))
            event = upserted(tenant, document_id, 1, content, guess_media_type(path, content[:4096]) or "text/plain",
                             {"source_path": document_id}, content_ref=ref)
            notice = pipeline.run_parse(event, self.ports)
            assert notice is not None
            for step in (pipeline.run_chunk, pipeline.run_embed, pipeline.run_extract):
                notice = step(notice, self.ports)
            loaded = pipeline.run_load(notice, self.ports)
            assert loaded is not None
            publisher.handle(loaded, self.lifecycle)
            done.append(document_id)
        return done


@pytest.fixture(scope="module")
def world(settings: ManifoldSettings, pg_conninfo: str, es_client, neo4j_driver,
          tmp_path_factory: pytest.TempPathFactory) -> Migrating:
    s = test_settings(settings)
    migrate(s)
    ports = workers.build_ports(s)
    run = uuid.uuid4().hex[:8]
    m = Migrating(settings=s, ports=ports, lifecycle=workers.publish_ports(ports, s),
                  northstar=f"em{run}-northstar", southwind=f"em{run}-southwind")
    root = tmp_path_factory.mktemp("embedding-world")
    sample_world.write_world(root)
    m.ingest(m.northstar, root / "northstar")
    m.ingest(m.southwind, root / "southwind")
    return m


@pytest.fixture(scope="module")
def embedders(world: Migrating) -> ConfigEmbedders:
    world.ports.embedder.warm_up()  # type: ignore[attr-defined]
    return ConfigEmbedders(world.ports.embedder)


@pytest.fixture(scope="module")
def store(world: Migrating, embedders: ConfigEmbedders) -> Iterator[PostgresEmbeddingStore]:
    s = PostgresEmbeddingStore.from_settings(world.settings)
    yield s
    for tenant in (world.northstar, world.southwind):  # leave the shared stack as it was
        if s.active(tenant) != PRIMARY:
            s.activate([tenant], embedders.config(PRIMARY))
        s.retire(tenant, TITLED)


@pytest.fixture(scope="module")
def vector(world, embedders: ConfigEmbedders) -> VectorExecutor:
    db = TenantConnections(world.settings.postgres.query_conninfo(), vectors=True)
    return VectorExecutor(db, embedders.base, world.settings.query, embedders)


@pytest.fixture(scope="module")
def admin(pg_conninfo: str) -> Iterator[psycopg.Connection]:
    conn = psycopg.connect(pg_conninfo, autocommit=True)
    register_vector(conn)
    yield conn
    conn.close()


def _ask(vector: VectorExecutor, tenant: str, question: str) -> StepResult:
    return vector.run(VectorSearchParams(query=question, limit=8), tenant_id=tenant, timeout_s=T)


def _assert_from_config(admin: psycopg.Connection, embedders: ConfigEmbedders, tenant: str, question: str,
                        result: StepResult) -> str:
    """Every hit's score is the cosine similarity to the vector of the configuration the result
    names (and, for the parallel one, not to the primary vector): no mixing."""
    config = result.result["embedding_config"]
    q = np.asarray(embedders.encode_query(config, question), dtype=np.float64)
    ids = [h.chunk_id for h in result.hits]
    assert ids, "expected hits"
    primary = dict(admin.execute("SELECT chunk_id, embedding FROM manifold.chunks WHERE tenant_id = %s "
                                 "AND chunk_id = ANY(%s)", (tenant, ids)).fetchall())
    parallel = dict(admin.execute("SELECT chunk_id, embedding FROM manifold.chunk_vectors WHERE tenant_id = %s "
                                  "AND config = %s AND chunk_id = ANY(%s)", (tenant, TITLED, ids)).fetchall())

    def cos(vec: object) -> float:
        v = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float64)
        return float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v)))

    source = primary if config == PRIMARY else parallel
    for h in result.hits:
        assert h.chunk_id in source, f"{h.chunk_id} has no {config} vector"
        assert h.score == pytest.approx(cos(source[h.chunk_id]), abs=1e-4), (config, h.chunk_id)
    if config == TITLED:
        assert any(abs(h.score - cos(primary[h.chunk_id])) > 1e-3 for h in result.hits)
    return str(config)


def _vector_count(admin: psycopg.Connection, tenant: str, config: str = TITLED) -> int:
    return int(admin.execute("SELECT count(*) FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s",
                             (tenant, config)).fetchone()[0])


def test_backfill_verify_activate_switches_atomically(world, store, embedders, vector, admin) -> None:
    tenant, other = world.northstar, world.southwind
    assert store.active(tenant) == PRIMARY

    seen_during: list[str] = []

    def during_backfill(n: int) -> None:  # a query between two backfill batches uses primary only
        r = _ask(vector, tenant, QUESTIONS[0])
        seen_during.append(_assert_from_config(admin, embedders, tenant, QUESTIONS[0], r))

    embedded = em.backfill(store, embedders, TITLED, tenant, batch_size=8, progress=during_backfill)
    assert embedded > 8 and set(seen_during) == {PRIMARY}
    assert em.backfill(store, embedders, TITLED, tenant) == 0  # idempotent: nothing left to do
    assert store.states(tenant)[TITLED]["state"] == "backfilling"

    with pytest.raises(ActivationRefused, match="not verified"):  # backfilled is not verified
        em.activate(store, embedders, TITLED, [tenant])

    ok, reports = em.verify(store, embedders, TITLED, [tenant])
    assert ok and reports[0].missing == 0 and reports[0].vectors == reports[0].chunks == embedded
    assert reports[0].checksum.startswith(f"{embedded}:")
    again = em.verify(store, embedders, TITLED, [tenant])[1][0]
    assert again.checksum == reports[0].checksum  # order-independent and stable
    assert store.states(tenant)[TITLED]["state"] == "verified"

    # An incomplete configuration: verify fails and activation refuses (re-verification inside).
    victim = admin.execute("SELECT chunk_id FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s "
                           "ORDER BY chunk_id LIMIT 1", (tenant, TITLED)).fetchone()[0]
    admin.execute("DELETE FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s AND chunk_id = %s",
                  (tenant, TITLED, victim))
    ok, reports = em.verify(store, embedders, TITLED, [tenant])
    assert not ok and reports[0].missing == 1
    with pytest.raises(ActivationRefused, match="1 missing"):
        em.activate(store, embedders, TITLED, [tenant])
    assert store.active(tenant) == PRIMARY
    # A corrupted vector (not unit norm) is caught too.
    assert em.backfill(store, embedders, TITLED, tenant) == 1
    admin.execute("UPDATE manifold.chunk_vectors SET embedding = embedding + embedding WHERE tenant_id = %s "
                  "AND config = %s AND chunk_id = %s", (tenant, TITLED, victim))
    assert em.verify(store, embedders, TITLED, [tenant])[1][0].bad_norm == 1
    admin.execute("DELETE FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s AND chunk_id = %s",
                  (tenant, TITLED, victim))
    assert em.backfill(store, embedders, TITLED, tenant) == 1
    ok, reports = em.verify(store, embedders, TITLED, [tenant])
    assert ok and reports[0].checksum.startswith(f"{embedded}:")  # (re-embedding may differ in the last bits)

    em.activate(store, embedders, TITLED, [tenant])
    assert store.active(tenant) == TITLED and store.active(other) == PRIMARY  # per tenant
    for question in QUESTIONS:
        assert _assert_from_config(admin, embedders, tenant, question, _ask(vector, tenant, question)) == TITLED
        assert _assert_from_config(admin, embedders, other, question, _ask(vector, other, question)) == PRIMARY
    states = store.states(tenant)
    assert states[TITLED]["state"] == "active" and states[PRIMARY]["state"] == "verified"


def test_no_query_mixes_configurations_while_switching(world, store, embedders, vector, admin) -> None:
    tenant = world.northstar
    if store.active(tenant) != TITLED:
        pytest.skip("needs the previous test's activation")
    results: list[tuple[str, StepResult]] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def query_loop() -> None:
        i = 0
        while not stop.is_set():
            q = QUESTIONS[i % len(QUESTIONS)]
            try:
                results.append((q, _ask(vector, tenant, q)))
            except BaseException as err:  # surfaced below
                failures.append(err)
            i += 1

    thread = threading.Thread(target=query_loop)
    thread.start()
    try:
        for target in (PRIMARY, TITLED, PRIMARY, TITLED):  # rollback and forward, each in one transaction
            em.activate(store, embedders, target, [tenant])
    finally:
        stop.set()
        thread.join(60)
    assert not failures, failures
    used = {_assert_from_config(admin, embedders, tenant, q, r) for q, r in results}
    assert used <= {PRIMARY, TITLED} and results
    assert store.active(tenant) == TITLED


def test_document_ingested_after_activation_is_searchable_in_active_config(world, store, embedders, vector,
                                                                          admin, tmp_path) -> None:
    tenant = world.northstar
    if store.active(tenant) != TITLED:
        pytest.skip("needs the first test's activation")
    folder = tmp_path / "late"
    folder.mkdir()
    (folder / "calibration-bulletin.md").write_text(
        "# Calibration bulletin\n\n## Thermal drift\n\nRecalibrate the hygrometer every ninety days "
        "to keep thermal drift below half a percent.\n")
    assert world.ingest(tenant, folder) == ["calibration-bulletin.md"]
    chunks = admin.execute("SELECT count(*) FROM manifold.chunks WHERE tenant_id = %s AND document_id = %s",
                           (tenant, "calibration-bulletin.md")).fetchone()[0]
    vectors = admin.execute("SELECT count(*) FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s "
                            "AND document_id = %s", (tenant, TITLED, "calibration-bulletin.md")).fetchone()[0]
    assert chunks >= 1 and vectors == chunks
    question = "how often to recalibrate the hygrometer"
    r = _ask(vector, tenant, question)
    assert _assert_from_config(admin, embedders, tenant, question, r) == TITLED
    assert r.hits[0].document_id == "calibration-bulletin.md"
    assert em.verify(store, embedders, TITLED, [tenant])[0]


def test_retire_refuses_active_and_primary_then_removes_old_vectors(world, store, embedders, vector, admin) -> None:
    tenant = world.northstar
    if store.active(tenant) != TITLED:
        pytest.skip("needs the first test's activation")
    with pytest.raises(ActivationRefused, match="active"):
        em.retire(store, TITLED, [tenant])
    with pytest.raises(ActivationRefused, match="primary"):
        em.retire(store, PRIMARY, [tenant])
    before = _vector_count(admin, tenant)
    em.activate(store, embedders, PRIMARY, [tenant])  # rollback: re-verified primary, one transaction
    assert _ask(vector, tenant, QUESTIONS[0]).result["embedding_config"] == PRIMARY
    assert _vector_count(admin, tenant) == before  # the previous configuration's vectors stay ...
    assert em.retire(store, TITLED, [tenant]) == {tenant: before}  # ... until it is retired
    assert _vector_count(admin, tenant) == 0
    assert store.states(tenant)[TITLED]["state"] == "retired"
    with pytest.raises(ActivationRefused, match="retired"):
        em.activate(store, embedders, TITLED, [tenant])
