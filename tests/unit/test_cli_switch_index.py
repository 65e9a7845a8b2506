"""`manifold switch-index` (step 4 of an analysis rollout): the serving alias moves to the index
this code writes only when `reconcile` finds no active version missing from it, or with --force;
it is idempotent and says what it did. The alias switch itself runs against the real
Elasticsearch in tests/integration/test_elasticsearch_smoke.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from manifold.deploy.cli import main

pytestmark = pytest.mark.unit


@dataclass
class FakeIndex:
    serving: set[str] = field(default_factory=lambda: {"chunks-v1"})
    alias: str = "chunks"
    index: str = "chunks-v2"

    def ensure_index(self) -> None: ...

    def alias_targets(self) -> set[str]:
        return set(self.serving)

    def switch_alias(self) -> set[str]:
        before, self.serving = self.serving - {self.index}, {self.index}
        return before


@dataclass
class Finding:
    store: str
    kind: str


@dataclass
class Report:
    findings: list[Finding]
    failed: list[str] = field(default_factory=list)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from manifold.deploy.compose import profiles
    from manifold.ingest import reconciler

    state: dict[str, Any] = {"index": FakeIndex(), "findings": [Finding("elasticsearch", "missing")]}
    monkeypatch.setenv("MANIFOLD_PROFILE", "distributed")
    monkeypatch.setattr(profiles, "lifecycle_ports", lambda _settings: type("P", (), {"text": state["index"]})())
    monkeypatch.setattr(reconciler, "reconcile", lambda *_a, **_k: Report(list(state["findings"])))
    return state


def test_refuses_while_versions_are_missing_from_the_new_index(world, capsys) -> None:
    assert main(["switch-index"]) == 3
    assert "1 active version(s) are missing from chunks-v2" in capsys.readouterr().err
    assert world["index"].serving == {"chunks-v1"}


def test_switches_once_reconcile_is_clean_and_then_does_nothing(world, capsys) -> None:
    world["findings"] = [Finding("neo4j", "missing")]  # another store's drift does not block the switch
    assert main(["switch-index", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["switched"] is True and out["serving_before"] == ["chunks-v1"] and out["serving_after"] == ["chunks-v2"]
    assert main(["switch-index"]) == 0
    assert "chunks already serves chunks-v2" in capsys.readouterr().out


def test_force_switches_despite_missing_versions(world, capsys) -> None:
    assert main(["switch-index", "--force"]) == 0
    assert "chunks now serves chunks-v2 (was: chunks-v1)" in capsys.readouterr().out
