"""The stage topology is declared once (shared/topics.py) and every user reads it there."""

from __future__ import annotations

from manifold.deploy.compose.embedded import SOURCES
from manifold.ingest import ROLES
from manifold.ingest.workers import stage_specs
from manifold.shared import topics


def test_the_topology_is_a_chain_over_the_pipeline_topics() -> None:
    stages = topics.TOPOLOGY
    assert [s.source for s in stages[1:]] == [s.sink for s in stages[:-1]]
    assert stages[0].source == topics.DOCUMENTS and stages[-1].sink is None
    assert {s.source for s in stages} <= set(topics.PIPELINE_TOPICS)
    assert ROLES == tuple(s.role for s in stages + topics.ACCESS)
    assert all(s.sink is None and s.source in topics.ACCESS_TOPICS for s in topics.ACCESS)
    assert set(topics.ACCESS_TOPICS) <= set(topics.PIPELINE_TOPICS)
    assert {r: s.group for r, s in topics.STAGES.items()} == {r: f"manifold.{r}" for r in ROLES}


def test_workers_and_the_embedded_pipeline_read_the_same_sources() -> None:
    specs = stage_specs(ports=object())  # type: ignore[arg-type]  # builds closures only; nothing runs
    assert {role: spec.source for role, spec in specs.items()} == {
        s.role: s.source for s in topics.TOPOLOGY if s.role != "publish"}
    assert SOURCES == topics.STAGE_SOURCES
