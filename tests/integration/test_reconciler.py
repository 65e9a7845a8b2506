"""The reconciler against the real stores: a clean state has zero drift; each store corrupted
on purpose (an ES document deleted, a Neo4j edge dropped, a pgvector chunk row removed, orphans
inserted, a retired version left behind, serving marks and states wrong) is detected per store
and kind, and `--repair` re-drives from the staged payload until the drift is zero."""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg
import pytest
from test_stores import build_doc

from manifold.deploy.cli import main
from manifold.ingest import load
from manifold.ingest.notices import payload_key
from manifold.ingest.publisher import delete, publish
from manifold.ingest.reconciler import ReconcilePorts, reconcile
from manifold.shared.events import DocumentDeleted
from manifold.shared.stores import pg_schema
from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
from manifold.shared.stores.es_mapping import ES_INDEX
from manifold.shared.stores.manifest_pg import PostgresVersionManifest
from manifold.shared.stores.neo4j import Neo4jGraphStore
from manifold.shared.stores.pg_relational import PostgresRelationalStore
from manifold.shared.stores.pg_staging import PostgresStagingStore

ZERO = {"missing": 0, "stale": 0, "orphaned": 0, "wrong_version": 0}


@pytest.fixture(scope="module")
def admin(settings, pg_conninfo: str) -> str:
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    return pg_conninfo


@pytest.fixture
def ports(settings, admin, es_client, neo4j_driver) -> ReconcilePorts:
    ingest = settings.postgres.ingest_conninfo()
    return ReconcilePorts(PostgresVersionManifest(ingest), PostgresRelationalStore(ingest),
                          ElasticsearchTextIndex(es_client), Neo4jGraphStore(neo4j_driver),
                          staging=PostgresStagingStore(ingest))


@pytest.fixture
def tenant(unique: Callable[[str], str]) -> str:
    return unique("rec")


def _ingest(ports: ReconcilePorts, tenant: str, document_id: str, version: int):
    """What the pipeline does: stage the extracted payload, load, publish."""
    doc = build_doc(tenant, document_id=document_id, version=version, content=f"v{version}")
    key = payload_key(tenant, document_id, version, doc.versions.fingerprint())
    ports.staging.put_payload(tenant, key, "extracted", doc.model_dump_json().encode())  # type: ignore[union-attr]
    notice = load.handle(doc, ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert publish(notice, ports) == "activated"
    return doc, notice


def test_a_clean_ingest_has_zero_drift(ports, tenant) -> None:
    _ingest(ports, tenant, "contract-7", 1)
    _ingest(ports, tenant, "contract-7", 2)
    report = reconcile(ports, [tenant], inflight_s=0)  # v1 is retired but inside the grace period
    assert report.to_json()["drift"] == ZERO and report.failed == []


def test_corruption_in_every_store_is_detected_and_repaired(
        ports, tenant, admin, es_client, neo4j_driver, capsys) -> None:
    doc, notice = _ingest(ports, tenant, "contract-7", 1)
    _ingest(ports, tenant, "invoice-9", 1)
    _ingest(ports, tenant, "invoice-9", 2)  # invoice-9@1 retired: stale once the grace period is 0
    c0, c1 = doc.chunks[0].chunk_id, doc.chunks[1].chunk_id
    es_client.delete(index=ES_INDEX, id=f"{tenant}/{c0}", refresh=True)
    neo4j_driver.execute_query("MATCH ()-[r {tenant_id: $t, document_id: 'contract-7'}]->(:Entity) "
                               "WHERE type(r) <> 'MENTIONED_IN' DELETE r", t=tenant)
    with psycopg.connect(admin) as conn:
        conn.execute("DELETE FROM manifold.chunks WHERE tenant_id = %s AND chunk_id = %s", (tenant, c1))
        conn.execute("UPDATE manifold.document_versions SET state = 'staged' WHERE tenant_id = %s "
                     "AND document_id = 'invoice-9' AND version = 2", (tenant,))
    ghost = build_doc(tenant, document_id="ghost", version=1)
    ports.text.write_version(ghost)
    ports.graph.write_version(ghost)
    ports.graph.set_serving(tenant, "invoice-9", 2, False)  # type: ignore[attr-defined]

    found = reconcile(ports, [tenant], grace_s=0, inflight_s=0).to_json()
    assert found["stores"] == {
        "postgres": {"drift": {**ZERO, "missing": 1, "stale": 1, "wrong_version": 1}, "repaired": 0},
        "elasticsearch": {"drift": {**ZERO, "missing": 1, "stale": 1, "orphaned": 1}, "repaired": 0},
        "neo4j": {"drift": {"missing": 1, "stale": 1, "orphaned": 1, "wrong_version": 1}, "repaired": 0},
    }
    assert found["drift"] == {"missing": 3, "stale": 3, "orphaned": 2, "wrong_version": 2}

    repaired = reconcile(ports, [tenant], repair_drift=True, grace_s=0, inflight_s=0)
    assert repaired.failed == [] and sum(repaired.repaired.values()) == 10
    assert reconcile(ports, [tenant], grace_s=0, inflight_s=0).to_json()["drift"] == ZERO
    assert [s.manifest(tenant, "contract-7", 1) for s in ports.stores] == list(notice.stores)
    assert all(set(s.manifest(tenant, "invoice-9", 1).counts.values()) == {0} for s in ports.stores)
    assert ports.text.serving_drift(tenant, {("contract-7", 1), ("invoice-9", 2)}) == set()  # type: ignore[attr-defined]

    capsys.readouterr()
    assert main(["reconcile", "--tenant", tenant, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["drift"] == ZERO and out["repaired"] == 0 and out["stores"]["neo4j"]["drift"] == ZERO
    assert main(["status", "--tenant", tenant, "--json"]) == 0
    status = {d["document_id"]: d for d in json.loads(capsys.readouterr().out)["documents"]}
    assert (status["contract-7"]["active_version"], status["contract-7"]["state"]) == (1, "active")
    assert status["contract-7"]["counts"] == {"postgres": 9, "elasticsearch": 3, "neo4j": 3}
    assert (status["invoice-9"]["active_version"], status["invoice-9"]["state"]) == (2, "active")


def test_repair_without_a_staged_payload_is_reported(ports, tenant, es_client) -> None:
    doc = build_doc(tenant)
    publish(load.handle(doc, ports.relational, ports.text, ports.graph), ports)  # type: ignore[arg-type]
    es_client.delete(index=ES_INDEX, id=f"{tenant}/{doc.chunks[0].chunk_id}", refresh=True)
    report = reconcile(ports, [tenant], repair_drift=True, inflight_s=0)
    assert report.drift("elasticsearch")["missing"] == 1
    assert any("no extracted payload" in f for f in report.failed)
    # leave no deliberate drift behind on the shared stack
    delete(DocumentDeleted(tenant_id=tenant, document_id="contract-7", version=2), ports)
    assert reconcile(ports, [tenant], inflight_s=0).to_json()["drift"] == ZERO


def test_status_and_reconcile_show_documents_in_flight(ports, tenant, settings, capsys) -> None:
    """Issue 13, finding 5: after a worker dies mid-pipeline, the versions the ledger handed out
    but the publisher never saw are listed with the furthest stage whose output is staged."""
    from manifold.ingest import lifecycle
    from manifold.shared.stores.ledger import PostgresVersionLedger

    ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())
    ports.ledger = ledger
    _ingest(ports, tenant, "done.txt", 1)  # published: in the manifest, not in flight
    ledger.confirm(tenant, "done.txt", ledger.reserve(tenant, "done.txt", "a" * 64))
    assert ledger.reserve(tenant, "done.txt", "a" * 64) is None
    for doc, sha in (("queued.txt", "b" * 64), ("half/way.txt", "c" * 64)):
        ledger.confirm(tenant, doc, ledger.reserve(tenant, doc, sha))
    ledger.reserve(tenant, "unacked.txt", "d" * 64)  # the publish client died before the ack
    key = payload_key(tenant, "half/way.txt", 1, "fp")
    for stage in ("parsed", "chunked"):  # the chunk worker finished, the embed worker was killed
        ports.staging.put_payload(tenant, key, stage, b"{}")  # type: ignore[union-attr]
    ports.staging.put_payload(tenant, payload_key(tenant, "way.txt", 1, "fp"), "extracted", b"{}")  # type: ignore[union-attr]
    with psycopg.connect(settings.postgres.conninfo()) as conn:  # done.txt@2 is in flight too: queued
        conn.execute("UPDATE manifold.upstream_versions SET version = 2 WHERE tenant_id = %s "
                     "AND document_id = 'done.txt'", (tenant,))
    expected = {("done.txt", 2, "queued"), ("half/way.txt", 1, "chunked"), ("queued.txt", 1, "queued"),
                ("unacked.txt", 1, "unconfirmed")}
    status = lifecycle.status(ports, [tenant])
    assert {(f["document_id"], f["version"], f["stage"]) for f in status["in_flight"]} == expected
    report = reconcile(ports, [tenant], inflight_s=0)
    assert {(f.document_id, f.version, f.stage) for f in report.in_flight} == expected
    assert main(["status", "--tenant", tenant]) == 0
    out = capsys.readouterr().out
    assert "in flight: 4" in out and "half/way.txt" in out and "chunked" in out
    main(["reconcile", "--tenant", tenant, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert {(f["document_id"], f["stage"]) for f in body["in_flight"]} >= {("half/way.txt", "chunked")}
