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
    running_workers,
    store_manifests,
    test_settings,
    wait_for,
)

from manifold.ingest import pipeline, workers
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings

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
        from manifold.shared.cli import _upstream_client

        content = (b"# Supply agreement CTR-2026-0042\n\nCompany A has approved Supplier Beta as an approved "
                   b"vendor from 2026-01-01 to 2026-12-31.\n\n- Supplier Beta supplies PRD-482.\n")
        assert _upstream_client(s).publish_bytes(tenant, doc, content, "text/markdown") == 1
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
