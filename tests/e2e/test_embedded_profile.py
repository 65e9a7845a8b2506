"""The embedded profile end to end: in-process bus + pipeline + publisher, the PostgreSQL text and
graph adapters, and the quickstart's checked questions — on the dev stack's PostgreSQL only (no
Kafka, Elasticsearch or Neo4j involved). Tenants are unique per run; under CI=true a missing
PostgreSQL fails (tests/conftest.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from manifold.shared.config import ManifoldSettings


@dataclass(frozen=True)
class Embedded:
    settings: ManifoldSettings
    world: object
    prefix: str


@pytest.fixture(scope="module")
def embedded(settings: ManifoldSettings, pg_conninfo: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    from manifold.deploy.cli import quickstart
    from manifold.deploy.compose.embedded import prepare
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    root = tmp_path_factory.mktemp("embedded")
    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=root),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    prepare(s, quiet=True)
    prefix = f"e{uuid.uuid4().hex[:8]}-"
    world = quickstart.ingest_world(s, {"northstar": f"{prefix}northstar", "southwind": f"{prefix}southwind"},
                                    quiet=True, out=lambda _: None)
    yield Embedded(settings=s, world=world, prefix=prefix)
    from manifold.deploy.compose import ask_server

    ask_server.stop(s)  # the CLI tests' `manifold ask` started the directory's embedded query server


def test_every_quickstart_question_is_answered_correctly(embedded: Embedded) -> None:
    from manifold.deploy.cli import quickstart

    results = quickstart.ask_all(embedded.settings, embedded.world, out=lambda _: None)  # type: ignore[arg-type]
    assert len(results) == 9
    failed = {check.kind: (problems, reply.status) for check, reply, problems in results if problems}
    assert not failed, failed
    stores = {ev.store for _, reply, _ in results for ev in reply.evidence}
    assert stores <= {"postgres"}, stores  # nothing came from Elasticsearch or Neo4j


def test_ingesting_again_is_idempotent(embedded: Embedded) -> None:
    from manifold.deploy.cli import quickstart

    lines: list[str] = []
    quickstart.ingest_world(embedded.settings, {"northstar": f"{embedded.prefix}northstar",
                                                "southwind": f"{embedded.prefix}southwind"}, quiet=True,
                            out=lines.append)
    assert any("published 0, unchanged 16" in line for line in lines), lines


def _env(monkeypatch: pytest.MonkeyPatch, embedded: Embedded) -> None:
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(embedded.settings.embedded.dir))


def test_cli_ingest_ask_status_delete_reconcile_in_process(embedded: Embedded, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from manifold.deploy.cli import main

    _env(monkeypatch, embedded)
    tenant = f"{embedded.prefix}cli"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "memo.txt").write_text("Warehouse memo: pallet racking inspection is due on 2026-06-01.\n")
    assert main(["ingest", str(tmp_path / "notes"), "--tenant", tenant, "--quiet"]) == 0
    assert "published 1" in capsys.readouterr().out
    assert main(["ingest", str(tmp_path / "notes"), "--tenant", tenant, "--quiet"]) == 0
    assert "published 0, unchanged 1" in capsys.readouterr().out

    assert main(["ask", "pallet racking inspection", "--tenant", tenant, "--json", "--profile", "embedded"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert reply["status"] == "answered" and reply["evidence"][0]["document_id"] == "memo.txt"

    assert main(["status", "--tenant", tenant, "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["documents"]
    assert (doc["document_id"], doc["state"], doc["active_version"]) == ("memo.txt", "active", 1)
    assert doc["counts"]["postgres"] > 0 and doc["counts"]["elasticsearch"] > 0

    assert main(["reconcile", "--tenant", tenant]) == 0
    capsys.readouterr()

    assert main(["delete", "memo.txt", "--tenant", tenant]) == 0
    capsys.readouterr()
    assert main(["status", "--tenant", tenant, "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["documents"]
    assert (doc["state"], doc["active_version"]) == ("deleted", None)
    assert main(["ask", "pallet racking inspection", "--tenant", tenant, "--json"]) == 0
    assert not json.loads(capsys.readouterr().out)["evidence"]


def test_quickstart_command_answers_for_the_sample_world(embedded: Embedded, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`manifold ask --profile embedded` against the quickstart's data (as of the world's date)."""
    from manifold.deploy.cli import main

    _env(monkeypatch, embedded)
    code = main(["ask", "What was Northstar Manufacturing's total spend on Monitoring Products from approved "
                 "vendors last quarter?", "--tenant", f"{embedded.prefix}northstar", "--as-of", "2026-05-10"])
    out = capsys.readouterr().out
    assert code == 0 and "status: answered" in out and "1809.50 EUR" in out, out
