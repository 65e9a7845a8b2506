"""Finding 3 of issue 13: after a delete and gc (grace 0), a document's content is nowhere.

A unique canary string is ingested in three shapes (a large document that travels as a
claim-check blob, a small inline one, and one the parse stage dead-letters), the documents are
deleted, gc runs, and then EVERY PostgreSQL column of a text, json or bytea type (found in
information_schema, so new tables are covered), every Elasticsearch index, every Neo4j node and
relationship, and the stage and publish topics are searched for the canary and its base64
forms (`ingest/erasure_audit.py`). Another tenant's canary survives the delete, then
`manifold purge-tenant` erases that tenant too. Both profiles: distributed (Kafka, PostgreSQL,
Elasticsearch, Neo4j) and embedded (everything, bus and DLQ included, in PostgreSQL).
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_support import migrate, running_workers, test_settings, wait_for

from manifold.ingest import erasure, erasure_audit, lifecycle
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.events import MAX_INLINE_BYTES

STAGE_TOPICS = (topics.STAGE_PARSED, topics.STAGE_CHUNKED, topics.STAGE_EMBEDDED, topics.STAGE_EXTRACTED,
                topics.PUBLISH)


def canary() -> str:
    return "zqcanary" + "".join(random.choices(string.ascii_lowercase, k=24))


def needles(marker: str) -> list[bytes]:
    # the first 20 characters as written (a stemmed index term keeps them), every encoded form of the whole
    return [marker[:20].encode(), *erasure_audit.forms(marker)[1:]]


def big_text(marker: str) -> bytes:
    """Over the inline limit, so it travels as a claim-check blob; mostly blank lines, which parsing
    collapses, so it embeds as a handful of chunks."""
    head = f"Retention memo.\n\nThe auditor code is {marker} for this contract.\n\n"
    body = (head + " \n" * (MAX_INLINE_BYTES // 2 + 1000) + "The pump station log was filed.\n").encode()
    assert len(body) > MAX_INLINE_BYTES
    return body


def small_text(marker: str) -> bytes:
    return f"Site note.\n\nACME Corp approved Beta GmbH as a vendor; reference {marker}.\n".encode()


def poison_json(marker: str) -> bytes:
    return ('{"note": "' + marker + '", broken').encode()  # invalid JSON: the parse stage dead-letters it


def everywhere(settings: ManifoldSettings, es_client, neo4j_driver, marker: str, *, kafka: bool) -> dict[str, list]:
    found = {
        "postgres": erasure_audit.find_in_postgres(settings.postgres.conninfo(), needles(marker)),
        "elasticsearch": erasure_audit.find_in_elasticsearch(es_client, needles(marker)) if es_client else [],
        "neo4j": erasure_audit.find_in_neo4j(neo4j_driver, needles(marker)) if neo4j_driver else [],
    }
    if kafka:
        found["kafka stage/publish topics"] = erasure_audit.find_in_kafka(
            settings.kafka.bootstrap_servers, STAGE_TOPICS, needles(marker))
    return found


def _nowhere(found: dict[str, list]) -> bool:
    return not any(found.values())


# ------------------------------------------------------------------------------ distributed
@pytest.fixture(scope="module")
def stack(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client, neo4j_driver
          ) -> Iterator[dict]:
    s = test_settings(settings)
    migrate(s)
    from manifold.deploy.compose.distributed import upstream_client

    with running_workers(s) as errors:
        yield {"settings": s, "client": upstream_client(s), "ports": lifecycle.build_ports(s), "errors": errors}


def _states(ports, tenant: str, doc: str) -> dict[int, str]:
    return {e.version: e.state for e in ports.manifest.entries(tenant, doc)}


@pytest.mark.timeout(600)  # four full audits of every store on a shared 2-core machine
def test_delete_then_gc_leaves_the_content_nowhere_and_purge_tenant_erases_a_tenant(
        stack: dict, es_client, neo4j_driver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    s, client, ports, errors = stack["settings"], stack["client"], stack["ports"], stack["errors"]
    victim, keeper = f"erase-{uuid.uuid4().hex[:8]}", f"keep-{uuid.uuid4().hex[:8]}"
    gone, kept = canary(), canary()
    client.publish_bytes(victim, "memo/big.txt", big_text(gone), "text/plain")
    client.publish_bytes(victim, "notes/small.txt", small_text(gone), "text/plain")
    client.publish_bytes(victim, "bad.json", poison_json(gone), "application/json")
    client.publish_bytes(keeper, "notes/small.txt", small_text(kept), "text/plain")
    wait_for("the documents to become active", lambda: all(
        _states(ports, t, d) == {1: "active"} for t, d in
        ((victim, "memo/big.txt"), (victim, "notes/small.txt"), (keeper, "notes/small.txt"))), errors)
    before = everywhere(s, es_client, neo4j_driver, gone, kafka=False)
    assert {"manifold.stage_payloads.payload", "manifold.chunks.text", "manifold.staging_blobs.content"} <= set(
        before["postgres"]), before  # the audit sees the canary where the pipeline put it
    assert before["elasticsearch"], before

    for doc in ("memo/big.txt", "notes/small.txt", "bad.json"):
        assert client.delete(victim, doc) == 2
    wait_for("the deletes to apply", lambda: all(
        set(_states(ports, victim, d).values()) == {"deleted"} and 2 in _states(ports, victim, d)
        for d in ("memo/big.txt", "notes/small.txt", "bad.json")), errors)
    removed = erasure.collect(ports, victim, 0.0, staging=ports.staging)
    assert removed["stage_payloads"] >= 8 and removed["staging_blobs"] == 1, removed

    after = everywhere(s, es_client, neo4j_driver, gone, kafka=True)
    assert _nowhere(after), after
    assert erasure.collect(ports, victim, 0.0, staging=ports.staging) == {
        "versions": 0, "stage_payloads": 0, "staging_blobs": 0}  # idempotent
    survivor = everywhere(s, es_client, neo4j_driver, kept, kafka=False)
    assert "manifold.chunks.text" in survivor["postgres"] and survivor["elasticsearch"], survivor

    # Kafka cannot delete a record: the two topics that can hold content have a bounded retention.
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": s.kafka.bootstrap_servers})
    for resource, future in admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, t) for t in (topics.DOCUMENTS, topics.DLQ)]).items():
        config = future.result()
        assert config["retention.ms"].value == str(s.kafka.content_retention_ms), resource
        assert int(config["segment.ms"].value) <= 24 * 3600 * 1000, resource

    # purge-tenant: refused without the typed confirmation, then erases the keeper everywhere.
    from manifold.deploy.cli import main

    monkeypatch.setattr("builtins.input", lambda _prompt: "not-the-tenant")
    assert main(["purge-tenant", keeper]) == 1
    assert everywhere(s, es_client, neo4j_driver, kept, kafka=False)["postgres"]
    monkeypatch.setattr("builtins.input", lambda _prompt: keeper)
    assert main(["purge-tenant", keeper]) == 0
    out = capsys.readouterr().out
    assert "purged" in out and "chunks" in out and "manifold-chunks" in out, out
    assert _nowhere(everywhere(s, es_client, neo4j_driver, kept, kafka=True))
    assert keeper not in ports.manifest.tenants()


# ------------------------------------------------------------------------------ embedded
@pytest.fixture
def embedded_env(settings: ManifoldSettings, pg_conninfo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> ManifoldSettings:
    from manifold.deploy.compose.embedded import prepare
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=tmp_path / "emb"),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2, gc_grace_s=0)})
    prepare(s, quiet=True)
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(tmp_path / "emb"))
    monkeypatch.setenv("MANIFOLD_INGEST__GC_GRACE_S", "0")
    monkeypatch.setenv("MANIFOLD_INGEST__METRICS_PORT", "0")
    monkeypatch.setenv("MANIFOLD_INGEST__MAX_ATTEMPTS", "2")
    return s


def test_embedded_delete_erases_content_from_every_table_bus_and_dlq_included(
        embedded_env: ManifoldSettings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from manifold.deploy.cli import main

    s = embedded_env
    victim, keeper = f"erase-e{uuid.uuid4().hex[:8]}", f"keep-e{uuid.uuid4().hex[:8]}"
    gone, kept = canary(), canary()
    for tenant, _marker, files in ((victim, gone, {"memo/big.txt": big_text(gone), "small.txt": small_text(gone),
                                                  "bad.json": poison_json(gone)}),
                                  (keeper, kept, {"small.txt": small_text(kept)})):
        root = tmp_path / tenant
        for rel, body in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(body)
        main(["ingest", str(root), "--tenant", tenant, "--quiet"])  # exit 1: bad.json is dead-lettered
    capsys.readouterr()
    before = erasure_audit.find_in_postgres(s.postgres.conninfo(), needles(gone))
    assert {"manifold.bus_messages.value", "manifold.text_chunks.text", "manifold.stage_payloads.payload",
            "manifold.staging_blobs.content"} <= set(before), before  # bus_messages: the upsert and the dead letter

    for doc in ("memo/big.txt", "small.txt", "bad.json"):
        assert main(["delete", doc, "--tenant", victim]) == 0
    capsys.readouterr()
    after = erasure_audit.find_in_postgres(s.postgres.conninfo(), needles(gone))
    assert after == [], after
    assert main(["gc", "--tenant", victim, "--json"]) == 0  # idempotent: nothing left to remove
    assert set(json.loads(capsys.readouterr().out)[victim].values()) == {0}
    assert "manifold.text_chunks.text" in erasure_audit.find_in_postgres(s.postgres.conninfo(), needles(kept))

    assert main(["purge-tenant", keeper, "--yes"]) == 0
    assert "purged" in capsys.readouterr().out
    assert erasure_audit.find_in_postgres(s.postgres.conninfo(), needles(kept)) == []
