"""`bm25_search`: lexical relevance over chunk text and section titles in Elasticsearch.

Guarantees of `BM25Executor.run(params, *, tenant_id, timeout_s)`:
- The query is analysed in Python exactly as the indexed fields were (`analysis.terms`:
  stop words, Snowball English stems; adjacent words also joined into one, `compound_terms`,
  unless `bm25_join_adjacent_words` is off; each term scoped to the tenant, `es_mapping.scoped_terms`,
  so document frequencies are the tenant's own), then one best-fields `dis_max` (tie_breaker 0.3)
  over the pre-analysed `text_terms` and `title_terms` (the document title and section path of
  the chunk, weight `TITLE_BOOST`), each term clause boosted so its IDF counts the tenant's chunks,
  not the whole index's (`bm25_weights.TenantTermWeights`: one `termvectors` request, a cached
  count), inside a bool filter that always carries `es_serving_filter(tenant_id)` (active + the
  reader's ACL) and, when given, a `terms` filter on `document_ids`. A query with no terms left
  (only stop words or punctuation) matches nothing. `size = params.limit`. The statistics and the
  search share `timeout_s`: each request's client timeout (and the search's ES `timeout`) is what
  is left of it. A partial (timed-out) answer is returned with a `timeout` gap.
- Hits are ranked 1..n in Elasticsearch's order (score, then chunk id); `score` = BM25 score.
- Unreachable cluster, request timeout or 429/5xx raise `Transient`.
- Last, the active-version check through the query role (`result["dropped_inactive"]`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from elasticsearch import Elasticsearch

from manifold.query.evidence import (
    StoreClock,
    chunk_evidence,
    es_errors,
    final_check,
    hit_from_es,
    now_utc,
    require_list,
    unique,
)
from manifold.query.executors.bm25_weights import TenantTermWeights
from manifold.query.plan import BM25SearchParams
from manifold.query.types import Gap, StepResult, TextHit
from manifold.shared import analysis
from manifold.shared.config import QuerySettings
from manifold.shared.stores.es_mapping import ES_ALIAS, scoped_terms
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import es_serving_filter

TITLE_BOOST = 0.5
"""Weight of the title field (document title + section path) against the chunk text."""
TIE_BREAKER = 0.3


def bm25_query(query: str, tenant_id: str, document_ids: Sequence[str] | None,
               boosts: Mapping[str, Mapping[str, float]] | None = None, *,
               terms: Sequence[str] | None = None) -> dict[str, Any]:
    """The Elasticsearch query body (exposed for tests and the benchmark): a `dis_max` over one
    `bool` of `term` clauses per BM25 field (what `multi_match` best_fields builds), each term
    clause boosted by `boosts[field][term]` (`TenantTermWeights`; 1 when not given). `terms` are
    `query`'s tenant-scoped terms when the caller has them already (`query_terms`)."""
    filters = es_serving_filter(tenant_id)
    if document_ids is not None:
        filters = [*filters, {"terms": {"document_id": list(document_ids)}}]
    scoped = list(terms) if terms is not None else query_terms(query, tenant_id)
    if not scoped:
        return {"bool": {"filter": filters, "must": [{"match_none": {}}]}}
    weights = boosts or {}

    def field(name: str, factor: float) -> dict[str, Any]:
        per_term = weights.get(name, {})
        return {"bool": {"should": [{"term": {name: {"value": t, "boost": factor * per_term.get(t, 1.0)}}}
                                    for t in scoped]}}

    return {"bool": {
        "filter": filters,
        "must": [{"dis_max": {"tie_breaker": TIE_BREAKER,
                              "queries": [field("text_terms", 1.0), field("title_terms", TITLE_BOOST)]}}],
    }}


def query_terms(query: str, tenant_id: str, *, joined: bool = True) -> list[str]:
    """`query` analysed as the indexed fields were (with its word pairs written as one word,
    `analysis.query_terms`, unless `joined` is false), each term scoped to `tenant_id`."""
    return scoped_terms(tenant_id, analysis.query_terms(query) if joined else analysis.terms(query)).split()


class BM25Executor:
    """BM25 over the tenant's serving chunks (see module docstring)."""

    def __init__(self, es: Elasticsearch, db: TenantConnections, settings: QuerySettings, *,
                 index: str = ES_ALIAS) -> None:
        self._es = es
        self._db = db
        self._settings = settings
        self._index = index
        self._weights = TenantTermWeights(es, index, ttl_s=settings.bm25_tenant_count_ttl_s)

    def run(self, params: BM25SearchParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        docs = require_list(params.document_ids, "document_ids")
        clock = StoreClock()
        gaps: list[Gap] = []
        hits: list[TextHit] = []
        if docs == []:
            return StepResult(result={"dropped_inactive": 0}, gaps=(
                Gap(kind="missing_data", step=None, detail="bm25: no documents in scope"),))
        deadline = time.monotonic() + timeout_s
        with clock, es_errors("elasticsearch (bm25)"):
            terms = query_terms(params.query, tenant_id, joined=self._settings.bm25_join_adjacent_words)
            boosts = self._weights.boosts(tenant_id, terms, deadline=deadline)
            left = max(deadline - time.monotonic(), 0.05)
            res = self._es.options(request_timeout=left).search(
                index=self._index, query=bm25_query(params.query, tenant_id, docs, boosts, terms=terms),
                size=params.limit,
                timeout=f"{max(int(left * 1000), 10)}ms", sort=["_score", {"chunk_id": "asc"}],
                track_scores=True,
            )
        if res.get("timed_out"):
            gaps.append(Gap(kind="timeout", step=None, detail="bm25: elasticsearch returned partial results"))
        for rank, h in enumerate(res["hits"]["hits"], start=1):
            src = h["_source"]
            if src.get("tenant_id") != tenant_id:  # defence in depth; the filter already holds it
                continue
            hits.append(hit_from_es(src, source_kind="bm25", rank=rank, score=h.get("_score")))
        with clock, self._db.transaction(tenant_id) as conn:
            kept, dropped = final_check(conn, tenant_id, hits)
        kept = [h.model_copy(update={"rank": i}) for i, h in enumerate(kept, start=1)]
        at = now_utc()
        return StepResult(
            outputs={"identifiers": unique(i for h in kept for i in h.identifiers),
                     "document_ids": unique(h.document_id for h in kept)},
            evidence=tuple(chunk_evidence(h, tenant_id=tenant_id, store="elasticsearch", retrieved_at=at)
                           for h in kept),
            hits=tuple(kept), gaps=tuple(gaps), rows=len(hits), store_ms=clock.ms,
            result={"dropped_inactive": dropped, "timed_out": bool(res.get("timed_out"))},
        )
