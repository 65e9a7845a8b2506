"""The plan engine: references, parallel steps, budget, failure boundaries, breakers (fakes only)."""

from __future__ import annotations

import threading
import time
from typing import Any

from manifold.query.breaker import Breakers
from manifold.query.engine import Engine
from manifold.query.plan import validate_plan
from manifold.query.types import StepResult


class Fake:
    def __init__(self, source: str, outputs: dict[str, tuple[str, ...]] | None = None, *,
                 fail: bool = False, sleep: float = 0.0) -> None:
        self.source = source
        self.outputs = outputs or {}
        self.fail = fail
        self.sleep = sleep
        self.calls: list[tuple[Any, str, float]] = []

    def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult:
        self.calls.append((params, tenant_id, timeout_s))
        if self.sleep:
            time.sleep(self.sleep)
        if self.fail:
            raise RuntimeError(f"{self.source} down")
        return StepResult(outputs=self.outputs, rows=len(next(iter(self.outputs.values()), ())))


PLAN = validate_plan({"steps": [
    {"id": "vendors", "operator": "graph_expand",
     "params": {"from_ids": ["ent_company"], "relation": "APPROVED_VENDOR"}},
    {"id": "spend", "operator": "metric_query",
     "params": {"metric": "total_spend", "where": {"supplier_names": "$vendors.names",
                                                    "period": {"start": "2026-01-01", "end": "2026-04-01"}}}},
    {"id": "passages", "operator": "hybrid_search", "optional": True, "params": {"query": "approved vendors"}},
]})


def _engine(**executors: Fake) -> Engine:
    return Engine(executors, Breakers(failures=2, reset_s=60))


def test_references_are_resolved_and_the_tenant_is_the_callers() -> None:
    graph = Fake("neo4j", {"names": ("Supplier Beta", "Supplier Gamma"), "ids": ("e1", "e2")})
    metric, text = Fake("postgres", {}), Fake("hybrid", {"document_ids": ("d",)})
    out = _engine(graph_expand=graph, metric_query=metric, hybrid_search=text).execute(
        PLAN, tenant_id="northstar", deadline=time.monotonic() + 5)
    params, tenant, timeout = metric.calls[0]
    assert params.where.supplier_names == ["Supplier Beta", "Supplier Gamma"]
    assert tenant == "northstar" and 0 < timeout <= 5
    assert {s.step_id: s.status for s in out.steps} == {"vendors": "ok", "spend": "empty", "passages": "ok"}
    assert out.gaps == []


def test_an_empty_join_input_skips_the_step_with_a_gap_instead_of_running_unscoped() -> None:
    metric = Fake("postgres")
    out = _engine(graph_expand=Fake("neo4j", {"names": ()}), metric_query=metric,
                  hybrid_search=Fake("hybrid")).execute(PLAN, tenant_id="t", deadline=time.monotonic() + 5)
    assert metric.calls == []
    assert [(g.step, g.kind) for g in out.gaps] == [("spend", "missing_data")]


def test_a_failed_step_is_a_gap_and_its_dependants_are_skipped() -> None:
    metric = Fake("postgres")
    out = _engine(graph_expand=Fake("neo4j", fail=True), metric_query=metric,
                  hybrid_search=Fake("hybrid", {"document_ids": ("d",)})).execute(
        PLAN, tenant_id="t", deadline=time.monotonic() + 5)
    statuses = {s.step_id: s.status for s in out.steps}
    assert statuses == {"vendors": "failed", "spend": "skipped", "passages": "ok"}
    assert {g.kind for g in out.gaps} == {"step_failed"}
    assert metric.calls == []


def test_a_slow_step_times_out_within_the_deadline() -> None:
    started = time.monotonic()
    out = _engine(graph_expand=Fake("neo4j", {"names": ("x",)}), metric_query=Fake("postgres", sleep=3),
                  hybrid_search=Fake("hybrid")).execute(PLAN, tenant_id="t", deadline=started + 0.6)
    assert time.monotonic() - started < 1.5
    assert {s.step_id: s.status for s in out.steps}["spend"] == "timeout"
    assert any(g.kind == "timeout" for g in out.gaps)


def test_independent_steps_run_in_parallel() -> None:
    barrier = threading.Barrier(2, timeout=2)

    class Meet(Fake):
        def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult:
            barrier.wait()  # deadlocks (then times out) unless both run at once
            return StepResult(outputs={"ids": ("x",)}, rows=1)

    plan = validate_plan({"steps": [
        {"id": "a", "operator": "graph_expand", "params": {"from_ids": ["e"], "relation": "SUPPLIES"}},
        {"id": "b", "operator": "bm25_search", "params": {"query": "q"}}]})
    out = Engine({"graph_expand": Meet("neo4j"), "bm25_search": Meet("elasticsearch")}, Breakers()).execute(
        plan, tenant_id="t", deadline=time.monotonic() + 5)
    assert [s.status for s in out.steps] == ["ok", "ok"]


def test_optional_steps_are_cancelled_first_when_time_is_short() -> None:
    clock = [100.0]
    engine = Engine({"graph_expand": Fake("neo4j", {"names": ("x",)}), "metric_query": Fake("postgres"),
                     "hybrid_search": Fake("hybrid")}, Breakers(), clock=lambda: clock[0], optional_floor=0.5)

    class Late(Fake):  # time jumps while the first step runs
        def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult:
            clock[0] += 8
            return StepResult(outputs={"names": ("x",)}, rows=1)

    engine._executors["graph_expand"] = Late("neo4j")
    plan = validate_plan({"steps": [
        {"id": "vendors", "operator": "graph_expand", "params": {"from_ids": ["e"], "relation": "SUPPLIES"}},
        {"id": "passages", "operator": "hybrid_search", "optional": True, "depends_on": ["vendors"],
         "params": {"query": "q"}}]})
    out = engine.execute(plan, tenant_id="t", deadline=110.0)
    assert {s.step_id: s.status for s in out.steps}["passages"] == "cancelled"
    assert [g.kind for g in out.gaps] == ["degraded"]


def test_breaker_opens_per_source_after_repeated_failures() -> None:
    es = Fake("elasticsearch", fail=True)
    engine = _engine(bm25_search=es, graph_expand=Fake("neo4j", {"ids": ("x",)}))
    plan = validate_plan({"steps": [{"id": "s", "operator": "bm25_search", "params": {"query": "q"}},
                                    {"id": "g", "operator": "graph_expand",
                                     "params": {"from_ids": ["e"], "relation": "SUPPLIES"}}]})
    for _ in range(3):
        out = engine.execute(plan, tenant_id="t", deadline=time.monotonic() + 5)
    assert len(es.calls) == 2  # the third request did not touch the failing source
    statuses = {s.step_id: s.status for s in out.steps}
    assert statuses == {"s": "skipped", "g": "ok"}
    assert "circuit open" in out.gaps[0].detail


def test_breaker_half_opens_after_the_reset_period() -> None:
    now = [0.0]
    breakers = Breakers(failures=1, reset_s=10, clock=lambda: now[0])
    breakers.record("es", ok=False)
    assert not breakers.allow("es") and breakers.state("es") == "open"
    now[0] = 11
    assert breakers.allow("es") and not breakers.allow("es")  # one trial only
    breakers.record("es", ok=True)
    assert breakers.state("es") == "closed" and breakers.allow("es")
