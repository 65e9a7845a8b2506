"""`exact_lookup`: business identifiers matched by equality, never by relevance.

Guarantees of `ExactLookupExecutor.run(params, *, tenant_id, timeout_s)`:
- Requested identifiers are normalised with `normalize_identifier` ("prd 482" -> "PRD-482");
  a value that is not an identifier is matched verbatim (stripped) and listed in
  `result["unrecognised"]`.
- Elasticsearch: a `terms` query on the keyword field `identifiers`, plus a phrase match on the
  section title that is then *verified* by extracting identifiers from the title (a chunk under
  the heading "Differential pressure sensor PRD-482" belongs to PRD-482 even when its body does
  not repeat the code). Always inside `es_serving_filter(tenant_id)` (active + the reader's ACL).
- PostgreSQL (query role, tenant set for the transaction, explicit `tenant_id = %s`):
  `chunks.identifiers && ids` (the query role sees active versions only, migration 5; plus a
  verified title match), and
  `serving_records.number = ANY(ids)`, returned as `Evidence(kind="record")`.
- A chunk's `identifiers` are its own plus those of its section title; `identity=True` iff they
  contain a requested (normalised) id verbatim. Order is deterministic: identity hits first,
  then more requested ids matched, then document id, ordinal, chunk id. Ranks are 1..n.
- PostgreSQL's chunk search runs only when Elasticsearch was not asked or failed: both stores
  hold the same active chunks (the publisher verifies them), and under row-level security the
  `&&` and `ILIKE` tests (not leakproof) cannot use an index, so that search reads every chunk
  and section of the tenant (most of an exact lookup's time on large tenants). Records are
  always read from PostgreSQL.
- If one source fails transiently the other still answers and a `degraded` gap says so; if
  every requested source fails, `Transient` is raised.
- Last, every hit and record goes through the active-version check (`result["dropped_inactive"]`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from elasticsearch import Elasticsearch
from psycopg.rows import dict_row

from manifold.query.evidence import (
    CHUNK_COLUMNS,
    StoreClock,
    chunk_evidence,
    es_errors,
    final_check,
    hit_from_es,
    hit_from_row,
    now_utc,
    pg_timeout_ms,
    record_evidence,
    require_list,
    unique,
)
from manifold.query.plan import ExactLookupParams
from manifold.query.types import Evidence, Gap, StepResult, TextHit
from manifold.shared.config import QuerySettings
from manifold.shared.errors import Transient
from manifold.shared.identifiers import find_identifiers, normalize_identifier
from manifold.shared.stores.es_mapping import ES_ALIAS
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import es_serving_filter

_CHUNKS_BY_ID = (
    # Two selective branches (identifier overlap; identifier in the section heading), then the
    # section titles of the kept rows only: joining the serving views first made the planner
    # hash every section of the tenant against the manifest (>30 s at 20k chunks, see
    # bench/results/query_latency.json history); this form takes ~0.2 s there.
    "WITH hit AS ("
    " SELECT c.chunk_id FROM manifold.chunks c"
    "  WHERE c.tenant_id = %(tenant)s AND c.identifiers && %(ids)s::text[]"
    " UNION"
    " SELECT c.chunk_id FROM manifold.serving_sections s"
    "  JOIN manifold.chunks c ON c.tenant_id = s.tenant_id AND c.section_id = s.section_id"
    "  WHERE s.tenant_id = %(tenant)s AND s.title ILIKE ANY(%(likes)s)"
    "), picked AS ("
    " SELECT c.* FROM manifold.chunks c JOIN hit USING (chunk_id)"
    "  WHERE c.tenant_id = %(tenant)s AND (%(docs)s::text[] IS NULL OR c.document_id = ANY(%(docs)s))"
    "  ORDER BY c.document_id, c.ordinal, c.chunk_id LIMIT %(limit)s"
    ") "
    f"SELECT {CHUNK_COLUMNS} FROM picked c "
    "LEFT JOIN LATERAL (SELECT title FROM manifold.serving_sections s "
    "                    WHERE s.tenant_id = c.tenant_id AND s.section_id = c.section_id) s ON true "
    "ORDER BY c.document_id, c.ordinal, c.chunk_id"
)
_RECORDS_BY_NUMBER = (
    "SELECT record_id, document_id, version, record_type, number, counterparty_name, issued_on, currency, "
    "status, chunk_id FROM manifold.serving_records "
    "WHERE tenant_id = %(tenant)s AND number = ANY(%(ids)s) "
    "AND (%(docs)s::text[] IS NULL OR document_id = ANY(%(docs)s)) "
    "ORDER BY number, document_id, record_id LIMIT %(limit)s"
)


def normalise_all(raw: Sequence[str]) -> tuple[list[str], list[str]]:
    """(normalised ids in request order without repeats, raw values that are not identifiers)."""
    ids: list[str] = []
    unrecognised: list[str] = []
    for value in raw:
        norm = normalize_identifier(value)
        if norm is None:
            unrecognised.append(value)
            norm = value.strip()
        if norm:
            ids.append(norm)
    return list(unique(ids)), unrecognised


class ExactLookupExecutor:
    """Exact identifier lookup over Elasticsearch and/or PostgreSQL (see module docstring)."""

    def __init__(self, es: Elasticsearch, db: TenantConnections, settings: QuerySettings, *,
                 index: str = ES_ALIAS) -> None:
        self._es = es
        self._db = db
        self._settings = settings
        self._index = index

    def run(self, params: ExactLookupParams, *, tenant_id: str, timeout_s: float,
            document_ids: Sequence[str] | None = None) -> StepResult:
        raw = require_list(params.identifiers, "identifiers") or []
        ids, unrecognised = normalise_all(raw)
        docs = require_list(document_ids, "document_ids") if document_ids is not None else None
        clock = StoreClock()
        hits: dict[str, tuple[TextHit, str]] = {}
        records: list[dict[str, Any]] = []
        gaps: list[Gap] = []
        failures: list[str] = []
        if not ids:
            return StepResult(result={"identifiers": [], "unrecognised": unrecognised, "dropped_inactive": 0})
        fetch = min(2 * params.limit, 200)
        if "elasticsearch" in params.sources:
            try:
                for hit in self._search_es(ids, tenant_id, timeout_s, fetch, docs, clock):
                    hits.setdefault(hit.chunk_id, (hit, "elasticsearch"))
            except Transient as exc:
                failures.append(f"elasticsearch: {exc}")
        if "postgres" in params.sources:
            es_answered = "elasticsearch" in params.sources and not failures
            try:
                pg_hits, records = self._search_pg(ids, tenant_id, timeout_s, fetch, params.limit, docs, clock,
                                                   chunks=not es_answered)
                for hit in pg_hits:
                    hits.setdefault(hit.chunk_id, (hit, "postgres"))
            except Transient as exc:
                failures.append(f"postgres: {exc}")
        if failures and len(failures) == len(set(params.sources)):
            raise Transient("exact lookup failed in every source: " + "; ".join(failures))
        gaps.extend(Gap(kind="degraded", step=None, detail=f"exact lookup: {f}") for f in failures)

        return exact_result(self._db, tenant_id=tenant_id, ids=ids, unrecognised=unrecognised, hits=hits,
                            records=records, gaps=gaps, limit=params.limit, clock=clock)

    def _search_es(self, ids: list[str], tenant_id: str, timeout_s: float, size: int,
                   docs: list[str] | None, clock: StoreClock) -> list[TextHit]:
        filters = es_serving_filter(tenant_id)
        if docs is not None:
            filters = [*filters, {"terms": {"document_id": docs}}]
        should: list[dict[str, Any]] = [{"terms": {"identifiers": ids}}]
        should += [{"match_phrase": {"section_title.text": i}} for i in ids]
        query = {"bool": {"filter": filters, "should": should, "minimum_should_match": 1}}
        with clock, es_errors("elasticsearch (exact lookup)"):
            res = self._es.options(request_timeout=max(timeout_s, 0.05)).search(
                index=self._index, query=query, size=size, timeout=f"{max(int(timeout_s * 1000), 10)}ms",
                sort=[{"document_id": "asc"}, {"ordinal": "asc"}, {"chunk_id": "asc"}])
        out = []
        for h in res["hits"]["hits"]:
            src = h["_source"]
            if src.get("tenant_id") != tenant_id:  # defence in depth; the filter already holds it
                continue
            hit_ids = _hit_identifiers(src.get("identifiers") or (), src.get("section_title") or "")
            if not set(ids) & set(hit_ids):
                continue  # title phrase matched without the identifier itself
            out.append(hit_from_es(src, source_kind="exact", rank=1, score=None, identity=True,
                                   identifiers=hit_ids))
        return out

    def _search_pg(self, ids: list[str], tenant_id: str, timeout_s: float, size: int, limit: int,
                   docs: list[str] | None, clock: StoreClock, *,
                   chunks: bool = True) -> tuple[list[TextHit], list[dict[str, Any]]]:
        """Records by number and, when `chunks`, chunks by identifier (see `run`)."""
        args = {"tenant": tenant_id, "ids": ids, "likes": [f"%{i}%" for i in ids], "docs": docs, "limit": size}
        with clock, self._db.transaction(tenant_id) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(pg_timeout_ms(timeout_s, self._settings)),))
            rows = conn.execute(_CHUNKS_BY_ID, args).fetchall() if chunks else []
            with conn.cursor(row_factory=dict_row) as cur:
                records = cur.execute(_RECORDS_BY_NUMBER, {**args, "limit": limit}).fetchall()
        hits = []
        for row in rows:
            hit_ids = _hit_identifiers(row[8] or (), row[4] or "")
            if set(ids) & set(hit_ids):
                hits.append(hit_from_row(row, source_kind="exact", rank=1, score=None, identity=True,
                                         identifiers=hit_ids))
        return hits, records


def exact_result(db: TenantConnections, *, tenant_id: str, ids: list[str], unrecognised: list[str],
                 hits: Mapping[str, tuple[TextHit, str]], records: list[dict[str, Any]], gaps: list[Gap],
                 limit: int, clock: StoreClock) -> StepResult:
    """An exact lookup's `StepResult` from its candidate hits (chunk id -> (hit, store)) and records,
    for both profiles: deterministic order (`_order`), at most `limit` hits ranked 1..n, the
    active-version check on every hit and record, then evidence (matched ids as claims) and a
    `missing_data` gap when no requested identifier was found."""
    ordered = sorted((h for h, _ in hits.values()), key=lambda h: _order(h, ids))[:limit]
    ranked = [h.model_copy(update={"rank": i}) for i, h in enumerate(ordered, start=1)]
    with clock, db.transaction(tenant_id) as conn:
        kept, dropped = final_check(conn, tenant_id, ranked)
        kept_records, dropped_records = final_check(conn, tenant_id, records)
    kept = [h.model_copy(update={"rank": i}) for i, h in enumerate(kept, start=1)]
    at = now_utc()
    evidence: list[Evidence] = [
        chunk_evidence(h, tenant_id=tenant_id, store=hits[h.chunk_id][1], retrieved_at=at,
                       claims={"matched": [i for i in ids if i in h.identifiers]})
        for h in kept
    ]
    evidence += [record_evidence(r, tenant_id=tenant_id, retrieved_at=at, rank=i)
                 for i, r in enumerate(kept_records, start=1)]
    found = {i for h in kept for i in h.identifiers} | {r["number"] for r in kept_records}
    matched = [i for i in ids if i in found]
    if not matched:
        gaps = [*gaps, Gap(kind="missing_data", step=None,
                           detail=f"no active chunk or record carries {', '.join(ids)}")]
    return StepResult(
        outputs={"identifiers": tuple(matched),
                 "document_ids": unique([h.document_id for h in kept] + [r["document_id"] for r in kept_records])},
        evidence=tuple(evidence), hits=tuple(kept), gaps=tuple(gaps),
        result={"identifiers": ids, "matched": matched, "unrecognised": unrecognised,
                "identity_hits": sum(h.identity for h in kept), "records": len(kept_records),
                "dropped_inactive": dropped + dropped_records},
        rows=len(hits) + len(records), store_ms=clock.ms,
    )


def _hit_identifiers(own: Sequence[str], section_title: str) -> tuple[str, ...]:
    return unique([*own, *find_identifiers(section_title)])


def _order(hit: TextHit, ids: list[str]) -> tuple[int, int, str, int, str]:
    matched = sum(1 for i in ids if i in hit.identifiers)
    return (0 if hit.identity else 1, -matched, hit.document_id, hit.ordinal, hit.chunk_id)
