"""A handler bug dead-letters a document as poison; once fixed, `dlq replay` loads it exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pipeline_support import (
    dead_letters,
    load_notices,
    migrate,
    read_topic,
    running_workers,
    store_manifests,
    test_settings,
    wait_for,
)

from manifold.ingest import pipeline, workers
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.dlq import DeadLetter

DLQ = str(Path(sys.executable).parent / "dlq")


def _dlq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DLQ, *args], capture_output=True, text=True, timeout=180, env=dict(os.environ))


def test_fixed_poison_replays_once(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str,
                                   es_client, neo4j_driver, monkeypatch: pytest.MonkeyPatch) -> None:
    s = test_settings(settings)
    migrate(s)
    ports = workers.build_ports(s)
    tenant, doc = f"poison-{uuid.uuid4().hex[:8]}", "contracts/fragile.md"

    bug = {"active": True}
    real_extract = pipeline.run_extract

    def extract_with_a_bug(notice, ports_):  # type: ignore[no-untyped-def]
        if bug["active"] and notice.document_id == doc:
            raise KeyError("extractor bug: 'valid_to' missing for this clause")
        return real_extract(notice, ports_)

    monkeypatch.setattr(pipeline, "run_extract", extract_with_a_bug)
    with running_workers(s) as errors:
        from manifold.deploy.compose.distributed import upstream_client

        content = (b"# Supply agreement CTR-2026-0042\n\nCompany A has approved Supplier Beta as an approved "
                   b"vendor from 2026-01-01 to 2026-12-31.\n\n- Supplier Beta supplies PRD-482.\n")
        assert upstream_client(s).publish_bytes(tenant, doc, content, "text/markdown") == 1
        wait_for("the poison dead letter",
              lambda: any(d.document_id == doc and d.error_kind == "poison"
                          for d in dead_letters(kafka_bootstrap, tenant)), errors)
        [letter] = [d for d in dead_letters(kafka_bootstrap, tenant) if d.document_id == doc]
        assert (letter.stage, letter.source_topic) == ("extract", topics.STAGE_EMBEDDED)
        assert "extractor bug" in letter.error
        assert ports.relational.manifest(tenant, doc, 1).counts["chunks"] == 0  # nothing loaded

        listed = _dlq("list", "--tenant", tenant, "--json")
        assert listed.returncode == 0, listed.stderr
        [entry] = json.loads(listed.stdout)
        entry_id = entry["id"]

        bug["active"] = False  # the fix is deployed
        replay = _dlq("replay", "--tenant", tenant, "--yes")
        assert replay.returncode == 0, replay.stdout + replay.stderr
        wait_for("the replayed document to load", lambda: len(load_notices(kafka_bootstrap, tenant, doc)) >= 1, errors)
        [notice] = load_notices(kafka_bootstrap, tenant, doc)
        loaded = store_manifests(ports, tenant, doc, 1)
        assert loaded == list(notice.stores)
        assert {m.store: m.counts for m in notice.stores}["neo4j"]["edges"] >= 2

        again = _dlq("replay", entry_id, "--yes")  # a second replay of the same message
        assert again.returncode == 0, again.stdout + again.stderr
        wait_for("the second replay to load", lambda: len(load_notices(kafka_bootstrap, tenant, doc)) >= 2, errors)
        assert store_manifests(ports, tenant, doc, 1) == loaded  # no duplicate artifacts


def test_poison_of_any_shape_on_kafka_is_dead_lettered_and_the_worker_goes_on(
        settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client, neo4j_driver) -> None:
    """Raw poison on `manifold.documents` (deeply nested JSON, invalid UTF-8, wrong types, a value
    too large for a DLQ message), in ONE partition with a good document behind it: every poison
    message is dead-lettered with a reason, and the good one still publishes."""
    from confluent_kafka import Producer

    from manifold.deploy.compose.distributed import upstream_client
    from manifold.shared.kafka import producer_config

    s = test_settings(settings)
    migrate(s)
    tenant, doc = f"poison-{uuid.uuid4().hex[:8]}", "after-the-poison.md"
    key = f"{tenant}/{doc}".encode()  # same key: same partition, poison first
    poison = {
        "nested": b'{"tenant_id": "' + tenant.encode() + b'", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "not-utf8": b'{"tenant_id": "' + tenant.encode() + b'", "\xff\xfe": "\x80"}',
        "wrong-types": b'{"type": "DocumentUpserted", "tenant_id": "' + tenant.encode()
                       + b'", "document_id": 7, "version": "one", "metadata": []}',
        "huge": b'{"tenant_id": "' + tenant.encode() + b'", "pad": "' + b"x" * 900_000 + b'"}',
    }
    def by_key() -> list[DeadLetter]:
        return read_topic(kafka_bootstrap, topics.DLQ, lambda raw: (
            letter if (letter := DeadLetter.model_validate_json(raw)).key == key and letter.stage == "parse" else None))

    producer = Producer(producer_config(kafka_bootstrap, "poison-test"))
    for value in poison.values():
        producer.produce(topics.DOCUMENTS, key=key, value=value)
    assert producer.flush(30) == 0
    with running_workers(s) as errors:
        assert upstream_client(s).publish_bytes(tenant, doc, b"# After\n\nThe good document behind the poison.\n",
                                                 "text/markdown") == 1
        wait_for("the good document behind the poison to load",
                 lambda: len(load_notices(kafka_bootstrap, tenant, doc)) >= 1, errors)
        wait_for("every poison message in the DLQ", lambda: len(by_key()) >= 4, errors)
        assert not errors
    letters = by_key()
    assert len(letters) == 4 and all(d.error.strip() for d in letters)
    assert {d.error_kind for d in letters} <= {"poison", "bad_input"}
    assert any("truncated" in d.error for d in letters)  # the 900 kB value did not block the DLQ
