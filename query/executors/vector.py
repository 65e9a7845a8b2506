"""`vector_search`: cosine nearest neighbours over the tenant's serving chunks in pgvector.

Guarantees of `VectorExecutor.run(params, *, tenant_id, timeout_s)`:
- The query is embedded with the injected `Embedder` (never constructed here); embedding time
  is not store time.
- One query-role transaction with the tenant set (RLS) and an explicit `tenant_id = %s`
  predicate on `chunks` (active versions only, see below), optionally `document_id = ANY(%s)`;
  `statement_timeout` is set locally from the step budget (capped by
  `settings.statement_timeout_ms`). All SQL is parameterised, settings via `set_config`.
- Mode: when the filtered active chunk count is below `settings.exact_search_below` the search is
  EXACT (distances computed for every candidate in a materialised CTE, then sorted: no index can
  be used); otherwise it is approximate: `ORDER BY embedding <=> q LIMIT k` with local
  `hnsw.ef_search = params.ef_search` and `hnsw.iterative_scan = relaxed_order` (pgvector 0.8),
  re-sorted by distance. `result["vector_mode"]` says which ("exact" / "hnsw").
- Hits are ranked 1..n by distance (ties by chunk id); `score = 1 - cosine distance`.
- `exact_neighbours(...)` and `search_vector(..., mode=...)` let a benchmark compare HNSW with
  exact search under the same tenant filter; `recall_at_k` is the pure comparison.
- Vectors are read from `chunks` itself, not the `serving_chunks` view: through the
  security_barrier view the planner cannot turn `ORDER BY embedding <=> q LIMIT k` into an HNSW
  index scan (measured on pgvector 0.8.6). The query role's SELECT on `chunks` is held by RLS to
  its tenant AND, by the restrictive policy `query_active_only` (migration 5), to active versions.
- Last, the active-version check (`result["dropped_inactive"]`); an unreachable server, an
  aborted transaction or a statement timeout raises `Transient`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from manifold.query.evidence import (CHUNK_COLUMNS, StoreClock, chunk_evidence, final_check, hit_from_row, now_utc,
                                     pg_timeout_ms, require_list, unique)
from manifold.query.plan import VectorSearchParams
from manifold.query.types import Gap, StepResult, TextHit
from manifold.shared.config import QuerySettings
from manifold.shared.embedding import Embedder
from manifold.shared.stores.postgres import TenantConnections

VectorMode = Literal["exact", "hnsw"]

_WHERE = ("c.tenant_id = %(tenant)s AND c.embedding IS NOT NULL "
          "AND (%(docs)s::text[] IS NULL OR c.document_id = ANY(%(docs)s))")
_COUNT = f"SELECT count(*) FROM manifold.chunks c WHERE {_WHERE}"
_INNER_COLS = ("c.tenant_id, c.chunk_id, c.document_id, c.version, c.section_id, c.ordinal, c.text, "
               "c.content_sha256, c.identifiers")
_OUTER = (f"SELECT {CHUNK_COLUMNS}, c.distance FROM nn c "
          "LEFT JOIN manifold.serving_sections s ON s.tenant_id = c.tenant_id AND s.section_id = c.section_id "
          "WHERE c.tenant_id = %(tenant)s ORDER BY c.distance, c.chunk_id")
_HNSW = (f"WITH nn AS (SELECT {_INNER_COLS}, c.embedding <=> %(v)s AS distance "
         f"FROM manifold.chunks c WHERE {_WHERE} ORDER BY c.embedding <=> %(v)s LIMIT %(limit)s) " + _OUTER)
_EXACT = (f"WITH scored AS MATERIALIZED (SELECT {_INNER_COLS}, c.embedding <=> %(v)s AS distance "
          f"FROM manifold.chunks c WHERE {_WHERE}), "
          "nn AS (SELECT * FROM scored ORDER BY distance, chunk_id LIMIT %(limit)s) " + _OUTER)


@dataclass(frozen=True)
class VectorSearch:
    hits: tuple[TextHit, ...]
    mode: VectorMode
    filtered_count: int | None
    """Active chunks under the filter (counted only when the mode was chosen automatically)."""
    dropped_inactive: int
    store_ms: float


def recall_at_k(approximate: Sequence[str], exact: Sequence[str], k: int = 10) -> float:
    """Share of the exact top-k ids that the approximate top-k also returned (1.0 if exact is empty)."""
    truth = list(exact)[:k]
    if not truth:
        return 1.0
    return len(set(list(approximate)[:k]) & set(truth)) / len(truth)


class VectorExecutor:
    """pgvector nearest neighbours under the tenant filter (see module docstring)."""

    def __init__(self, db: TenantConnections, embedder: Embedder, settings: QuerySettings) -> None:
        self._db = db
        self._embedder = embedder
        self._settings = settings

    def run(self, params: VectorSearchParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        docs = require_list(params.document_ids, "document_ids")
        if docs == []:
            return StepResult(result={"dropped_inactive": 0}, gaps=(
                Gap(kind="missing_data", step=None, detail="vector: no documents in scope"),))
        vector = self._embedder.encode([params.query])[0]
        found = self.search_vector(vector, tenant_id=tenant_id, limit=params.limit, timeout_s=timeout_s,
                                   ef_search=params.ef_search, document_ids=docs)
        at = now_utc()
        return StepResult(
            outputs={"identifiers": unique(i for h in found.hits for i in h.identifiers),
                     "document_ids": unique(h.document_id for h in found.hits)},
            evidence=tuple(chunk_evidence(h, tenant_id=tenant_id, store="postgres", retrieved_at=at)
                           for h in found.hits),
            hits=found.hits, rows=len(found.hits) + found.dropped_inactive, store_ms=found.store_ms,
            result={"vector_mode": found.mode, "filtered_count": found.filtered_count,
                    "dropped_inactive": found.dropped_inactive},
        )

    def search_vector(self, vector: Sequence[float], *, tenant_id: str, limit: int, timeout_s: float,
                      ef_search: int = 100, document_ids: Sequence[str] | None = None,
                      mode: VectorMode | None = None) -> VectorSearch:
        """Nearest active chunks to `vector`; `mode=None` chooses by the filtered count."""
        clock = StoreClock()
        args: dict[str, Any] = {"tenant": tenant_id, "v": np.asarray(vector, dtype=np.float32),
                                "docs": list(document_ids) if document_ids is not None else None,
                                "limit": limit}
        count: int | None = None
        with clock, self._db.transaction(tenant_id) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(pg_timeout_ms(timeout_s, self._settings)),))
            if mode is None:
                row = conn.execute(_COUNT, args).fetchone()
                count = int(row[0]) if row else 0
                mode = "exact" if count < self._settings.exact_search_below else "hnsw"
            if mode == "exact":
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                rows = conn.execute(_EXACT, args).fetchall()
            else:
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                             "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (str(ef_search),))
                rows = conn.execute(_HNSW, args).fetchall()
            hits = [hit_from_row(row, source_kind="vector", rank=1, score=1.0 - float(row[9]))
                    for row in sorted(rows, key=lambda r: (float(r[9]), r[0]))]
            kept, dropped = final_check(conn, tenant_id, hits)
        ranked = tuple(h.model_copy(update={"rank": i}) for i, h in enumerate(kept, start=1))
        return VectorSearch(hits=ranked, mode=mode, filtered_count=count, dropped_inactive=dropped,
                            store_ms=clock.ms)

    def exact_neighbours(self, vector: Sequence[float], *, tenant_id: str, limit: int = 10,
                         timeout_s: float = 10.0, document_ids: Sequence[str] | None = None) -> VectorSearch:
        """Ground truth for recall: exact search under the same tenant filter."""
        return self.search_vector(vector, tenant_id=tenant_id, limit=limit, timeout_s=timeout_s,
                                  document_ids=document_ids, mode="exact")
