"""Contract of the query-side text and graph executors: Elasticsearch/Neo4j vs PostgreSQL.

One world (`contract_world.WORLD_SPECS`, three documents of one tenant, plus a draft that is
written but never activated, plus the same agreement under a second tenant) is loaded into the
relational store, BOTH text indexes and BOTH graph stores, published in the manifest and marked
serving in every store. Then, for the same parameters:

- `exact_lookup` returns the same chunk ids, in the same order, from both text indexes;
- `bm25_search` ranks the known best chunk first in both (scores differ: Elasticsearch's
  statistics span the whole shard, PostgreSQL's the tenant's serving chunks);
- `graph_expand` returns the same targets, paths and edge evidence from both graphs (direction,
  1-3 hops, the edge-unique cycle rule, half-open time validity with inclusive `valid_to`, a
  fact repeated by two documents, fan-out cap);
- nothing of the draft, and nothing of the other tenant, is ever returned by either.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

import pytest
from contract_world import AGREEMENT, STAGED_ONLY, WORLD_SPECS, doc_from_spec, eid

from manifold.ingest.load import handle
from manifold.query.plan import BM25SearchParams, ExactLookupParams, GraphExpandParams, Period
from manifold.shared.stores.pg_connections import TenantConnections

TEXT = ("elasticsearch", "postgres")
GRAPH = ("neo4j", "postgres")


@dataclass
class World:
    tenant: str
    other: str
    executors: dict[str, dict[str, Any]]
    """operator -> adapter name -> executor."""
    chunk_ids: dict[str, str]
    """chunk text -> chunk id (of the main tenant)."""


@pytest.fixture(scope="module")
def world(settings, pg_roles, es_client, neo4j_driver) -> Iterator[World]:
    from manifold.query.executors.bm25 import BM25Executor
    from manifold.query.executors.exact import ExactLookupExecutor
    from manifold.query.executors.graph import GraphExpandExecutor
    from manifold.query.executors.pg_graph import PgGraphExpandExecutor
    from manifold.query.executors.pg_lexical import PgBM25Executor, PgExactLookupExecutor
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.neo4j import Neo4jGraphStore
    from manifold.shared.stores.pg_graph import PostgresGraphStore
    from manifold.shared.stores.pg_relational import PostgresRelationalStore
    from manifold.shared.stores.pg_text import PostgresTextIndex

    run = uuid.uuid4().hex[:8]
    tenant, other = f"cq{run}-main", f"cq{run}-other"
    relational = PostgresRelationalStore(pg_roles["ingest"])
    es_text, neo_graph = ElasticsearchTextIndex(es_client), Neo4jGraphStore(neo4j_driver)
    pg_text, pg_graph = PostgresTextIndex(pg_roles["ingest"]), PostgresGraphStore(pg_roles["ingest"])
    manifest = PostgresVersionManifest(pg_roles["ingest"])
    marks = (es_text, neo_graph, pg_text, pg_graph)
    written: list[tuple[str, str, int]] = []
    chunk_ids: dict[str, str] = {}
    plan = [(tenant, s, True) for s in WORLD_SPECS] + [(tenant, STAGED_ONLY, False), (other, AGREEMENT, True)]
    for t, spec, publish in plan:
        doc = doc_from_spec(t, spec)
        if t == tenant:
            chunk_ids.update({c.text: c.chunk_id for c in doc.chunks})
        notice = handle(doc, relational, es_text, neo_graph)
        assert pg_text.write_version(doc) == notice.stores[1]
        assert pg_graph.write_version(doc) == notice.stores[2]
        written.append((t, spec.document_id, 1))
        if publish:
            manifest.stage(notice)
            manifest.mark_verified(t, spec.document_id, 1)
            assert manifest.activate(t, spec.document_id, 1).activated
            for store in marks:
                store.set_serving(t, spec.document_id, 1, True)
    query = TenantConnections(pg_roles["query"])
    executors = {
        "exact": {"elasticsearch": ExactLookupExecutor(es_client, query, settings.query),
                  "postgres": PgExactLookupExecutor(query, settings.query)},
        "bm25": {"elasticsearch": BM25Executor(es_client, query, settings.query),
                 "postgres": PgBM25Executor(query, settings.query)},
        "graph": {"neo4j": GraphExpandExecutor(neo4j_driver, query, settings),
                  "postgres": PgGraphExpandExecutor(query, settings)},
    }
    yield World(tenant=tenant, other=other, executors=executors, chunk_ids=chunk_ids)
    for t, document_id, version in written:
        for store in (relational, es_text, neo_graph, pg_text, pg_graph):
            store.delete_version(t, document_id, version)
        manifest.delete_document(t, document_id, version + 1)


def _hit_ids(result) -> list[str]:
    return [h.chunk_id for h in result.hits]


# ---------------------------------------------------------------------------- exact lookup


@pytest.mark.parametrize("identifiers", [["PRD-482"], ["prd 482"], ["INV-2026-0148"], ["PRD-482", "INV-2026-0148"],
                                         ["NOPE-1"]])
def test_exact_lookup_same_ids_in_both_text_indexes(world: World, identifiers: list[str]) -> None:
    params = ExactLookupParams(identifiers=identifiers, sources=("elasticsearch",))
    results = {k: ex.run(params, tenant_id=world.tenant, timeout_s=5.0) for k, ex in world.executors["exact"].items()}
    es, pg = results["elasticsearch"], results["postgres"]
    assert _hit_ids(es) == _hit_ids(pg)
    assert es.outputs["identifiers"] == pg.outputs["identifiers"]
    assert [h.identifiers for h in es.hits] == [h.identifiers for h in pg.hits]
    assert es.result["matched"] == pg.result["matched"]


def test_exact_lookup_finds_a_chunk_by_its_section_title(world: World) -> None:
    title_only = world.chunk_ids["The sensor covers a range of 0 to 10 bar."]
    for name, ex in world.executors["exact"].items():
        res = ex.run(ExactLookupParams(identifiers=["PRD-482"], sources=("elasticsearch",)),
                     tenant_id=world.tenant, timeout_s=5.0)
        assert title_only in _hit_ids(res), name


# ---------------------------------------------------------------------------- bm25


BEST = {
    "calibration certificate traceable national standard": (
        "Every differential pressure sensor must be delivered with a calibration certificate traceable to a "
        "national standard; calibration is repeated every twelve months."),
    "shielded cable delayed strike": "Shipments of shielded cable are delayed by two weeks because of a strike.",
    "returns within 30 days": "Returns of calibrated instruments are accepted within 30 days.",
}


@pytest.mark.parametrize("adapter", TEXT)
@pytest.mark.parametrize("query", sorted(BEST))
def test_bm25_ranks_the_known_best_chunk_first(world: World, adapter: str, query: str) -> None:
    res = world.executors["bm25"][adapter].run(BM25SearchParams(query=query, limit=5), tenant_id=world.tenant,
                                               timeout_s=5.0)
    assert res.hits and res.hits[0].chunk_id == world.chunk_ids[BEST[query]]
    assert [h.rank for h in res.hits] == list(range(1, len(res.hits) + 1))
    assert all(h.score and h.score > 0 for h in res.hits)
    assert res.result["dropped_inactive"] == 0


@pytest.mark.parametrize("adapter", TEXT)
def test_bm25_returns_the_same_matching_set(world: World, adapter: str) -> None:
    query = "differential pressure sensor calibration"
    ids = {name: set(_hit_ids(ex.run(BM25SearchParams(query=query, limit=50), tenant_id=world.tenant,
                                     timeout_s=5.0)))
           for name, ex in world.executors["bm25"].items()}
    assert ids["elasticsearch"] == ids["postgres"]


@pytest.mark.parametrize("adapter", TEXT)
def test_bm25_never_returns_drafts_or_other_tenants(world: World, adapter: str) -> None:
    ex = world.executors["bm25"][adapter]
    res = ex.run(BM25SearchParams(query="Epsilon draft wording pending", limit=10), tenant_id=world.tenant,
                 timeout_s=5.0)
    assert not any(h.document_id == STAGED_ONLY.document_id for h in res.hits)
    other = ex.run(BM25SearchParams(query="calibration certificate", limit=10), tenant_id=world.other, timeout_s=5.0)
    assert other.hits and all(e.tenant_id == world.other for e in other.evidence)
    assert not set(_hit_ids(other)) & set(world.chunk_ids.values())
    scoped = ex.run(BM25SearchParams(query="calibration", limit=10, document_ids=["notice-delay"]),
                    tenant_id=world.tenant, timeout_s=5.0)
    assert scoped.hits == ()


# ---------------------------------------------------------------------------- graph expand


def _graph_cases(world: World) -> list[GraphExpandParams]:
    acme, p482, gamma = eid(world.tenant, "acme"), eid(world.tenant, "p482"), eid(world.tenant, "gamma")
    return [
        GraphExpandParams(from_ids=[acme], relation="APPROVED_VENDOR"),
        GraphExpandParams(from_ids=[acme], relation="APPROVED_VENDOR",
                          valid_during=Period(start=date(2026, 3, 1), end=date(2026, 4, 1))),
        GraphExpandParams(from_ids=[acme], relation="APPROVED_VENDOR",  # valid_to is inclusive
                          valid_during=Period(start=date(2025, 6, 30), end=date(2025, 7, 1))),
        GraphExpandParams(from_ids=[acme], relation="APPROVED_VENDOR",
                          valid_during=Period(start=date(2025, 7, 1), end=date(2025, 8, 1))),
        GraphExpandParams(from_ids=[acme], relation=("APPROVED_VENDOR", "SUPPLIES"), max_hops=2),
        GraphExpandParams(from_ids=[acme], relation=("APPROVED_VENDOR", "SUPPLIES", "BELONGS_TO", "PART_OF"),
                          max_hops=3),
        GraphExpandParams(from_ids=[p482], relation="SUPPLIES", direction="in"),
        GraphExpandParams(from_ids=[p482], relation="PART_OF", max_hops=3),
        GraphExpandParams(from_ids=[p482, gamma], relation=("SUPPLIES", "PART_OF", "BELONGS_TO"), max_hops=2),
        GraphExpandParams(from_ids=[acme], relation=("APPROVED_VENDOR", "SUPPLIES"), max_hops=2, fanout_cap=2),
        GraphExpandParams(from_ids=[acme], relation="SUPPLIES"),
    ]


def _graph_view(res) -> dict[str, Any]:
    return {
        "outputs": res.outputs,
        "targets": res.result["targets"],
        "paths": sorted((p["target"], tuple(p["edges"]), tuple(n["entity_id"] for n in p["nodes"]))
                        for p in res.result["paths"]),
        "evidence": [(e.edge_id, e.document_id, e.version, e.chunk_id, e.claims) for e in res.evidence],
        "gaps": sorted((g.kind, g.detail) for g in res.gaps),
        "dropped": res.result["dropped_inactive"],
    }


@pytest.mark.parametrize("case", range(11))
def test_graph_expand_same_answer_in_both_graphs(world: World, case: int) -> None:
    params = _graph_cases(world)[case]
    views = {k: _graph_view(ex.run(params, tenant_id=world.tenant, timeout_s=10.0))
             for k, ex in world.executors["graph"].items()}
    assert views["neo4j"] == views["postgres"]
    assert bool(views["postgres"]["targets"]) == (case != 10)  # only acme -SUPPLIES-> finds nothing


@pytest.mark.parametrize("adapter", GRAPH)
def test_graph_expand_rules(world: World, adapter: str) -> None:
    ex = world.executors["graph"][adapter]
    t = world.tenant
    name = {eid(t, n): n for n in ("acme", "beta", "gamma", "delta", "epsilon", "p482", "p9", "sensors")}

    def targets(params: GraphExpandParams) -> list[str]:
        return [name[i] for i in ex.run(params, tenant_id=t, timeout_s=10.0).outputs.get("ids", ())]

    acme = [eid(t, "acme")]
    assert targets(GraphExpandParams(from_ids=acme, relation="APPROVED_VENDOR")) == ["beta", "delta", "gamma"]
    during = Period(start=date(2026, 3, 1), end=date(2026, 4, 1))
    assert targets(GraphExpandParams(from_ids=acme, relation="APPROVED_VENDOR", valid_during=during)) == [
        "beta", "delta"]
    # a fact repeated by the agreement and the invoice: one target, two edges of two documents
    res = ex.run(GraphExpandParams(from_ids=[eid(t, "p482")], relation="SUPPLIES", direction="in",
                                   valid_during=during), tenant_id=t, timeout_s=10.0)
    assert [name[i] for i in res.outputs["ids"]] == ["beta"]
    assert sorted(e.document_id for e in res.evidence) == ["agreement-acme", "invoice-inv-2026-0148"]
    # the cycle p482 -> p9 -> p482 never reuses an edge and never returns the start
    res = ex.run(GraphExpandParams(from_ids=[eid(t, "p482")], relation="PART_OF", max_hops=3), tenant_id=t,
                 timeout_s=10.0)
    assert [name[i] for i in res.outputs["ids"]] == ["p9"] and len(res.result["paths"]) == 1
    capped = ex.run(GraphExpandParams(from_ids=acme, relation=("APPROVED_VENDOR", "SUPPLIES"), max_hops=2,
                                      fanout_cap=2), tenant_id=t, timeout_s=10.0)
    assert len(capped.outputs["ids"]) == 2 and any(g.kind == "capped" for g in capped.gaps)
    with pytest.raises(ValueError):
        ex.run(GraphExpandParams.model_construct(from_ids=acme, relation="MENTIONED_IN", direction="out",
                                                 max_hops=1, valid_during=None, fanout_cap=10),
               tenant_id=t, timeout_s=10.0)
    with pytest.raises(ValueError):
        ex.run(GraphExpandParams.model_construct(from_ids=acme, relation="SUPPLIES", direction="out",
                                                 max_hops=4, valid_during=None, fanout_cap=10),
               tenant_id=t, timeout_s=10.0)


@pytest.mark.parametrize("adapter", GRAPH)
def test_graph_expand_never_crosses_tenants_or_reads_drafts(world: World, adapter: str) -> None:
    ex = world.executors["graph"][adapter]
    mine = ex.run(GraphExpandParams(from_ids=[eid(world.tenant, "acme")], relation="APPROVED_VENDOR"),
                  tenant_id=world.tenant, timeout_s=10.0)
    assert eid(world.tenant, "epsilon") not in mine.outputs["ids"]  # the draft is not active
    crossed = ex.run(GraphExpandParams(from_ids=[eid(world.tenant, "acme")], relation="APPROVED_VENDOR"),
                     tenant_id=world.other, timeout_s=10.0)
    assert crossed.outputs.get("ids", ()) == () and crossed.evidence == ()
    theirs = ex.run(GraphExpandParams(from_ids=[eid(world.other, "acme")], relation="APPROVED_VENDOR"),
                    tenant_id=world.other, timeout_s=10.0)
    assert len(theirs.outputs["ids"]) == 3 and all(e.tenant_id == world.other for e in theirs.evidence)


# ---------------------------------------------------------------------------- catalog


def test_catalog_lists_the_same_entries_from_both_graphs(world: World, settings, pg_roles, neo4j_driver) -> None:
    from manifold.query.catalog import CatalogReader
    from manifold.query.pg_catalog import PostgresCatalogReader

    query = TenantConnections(pg_roles["query"])
    neo = CatalogReader(neo4j_driver, query, settings, ttl_s=0).load(world.tenant)
    pg = PostgresCatalogReader(query, settings, ttl_s=0).load(world.tenant)
    assert neo == pg
    assert {e.entity_id for e in pg} >= {eid(world.tenant, n) for n in ("acme", "beta", "p482")}
    assert eid(world.tenant, "epsilon") not in {e.entity_id for e in pg}  # named only by the draft
