"""Text executors (exact, BM25, vector, hybrid) over the sample world, read through the query role.

Asserts exact document ids from `manifold.ingest.sample_world`, tenant isolation (southwind never
sees northstar's chunks), the active-version final check, and degradation when a store is down.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from elasticsearch import Elasticsearch

from manifold.query.evidence import final_check
from manifold.query.executors.bm25 import BM25Executor
from manifold.query.executors.exact import ExactLookupExecutor
from manifold.query.executors.hybrid import HybridExecutor
from manifold.query.executors.vector import VectorExecutor, recall_at_k
from manifold.query.plan import BM25SearchParams, ExactLookupParams, HybridSearchParams, VectorSearchParams
from manifold.query.types import TextHit
from manifold.shared.embedding import SentenceTransformerEmbedder
from manifold.shared.errors import Transient
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import check_hits_active

CONTRACT = "contracts/ctr-2026-0001.md"
MANUAL = "manuals/prd-482-manual.md"
NOTICE = "notices/beta-delay-notice.txt"
RETURNS = "policies/returns-policy.html"
T = 5.0


@dataclass
class Execs:
    exact: ExactLookupExecutor
    bm25: BM25Executor
    vector: VectorExecutor
    hybrid: HybridExecutor
    db: TenantConnections
    embedder: SentenceTransformerEmbedder


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    e = SentenceTransformerEmbedder()
    e.warm_up()
    return e


@pytest.fixture(scope="module")
def ex(world, embedder) -> Iterator[Execs]:
    s = world.settings
    es = Elasticsearch(s.elasticsearch.url, request_timeout=30)
    db = TenantConnections(s.postgres.query_conninfo(), vectors=True)
    exact = ExactLookupExecutor(es, db, s.query)
    bm25 = BM25Executor(es, db, s.query)
    vector = VectorExecutor(db, embedder, s.query)
    hybrid = HybridExecutor(exact, bm25, vector, db, s.query)
    yield Execs(exact, bm25, vector, hybrid, db, embedder)
    hybrid.close()
    es.close()


def _docs(hits: tuple[TextHit, ...]) -> list[str]:
    return [h.document_id for h in hits]


@pytest.mark.parametrize("spelling", ["PRD-482", "prd 482", "Prd_482"])
def test_exact_lookup_returns_identity_hits_for_every_spelling(world, ex: Execs, spelling: str) -> None:
    r = ex.exact.run(ExactLookupParams(identifiers=[spelling]), tenant_id=world.northstar, timeout_s=T)
    docs = set(_docs(r.hits))
    assert {CONTRACT, MANUAL, NOTICE} <= docs
    assert all(h.identity and "PRD-482" in h.identifiers and h.source == "exact" for h in r.hits)
    assert [h.rank for h in r.hits] == list(range(1, len(r.hits) + 1))
    assert r.outputs["identifiers"] == ("PRD-482",)
    assert CONTRACT in r.outputs["document_ids"]
    assert r.result["dropped_inactive"] == 0
    assert all(e.tenant_id == world.northstar and e.version == 1 for e in r.evidence)
    records = [e for e in r.evidence if e.kind == "record"]
    assert [(e.claims["number"], e.claims["record_type"], e.document_id) for e in records] == [
        ("PRD-482", "catalog_item", CONTRACT)]
    assert r.store_ms > 0


def test_exact_lookup_records_carry_their_claims(world, ex: Execs) -> None:
    r = ex.exact.run(ExactLookupParams(identifiers=["inv 2026/0148"], sources=("postgres",)),
                     tenant_id=world.northstar, timeout_s=T)
    records = sorted((e for e in r.evidence if e.kind == "record"), key=lambda e: e.document_id)
    assert [e.document_id for e in records] == ["invoices/inv-2026-0148.csv", "invoices/replica/inv-2026-0148.csv"]
    assert records[0].claims == {"number": "INV-2026-0148", "record_type": "invoice", "counterparty": "Supplier Beta",
                                 "issued_on": "2026-02-10", "currency": "EUR", "status": "posted"}
    assert all(e.store == "postgres" for e in r.evidence)


def test_exact_lookup_postgres_only_also_finds_headed_sections(world, ex: Execs) -> None:
    r = ex.exact.run(ExactLookupParams(identifiers=["PRD-482"], sources=("postgres",)),
                     tenant_id=world.northstar, timeout_s=T)
    assert {CONTRACT, MANUAL, NOTICE} <= set(_docs(r.hits))


def test_exact_lookup_reads_chunks_from_postgres_only_when_elasticsearch_fails(world, ex: Execs) -> None:
    """Both stores hold the same active chunks: with Elasticsearch answering, chunk evidence is its
    own and PostgreSQL gives the records; with Elasticsearch down, PostgreSQL gives the chunks too
    (the same documents) and a `degraded` gap says why."""
    both = ex.exact.run(ExactLookupParams(identifiers=["PRD-482"]), tenant_id=world.northstar, timeout_s=T)
    chunk_stores = {e.store for e in both.evidence if e.kind != "record"}
    assert chunk_stores == {"elasticsearch"}
    assert {e.store for e in both.evidence if e.kind == "record"} == {"postgres"}
    dead = Elasticsearch("http://127.0.0.1:9", request_timeout=1, max_retries=0)
    fallback = ExactLookupExecutor(dead, ex.db, world.settings.query).run(
        ExactLookupParams(identifiers=["PRD-482"]), tenant_id=world.northstar, timeout_s=T)
    assert {e.store for e in fallback.evidence} == {"postgres"}
    assert set(_docs(fallback.hits)) == set(_docs(both.hits))
    assert [g.kind for g in fallback.gaps] == ["degraded"]


def test_bm25_ranks_the_calibration_clause_first(world, ex: Execs) -> None:
    r = ex.bm25.run(BM25SearchParams(query="differential pressure calibration"), tenant_id=world.northstar,
                    timeout_s=T)
    first = r.hits[0]
    assert (first.document_id, first.section_title) == (CONTRACT, "Terms")
    assert "differential pressure calibration" in first.text
    assert first.source == "bm25" and first.score and first.score > 0
    assert MANUAL in _docs(r.hits)  # found through its section title
    assert [h.score for h in r.hits] == sorted((h.score for h in r.hits), reverse=True)
    assert r.evidence[0].store == "elasticsearch" and r.evidence[0].rank == 1


def test_bm25_document_scope(world, ex: Execs) -> None:
    r = ex.bm25.run(BM25SearchParams(query="differential pressure calibration", document_ids=[MANUAL]),
                    tenant_id=world.northstar, timeout_s=T)
    assert set(_docs(r.hits)) == {MANUAL}


def test_vector_ranks_the_returns_policy_first(world, ex: Execs) -> None:
    r = ex.vector.run(VectorSearchParams(query="can I send back broken goods?"), tenant_id=world.northstar,
                      timeout_s=T)
    first = r.hits[0]
    assert first.document_id == RETURNS
    assert "sent back within 30 days" in first.text
    assert r.result["vector_mode"] == "exact"  # the tenant holds far fewer chunks than exact_search_below
    assert 0.0 < first.score <= 1.0
    assert [h.score for h in r.hits] == sorted((h.score for h in r.hits), reverse=True)
    assert all(e.store == "postgres" for e in r.evidence)


def test_vector_hnsw_mode_and_recall_against_exact(world, ex: Execs) -> None:
    vec = ex.embedder.encode(["can I send back broken goods?"])[0]
    approx = ex.vector.search_vector(vec, tenant_id=world.northstar, limit=10, timeout_s=T, mode="hnsw")
    exact = ex.vector.exact_neighbours(vec, tenant_id=world.northstar, limit=10)
    assert approx.mode == "hnsw" and exact.mode == "exact"
    assert approx.hits[0].document_id == RETURNS
    assert recall_at_k([h.chunk_id for h in approx.hits], [h.chunk_id for h in exact.hits], 10) >= 0.9


def test_a_large_set_is_counted_once_then_remembered(world, ex: Execs) -> None:
    """With the threshold below the tenant's size the first search counts (and says so), the next
    ones skip the count and return the same neighbours; a document filter is its own set."""
    settings = world.settings.query.model_copy(update={"exact_search_below": 3})
    vector = VectorExecutor(ex.db, ex.embedder, settings)
    vec = ex.embedder.encode(["can I send back broken goods?"])[0]
    first = vector.search_vector(vec, tenant_id=world.northstar, limit=5, timeout_s=T)
    again = vector.search_vector(vec, tenant_id=world.northstar, limit=5, timeout_s=T)
    assert (first.mode, first.filtered_count) == ("hnsw", 3)
    assert (again.mode, again.filtered_count) == ("hnsw", None)
    assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in first.hits]
    scoped = vector.search_vector(vec, tenant_id=world.northstar, limit=5, timeout_s=T, document_ids=[RETURNS])
    assert scoped.filtered_count is not None and {h.document_id for h in scoped.hits} == {RETURNS}
    never = VectorExecutor(ex.db, ex.embedder, settings.model_copy(update={"vector_large_ttl_s": 0}))
    for _ in range(2):
        assert never.search_vector(vec, tenant_id=world.northstar, limit=5, timeout_s=T).filtered_count == 3


def test_a_remembered_large_set_that_shrank_is_searched_exactly(world, ex: Execs) -> None:
    """"Large" remembered for a filter whose set is in truth tiny: the HNSW search returns fewer
    neighbours than asked, so the search is redone exactly and finds every chunk there is."""
    settings = world.settings.query.model_copy(update={"exact_search_below": 1})
    vector = VectorExecutor(ex.db, ex.embedder, settings)
    vec = ex.embedder.encode(["can I send back broken goods?"])[0]
    vector.search_vector(vec, tenant_id=world.northstar, limit=50, timeout_s=T, document_ids=[RETURNS])
    remembered = vector.search_vector(vec, tenant_id=world.northstar, limit=50, timeout_s=T,
                                      document_ids=[RETURNS])
    exact = vector.search_vector(vec, tenant_id=world.northstar, limit=50, timeout_s=T, document_ids=[RETURNS],
                                 mode="exact")
    assert remembered.filtered_count is None and remembered.mode == "exact"
    assert [h.chunk_id for h in remembered.hits] == [h.chunk_id for h in exact.hits]


def test_hybrid_combines_exact_bm25_and_vector(world, ex: Execs) -> None:
    r = ex.hybrid.run(HybridSearchParams(query="calibration requirements for PRD-482", identifiers=["PRD-482"],
                                         query_class="exact"), tenant_id=world.northstar, timeout_s=T)
    assert set(r.result["branches"]) == {"exact", "bm25", "vector"}
    assert not r.gaps
    first = r.hits[0]
    assert (first.document_id, first.section_title) == (CONTRACT, "Terms")
    assert r.evidence[0].claims["ranks"].keys() >= {"exact", "bm25"}
    assert set(r.evidence[0].routes) >= {"exact", "bm25"}
    identity = [h.identity for h in r.hits]
    assert identity == sorted(identity, reverse=True)  # identity hits first
    per_doc: dict[str, int] = {}
    for h in r.hits:
        per_doc[h.document_id] = per_doc.get(h.document_id, 0) + 1
    assert max(per_doc.values()) <= 2
    assert [h.rank for h in r.hits] == list(range(1, len(r.hits) + 1))
    # the replicated invoice has the same content: it appears once, the copy remembered
    invoice_ids = {"invoices/inv-2026-0148.csv", "invoices/replica/inv-2026-0148.csv"}
    assert len(invoice_ids & set(_docs(r.hits))) <= 1
    assert any(e.kind == "record" for e in r.evidence)


def test_hybrid_semantic_query(world, ex: Execs) -> None:
    r = ex.hybrid.run(HybridSearchParams(query="can I send back broken goods?", query_class="semantic", limit=5),
                      tenant_id=world.northstar, timeout_s=T)
    assert r.hits[0].document_id == RETURNS
    assert len(r.hits) <= 5
    assert r.result["vector_mode"] == "exact"


def test_hybrid_degrades_when_a_branch_store_is_down(world, ex: Execs) -> None:
    dead = Elasticsearch("http://127.0.0.1:9", request_timeout=1, max_retries=0)
    bm25 = BM25Executor(dead, ex.db, world.settings.query)
    with pytest.raises(Transient):
        bm25.run(BM25SearchParams(query="returns"), tenant_id=world.northstar, timeout_s=1.0)
    hybrid = HybridExecutor(ex.exact, bm25, ex.vector, ex.db, world.settings.query)
    try:
        r = hybrid.run(HybridSearchParams(query="can I send back broken goods?"), tenant_id=world.northstar,
                       timeout_s=2.0)
    finally:
        hybrid.close()
    assert r.hits[0].document_id == RETURNS
    assert r.result["failed_branches"] == ["bm25"]
    assert [(g.kind, g.step) for g in r.gaps] == [("degraded", None)]
    assert r.gaps[0].detail.startswith("bm25 branch failed: Transient")


def test_postgres_down_is_transient(world, ex: Execs) -> None:
    s = world.settings.postgres
    dead = TenantConnections(s.model_copy(update={"port": 9}).query_conninfo(), connect_timeout=2, vectors=True)
    with pytest.raises(Transient):
        VectorExecutor(dead, ex.embedder, world.settings.query).run(
            VectorSearchParams(query="returns"), tenant_id=world.northstar, timeout_s=1.0)


def test_southwind_never_sees_northstar(world, ex: Execs) -> None:
    tenant = world.southwind
    own = set(world.documents[tenant])
    results = [
        ex.exact.run(ExactLookupParams(identifiers=["PRD-482"]), tenant_id=tenant, timeout_s=T),
        ex.bm25.run(BM25SearchParams(query="differential pressure calibration"), tenant_id=tenant, timeout_s=T),
        ex.vector.run(VectorSearchParams(query="can I send back broken goods?"), tenant_id=tenant, timeout_s=T),
        ex.hybrid.run(HybridSearchParams(query="calibration requirements for PRD-482", identifiers=["PRD-482"]),
                      tenant_id=tenant, timeout_s=T),
    ]
    for r in results:
        assert set(_docs(r.hits)) <= own
        assert all(e.tenant_id == tenant and e.document_id in own for e in r.evidence)
        assert CONTRACT not in r.outputs.get("document_ids", ())
    # the only southwind text naming PRD-482 is its own rumour note
    assert set(_docs(results[0].hits)) == {"notes/northstar-rumour.txt"}
    assert not [e for e in results[0].evidence if e.kind == "record"]
    # and a northstar document id used as a scope finds nothing in southwind
    scoped = ex.bm25.run(BM25SearchParams(query="calibration", document_ids=[CONTRACT]), tenant_id=tenant, timeout_s=T)
    assert scoped.hits == ()


def test_final_check_drops_hits_of_inactive_versions(world, ex: Execs) -> None:
    r = ex.bm25.run(BM25SearchParams(query="differential pressure calibration"), tenant_id=world.northstar,
                    timeout_s=T)
    live = r.hits[0]
    stale = live.model_copy(update={"version": live.version + 7, "chunk_id": "stale"})
    foreign = live.model_copy(update={"document_id": "not/active.md", "chunk_id": "foreign"})
    with ex.db.transaction(world.northstar) as conn:
        kept, dropped = final_check(conn, world.northstar, [live, stale, foreign])
    assert [h.chunk_id for h in kept] == [live.chunk_id] and dropped == 2
    # the same hits checked in the southwind tenant: nothing of northstar is active there
    with ex.db.transaction(world.southwind) as conn:
        kept, dropped = final_check(conn, world.southwind, [live])
    assert kept == [] and dropped == 1
    assert check_hits_active([live, stale], {live.document_id: live.version}) == [live]
