"""The plan IR validator rejects everything outside the closed vocabulary before execution."""

from __future__ import annotations

import pytest

from manifold.query.plan import HOP_CAP, PlanError, dependencies, validate_plan

RESOLVE = {"id": "company", "operator": "resolve_entity", "params": {"kind": "company", "text": "Northstar"}}
VENDORS = {"id": "vendors", "operator": "graph_expand",
           "params": {"from_ids": "$company.ids", "relation": "APPROVED_VENDOR", "max_hops": 1,
                      "valid_during": {"start": "2026-01-01", "end": "2026-04-01"}}}
SPEND = {"id": "spend", "operator": "metric_query",
         "params": {"metric": "total_spend", "where": {"supplier_names": "$vendors.names",
                                                        "period": {"start": "2026-01-01", "end": "2026-04-01"}}}}


def _reasons(raw: dict) -> str:
    with pytest.raises(PlanError) as err:
        validate_plan(raw)
    return " | ".join(err.value.reasons)


def test_a_dag_with_references_is_accepted_and_references_are_dependencies() -> None:
    plan = validate_plan({"steps": [RESOLVE, VENDORS, SPEND]})
    assert [s.operator for s in plan.steps] == ["resolve_entity", "graph_expand", "metric_query"]
    assert dependencies(plan) == {"company": set(), "vendors": {"company"}, "spend": {"vendors"}}


def test_unknown_operator_is_rejected() -> None:
    assert "unknown operator" in _reasons({"steps": [{"id": "x", "operator": "raw_sql", "params": {"sql": "1"}}]})


def test_unknown_field_and_source_are_rejected() -> None:
    assert "unknown field" in _reasons({"steps": [{"id": "x", "operator": "bm25_search",
                                                    "params": {"query": "a", "index": "*"}}]})
    assert "sources" in _reasons({"steps": [{"id": "x", "operator": "exact_lookup",
                                              "params": {"identifiers": ["PRD-1"], "sources": ["mysql"]}}]})


@pytest.mark.parametrize("key", ["tenant", "tenant_id", "TENANT_ID", "org_id", "principal"])
def test_a_caller_supplied_tenant_anywhere_is_rejected(key: str) -> None:
    step = {"id": "x", "operator": "bm25_search", "params": {"query": "a", key: "other"}}
    assert "tenant comes from the authenticated token" in _reasons({"steps": [step]})
    assert "tenant comes from the authenticated token" in _reasons({"steps": [RESOLVE], key: "other"})


def test_hops_limits_and_fanout_are_capped() -> None:
    hops = {**VENDORS, "params": {**VENDORS["params"], "from_ids": ["ent_1"], "max_hops": HOP_CAP + 1}}
    assert "over the limit" in _reasons({"steps": [hops]})
    assert "less than or equal" in _reasons({"steps": [{"id": "x", "operator": "bm25_search",
                                                         "params": {"query": "a", "limit": 10_000}}]})
    fan = {**VENDORS, "params": {**VENDORS["params"], "from_ids": ["ent_1"], "fanout_cap": 100_000}}
    assert "fanout_cap" in _reasons({"steps": [fan]})


def test_unbounded_scans_are_rejected() -> None:
    assert "needs a period" in _reasons({"steps": [{"id": "m", "operator": "metric_query",
                                                     "params": {"metric": "total_spend"}}]})
    assert "at least 1 character" in _reasons({"steps": [{"id": "s", "operator": "vector_search",
                                                           "params": {"query": ""}}]})


def test_joins_on_free_text_or_unknown_outputs_are_rejected() -> None:
    search = {"id": "notice", "operator": "hybrid_search", "params": {"query": "delay"}}
    free = {"id": "m", "operator": "metric_query",
            "params": {"metric": "revenue_at_risk", "where": {"supplier_names": "$notice.text"}}}
    assert "never free text" in _reasons({"steps": [search, free]})
    wrong = {"id": "m", "operator": "metric_query",
             "params": {"metric": "revenue_at_risk", "where": {"supplier_names": "$notice.names"}}}
    assert "has no output field 'names'" in _reasons({"steps": [search, wrong]})


def test_references_and_dependencies_must_point_backwards() -> None:
    assert "not an earlier step" in _reasons({"steps": [VENDORS, RESOLVE]})
    assert "not an earlier step" in _reasons({"steps": [{**RESOLVE, "depends_on": ["later"]}]})
    assert "used twice" in _reasons({"steps": [RESOLVE, RESOLVE]})


def test_relation_types_are_a_closed_set() -> None:
    bad = {**VENDORS, "params": {**VENDORS["params"], "from_ids": ["e"], "relation": "KNOWS]->() DETACH DELETE n //"}}
    assert "relation" in _reasons({"steps": [bad]})


def test_a_plan_must_be_an_object_with_bounded_steps() -> None:
    assert "JSON object" in _reasons(["not", "a", "plan"])  # type: ignore[arg-type]
    assert "at most" in _reasons({"steps": [dict(RESOLVE, id=f"s{i}") for i in range(20)]})
