"""Catalog, resolve, graph and metric executors over the sample world ingested by the real pipeline.

Asserts the hand-checked answers of `manifold.ingest.sample_world.FACTS`, tenant isolation
(southwind sees no northstar data), and that injection strings are inert values."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

import pytest

from manifold.ingest import sample_world
from manifold.query.catalog import CatalogReader
from manifold.query.executors.graph import GraphExpandExecutor
from manifold.query.executors.metric import MetricExecutor
from manifold.query.executors.resolve import ResolveEntityExecutor
from manifold.query.plan import GraphExpandParams, MetricQueryParams, Period, ResolveEntityParams
from manifold.query.types import CatalogEntry
from manifold.shared.stores.pg_connections import TenantConnections

Q1 = Period(start=date(2026, 1, 1), end=date(2026, 4, 1))
T = 5.0
MONITORING = ["PRD-482", "PRD-483", "PRD-484"]


@dataclass(frozen=True)
class Executors:
    catalog: CatalogReader
    resolve: ResolveEntityExecutor
    graph: GraphExpandExecutor
    metric: MetricExecutor


@pytest.fixture(scope="module")
def ex(world, neo4j_driver) -> Iterator[Executors]:
    db = TenantConnections(world.settings.postgres.query_conninfo())
    catalog = CatalogReader(neo4j_driver, db, world.settings, ttl_s=0)
    yield Executors(catalog, ResolveEntityExecutor(catalog), GraphExpandExecutor(neo4j_driver, db, world.settings),
                    MetricExecutor(db, world.settings))


def _entry(ex: Executors, tenant: str, kind: str, name: str) -> CatalogEntry:
    matches = [e for e in ex.catalog.load(tenant) if e.kind == kind and e.name == name]
    assert len(matches) == 1, (kind, name, matches)
    return matches[0]


def _spend(ex: Executors, tenant: str, **where) -> object:
    return ex.metric.run(MetricQueryParams.model_validate({"metric": "total_spend", "where": where}),
                         tenant_id=tenant, timeout_s=T)


def test_catalog_lists_active_tenant_entities_only(world, ex: Executors) -> None:
    north = ex.catalog.load(world.northstar)
    names = {(e.kind, e.name) for e in north}
    assert ("supplier", "Supplier Beta") in names
    assert ("company", "Northstar Manufacturing") in names
    assert ("product_group", "Monitoring Products") in names
    assert not any(e.name == "Zeta Components" for e in north)
    prd482 = _entry(ex, world.northstar, "product", "PRD-482")
    assert "differential pressure sensor" in prd482.aliases
    south = {(e.kind, e.name) for e in ex.catalog.load(world.southwind)}
    assert ("supplier", "Zeta Components") in south
    assert ("supplier", "Supplier Beta") not in south


def test_resolve_fuzzy_name(world, ex: Executors) -> None:
    res = ex.resolve.run(ResolveEntityParams(kind="supplier", text="Supplier Betta"),
                         tenant_id=world.northstar, timeout_s=T)
    assert res.result["status"] == "resolved"
    assert res.outputs["names"] == ("Supplier Beta",)
    assert res.outputs["ids"] == (_entry(ex, world.northstar, "supplier", "Supplier Beta").entity_id,)
    by_description = ex.resolve.run(ResolveEntityParams(kind="product", text="differential pressure sensor"),
                                    tenant_id=world.northstar, timeout_s=T)
    assert by_description.outputs["keys"] == ("PRD-482",)


def test_resolve_ambiguous_and_cross_tenant(world, ex: Executors) -> None:
    amb = ex.resolve.run(ResolveEntityParams(kind="product", text="PRD-48"), tenant_id=world.northstar, timeout_s=T)
    assert amb.result["status"] == "ambiguous" and len(amb.result["candidates"]) >= 2
    assert amb.outputs.get("ids", ()) == ()
    other = ex.resolve.run(ResolveEntityParams(kind="supplier", text="Supplier Beta"),
                           tenant_id=world.southwind, timeout_s=T)
    assert other.result["status"] == "unresolved" and not other.outputs.get("ids")


def test_graph_approved_vendors_then_monitoring_products(world, ex: Executors) -> None:
    company = _entry(ex, world.northstar, "company", "Northstar Manufacturing")
    vendors = ex.graph.run(GraphExpandParams(from_ids=[company.entity_id], relation="APPROVED_VENDOR",
                                             valid_during=Q1), tenant_id=world.northstar, timeout_s=T)
    assert set(vendors.outputs["names"]) == {"Supplier Beta", "Supplier Gamma"}
    assert vendors.result["dropped_inactive"] == 0
    for ev in vendors.evidence:
        assert ev.kind == "edge" and ev.store == "neo4j" and ev.document_id and ev.version
        assert ev.claims["type"] == "APPROVED_VENDOR"
    all_time = ex.graph.run(GraphExpandParams(from_ids=[company.entity_id], relation="APPROVED_VENDOR"),
                            tenant_id=world.northstar, timeout_s=T)
    assert "Acme Sensors Ltd" in all_time.outputs["names"]

    supplied = ex.graph.run(GraphExpandParams(from_ids=list(vendors.outputs["ids"]), relation="SUPPLIES",
                                              valid_during=Q1), tenant_id=world.northstar, timeout_s=T)
    assert len(supplied.outputs["ids"]) == len(set(supplied.outputs["ids"]))
    prd482 = _entry(ex, world.northstar, "product", "PRD-482").entity_id
    prd482_docs = {ev.document_id for ev in supplied.evidence if ev.claims["target"] == prd482}
    assert len(prd482_docs) >= 2, "one target, every document's edge kept as provenance"
    group = _entry(ex, world.northstar, "product_group", "Monitoring Products")
    members = ex.graph.run(GraphExpandParams(from_ids=[group.entity_id], relation="BELONGS_TO", direction="in"),
                           tenant_id=world.northstar, timeout_s=T)
    assert set(supplied.outputs["keys"]) & set(members.outputs["keys"]) == set(MONITORING)


def test_graph_is_tenant_scoped_and_capped(world, ex: Executors) -> None:
    company = _entry(ex, world.northstar, "company", "Northstar Manufacturing")
    foreign = ex.graph.run(GraphExpandParams(from_ids=[company.entity_id], relation="APPROVED_VENDOR"),
                           tenant_id=world.southwind, timeout_s=T)
    assert foreign.outputs["ids"] == () and not foreign.evidence
    capped = ex.graph.run(GraphExpandParams(from_ids=[company.entity_id], relation=("APPROVED_VENDOR", "SUPPLIES"),
                                            max_hops=2, fanout_cap=2), tenant_id=world.northstar, timeout_s=T)
    assert len(capped.outputs["ids"]) == 2
    assert any(g.kind == "capped" for g in capped.gaps)


def test_graph_rejects_injected_relation(world, ex: Executors) -> None:
    bad = GraphExpandParams.model_construct(from_ids=["ent_x"], relation="SUPPLIES]->(n) DETACH DELETE n //",
                                            direction="out", max_hops=1, valid_during=None, fanout_cap=10)
    with pytest.raises(ValueError):
        ex.graph.run(bad, tenant_id=world.northstar, timeout_s=T)
    hidden = GraphExpandParams.model_construct(from_ids=["ent_x"], relation="MENTIONED_IN", direction="out",
                                               max_hops=1, valid_during=None, fanout_cap=10)
    with pytest.raises(ValueError):
        ex.graph.run(hidden, tenant_id=world.northstar, timeout_s=T)


def test_total_spend_monitoring_products_q1(world, ex: Executors) -> None:
    fact = sample_world.FACTS[0].expected
    res = _spend(ex, world.northstar, supplier_names=["Supplier Beta", "Supplier Gamma"], product_codes=MONITORING,
                 period={"start": "2026-01-01", "end": "2026-04-01"}, currency="EUR")
    assert res.result["totals"] == {"EUR": "1809.50"} == {fact["currency"]: fact["total"]}
    assert res.result["matched_line_count"] == 4 == fact["matched_line_count"]
    assert res.result["duplicates_skipped"] >= 1
    assert res.result["excluded_other_currency_lines"] == 0
    assert res.result["snapshot_at"] and "credit" in res.result["definition"]
    records = [ev for ev in res.evidence if ev.kind == "record"]
    assert len(records) == 4
    assert {ev.claims["number"] for ev in records} == {"INV-2026-0148", "INV-2026-0211", "CN-2026-0007"}
    assert not any(ev.claims["status"] == "draft" for ev in records)
    assert all(ev.document_id in world.documents[world.northstar] for ev in records)
    assert [ev.kind for ev in res.evidence].count("metric") == 1
    assert not res.gaps


def test_total_spend_reports_currencies_separately(world, ex: Executors) -> None:
    res = _spend(ex, world.northstar, company_names=["northstar manufacturing"],
                 period={"start": "2026-01-01", "end": "2026-04-01"})
    assert set(res.result["totals"]) == {"EUR", "USD"}
    assert res.result["totals"]["USD"] == "240.00"
    assert any("FX" in g.detail for g in res.gaps)
    eur = _spend(ex, world.northstar, company_names=["northstar manufacturing"],
                 period={"start": "2026-01-01", "end": "2026-04-01"}, currency="EUR")
    assert eur.result["excluded_other_currency_lines"] == 1
    assert any(g.kind == "missing_data" for g in eur.gaps)


def test_revenue_at_risk_beta(world, ex: Executors) -> None:
    fact = sample_world.FACTS[1].expected
    res = ex.metric.run(MetricQueryParams.model_validate(
        {"metric": "revenue_at_risk", "where": {"supplier_names": ["Supplier Beta"]}}),
        tenant_id=world.northstar, timeout_s=T)
    assert res.result["totals"] == {"EUR": "700.00"} and fact["total"] == "700.00"
    assert res.result["orders"] == ["PO-7001", "PO-7003"] == fact["orders"]
    assert res.result["matched_line_count"] == 2


def test_unit_price_on(world, ex: Executors) -> None:
    res = ex.metric.run(MetricQueryParams.model_validate(
        {"metric": "unit_price_on", "where": {"product_codes": ["PRD-482"], "on": "2026-03-01"}}),
        tenant_id=world.northstar, timeout_s=T)
    price = res.result["prices"]["PRD-482"]
    assert price["invoice_unit_price"] == "120.50" and price["invoice"] == "INV-2026-0148"
    assert price["issued_on"] == "2026-02-10" and price["catalog_unit_price"] == "120.50"


def test_other_tenant_sees_no_northstar_data(world, ex: Executors) -> None:
    res = _spend(ex, world.southwind, supplier_names=["Supplier Beta", "Supplier Gamma"], product_codes=MONITORING,
                 period={"start": "2026-01-01", "end": "2026-04-01"}, currency="EUR")
    assert res.result["matched_line_count"] == 0 and res.result["no_matching_data"] is True
    assert res.result["totals"] == {}
    assert any(g.kind == "missing_data" for g in res.gaps)
    risk = ex.metric.run(MetricQueryParams.model_validate(
        {"metric": "revenue_at_risk", "where": {"supplier_names": ["Supplier Beta"]}}),
        tenant_id=world.southwind, timeout_s=T)
    assert risk.result["matched_line_count"] == 0 and risk.result["orders"] == []
    price = ex.metric.run(MetricQueryParams.model_validate(
        {"metric": "unit_price_on", "where": {"product_codes": ["PRD-482"], "on": "2026-03-01"}}),
        tenant_id=world.southwind, timeout_s=T)
    assert price.result["prices"] == {} and price.result["matched_line_count"] == 0
    own = _spend(ex, world.southwind, period={"start": "2026-01-01", "end": "2026-04-01"})
    assert own.result["totals"] == {"EUR": "1470.00"}
    assert all(ev.tenant_id == world.southwind for ev in own.evidence)


def test_sql_injection_is_an_inert_value(world, ex: Executors) -> None:
    res = _spend(ex, world.northstar, supplier_names=["Beta' OR '1'='1"],
                 period={"start": "2026-01-01", "end": "2026-04-01"})
    assert res.result["matched_line_count"] == 0 and res.result["no_matching_data"] is True
    res = _spend(ex, world.northstar, product_codes=["PRD-482'); DROP TABLE records; --"],
                 period={"start": "2026-01-01", "end": "2026-04-01"})
    assert res.result["matched_line_count"] == 0
    still = _spend(ex, world.northstar, supplier_names=["Supplier Beta"], product_codes=["PRD-482"],
                   period={"start": "2026-01-01", "end": "2026-04-01"}, currency="EUR")
    assert still.result["totals"] == {"EUR": "964.00"}  # 1205.00 - 241.00 (draft excluded, replica once)
