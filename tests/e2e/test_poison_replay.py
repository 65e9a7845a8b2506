"""A handler bug dead-letters a document as poison; once fixed, `dlq replay` loads it exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from manifold.ingest import ROLES, pipeline, workers
from manifold.shared import topics
from manifold.shared.artifacts import LoadNotice
from manifold.shared.config import IngestSettings, ManifoldSettings
from manifold.shared.stores import pg_schema

from test_ingest_pipeline import _dead_letters, _read_topic, _store_manifests

DLQ = str(Path(sys.executable).parent / "dlq")


def _notices(bootstrap: str, tenant: str, doc: str) -> list[LoadNotice]:
    def accept(raw: bytes) -> LoadNotice | None:
        try:
            notice = LoadNotice.model_validate_json(raw)
        except ValueError:
            return None
        return notice if (notice.doc.tenant_id, notice.doc.document_id) == (tenant, doc) else None

    return _read_topic(bootstrap, topics.PUBLISH, accept)


def _wait(what: str, check, errors: list, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert not errors, errors
        if check():
            return
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}")


def _dlq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DLQ, *args], capture_output=True, text=True, timeout=180, env=dict(os.environ))


def test_fixed_poison_replays_once(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str,
                                   es_client, neo4j_driver, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings.model_copy(update={"ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    pg = s.postgres
    pg_schema.migrate(pg.conninfo(), ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    ports = workers.build_ports(s)
    tenant, doc = f"poison-{uuid.uuid4().hex[:8]}", "contracts/fragile.md"

    bug = {"active": True}
    real_extract = pipeline.run_extract

    def extract_with_a_bug(notice, ports_):  # type: ignore[no-untyped-def]
        if bug["active"] and notice.document_id == doc:
            raise KeyError("extractor bug: 'valid_to' missing for this clause")
        return real_extract(notice, ports_)

    monkeypatch.setattr(pipeline, "run_extract", extract_with_a_bug)
    stop, errors = threading.Event(), []

    def run() -> None:
        try:
            workers.run(s, list(ROLES), stop)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        from manifold.shared.cli import _upstream_client

        content = (b"# Supply agreement CTR-2026-0042\n\nCompany A has approved Supplier Beta as an approved "
                   b"vendor from 2026-01-01 to 2026-12-31.\n\n- Supplier Beta supplies PRD-482.\n")
        assert _upstream_client(s).publish_bytes(tenant, doc, content, "text/markdown") == 1
        _wait("the poison dead letter",
              lambda: any(d.document_id == doc and d.error_kind == "poison"
                          for d in _dead_letters(kafka_bootstrap, tenant)), errors)
        [letter] = [d for d in _dead_letters(kafka_bootstrap, tenant) if d.document_id == doc]
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
        _wait("the replayed document to load", lambda: len(_notices(kafka_bootstrap, tenant, doc)) >= 1, errors)
        [notice] = _notices(kafka_bootstrap, tenant, doc)
        loaded = _store_manifests(ports, tenant, doc, 1)
        assert loaded == list(notice.stores)
        assert {m.store: m.counts for m in notice.stores}["neo4j"]["edges"] >= 2

        again = _dlq("replay", entry_id, "--yes")  # a second replay of the same message
        assert again.returncode == 0, again.stdout + again.stderr
        _wait("the second replay to load", lambda: len(_notices(kafka_bootstrap, tenant, doc)) >= 2, errors)
        assert _store_manifests(ports, tenant, doc, 1) == loaded  # no duplicate artifacts
    finally:
        stop.set()
        thread.join(60)
