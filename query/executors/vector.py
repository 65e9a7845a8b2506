"""`vector_search`: cosine nearest neighbours over the tenant's serving chunks in pgvector.

Guarantees of `VectorExecutor.run(params, *, tenant_id, timeout_s)`:
- The query is embedded with the injected `Embedder` (never constructed here); embedding time
  is not store time.
- One query-role transaction with the tenant set (RLS) and an explicit `tenant_id = %s`
  predicate on `chunks` (active versions only, see below), optionally `document_id = ANY(%s)`;
  `statement_timeout` is set locally from the step budget (capped by
  `settings.statement_timeout_ms`). All SQL is parameterised, settings via `set_config`.
- Mode: when the filtered active chunk count (counted up to the threshold, no further) is below
  `settings.exact_search_below` the search is
  EXACT (distances computed for every candidate in a materialised CTE, then sorted: no index can
  be used); otherwise it is approximate: `ORDER BY embedding <=> q LIMIT k` with local
  `hnsw.ef_search = params.ef_search` and `hnsw.iterative_scan = relaxed_order` (pgvector 0.8),
  re-sorted by distance. `result["vector_mode"]` says which ("exact" / "hnsw"). The count runs
  under the reader's ACL policies, so a reader who may read few chunks gets an exact search over
  them; an approximate search that returns fewer than `limit` neighbours while more exist (a
  selective filter the iterative scan could not satisfy) is redone exactly. A count that reached
  the threshold is remembered for `settings.vector_large_ttl_s` per (tenant, reader scope,
  configuration, document filter), and such searches skip the count (it cost about as much as
  the HNSW search at 50,000 chunks, `bench/route_phases.py`). Only "large" is remembered: if the
  set has shrunk since, the HNSW search returns fewer neighbours than asked and is redone
  exactly, as above; a small count is never remembered.
- Hits are ranked 1..n by distance (ties by chunk id); `score = 1 - cosine distance`.
- `exact_neighbours(...)` and `search_vector(..., mode=...)` let a benchmark compare HNSW with
  exact search under the same tenant filter; `recall_at_k` is the pure comparison.
- Vectors are read from `chunks` itself, not the `serving_chunks` view: through the
  security_barrier view the planner cannot turn `ORDER BY embedding <=> q LIMIT k` into an HNSW
  index scan (measured on pgvector 0.8.6). The query role's SELECT on `chunks` is held by RLS to
  its tenant AND, by the restrictive policy `query_active_only` (migration 5), to active versions.
- Last, the active-version check (`result["dropped_inactive"]`); an unreachable server, an
  aborted transaction or a statement timeout raises `Transient`.
- Embedding configuration (embedding migration, DESIGN §3.4): the tenant's ACTIVE configuration
  is read in the same snapshot (REPEATABLE READ) as the search, which then reads only that
  configuration's vectors: `chunks.embedding` for `primary`, `chunk_vectors WHERE config = …`
  (joined to the chunk with the same content hash) otherwise. So one query never mixes two
  configurations. `run` embeds the query with that configuration's query embedder (outside the
  transaction, for the configuration the tenant last used); if the active configuration differs,
  it re-embeds and retries, and after a few changes in a row embeds inside the snapshot itself.
  `result["embedding_config"]` names the configuration used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from manifold.query.evidence import (
    CHUNK_COLUMNS,
    StoreClock,
    chunk_evidence,
    final_check,
    hit_from_row,
    now_utc,
    pg_timeout_ms,
    require_list,
    unique,
)
from manifold.query.plan import VectorSearchParams
from manifold.query.types import Gap, StepResult, TextHit
from manifold.shared import access
from manifold.shared.config import QuerySettings
from manifold.shared.embedding import Embedder
from manifold.shared.embedding_configs import PRIMARY, ConfigEmbedders
from manifold.shared.stores.embedding_pg import active_config
from manifold.shared.stores.pg_connections import TenantConnections

VectorMode = Literal["exact", "hnsw"]

_WHERE = ("c.tenant_id = %(tenant)s AND c.embedding IS NOT NULL "
          "AND (%(docs)s::text[] IS NULL OR c.document_id = ANY(%(docs)s))")
# The count only chooses exact vs HNSW, so it stops at the threshold (`%(cap)s`): counting every
# active chunk of a large tenant under the restrictive policy cost more than the search itself.
_COUNT = f"SELECT count(*) FROM (SELECT 1 FROM manifold.chunks c WHERE {_WHERE} LIMIT %(cap)s) n"
_INNER_COLS = ("c.tenant_id, c.chunk_id, c.document_id, c.version, c.section_id, c.ordinal, c.text, "
               "c.content_sha256, c.identifiers")
# The section title is looked up per neighbour (LATERAL, `LIMIT 1` so the planner cannot flatten it
# into a join): the neighbour count is known (`limit`), but the planner, estimating one row after the
# policy and content-hash filters, joined every serving section to each neighbour instead (a
# parallel configuration's HNSW search: p50 345 ms before, 18 ms after, bench/vector_config_latency.py).
_OUTER = (f"SELECT {CHUNK_COLUMNS}, c.distance FROM nn c "
          "LEFT JOIN LATERAL (SELECT s.title FROM manifold.serving_sections s WHERE s.tenant_id = c.tenant_id "
          "AND s.section_id = c.section_id LIMIT 1) s ON true "
          "WHERE c.tenant_id = %(tenant)s ORDER BY c.distance, c.chunk_id")
_HNSW = (f"WITH nn AS (SELECT {_INNER_COLS}, c.embedding <=> %(v)s AS distance "
         f"FROM manifold.chunks c WHERE {_WHERE} ORDER BY c.embedding <=> %(v)s LIMIT %(limit)s) " + _OUTER)
_EXACT = (f"WITH scored AS MATERIALIZED (SELECT {_INNER_COLS}, c.embedding <=> %(v)s AS distance "
          f"FROM manifold.chunks c WHERE {_WHERE}), "
          "nn AS (SELECT * FROM scored ORDER BY distance, chunk_id LIMIT %(limit)s) " + _OUTER)

# A parallel configuration: its vectors in `chunk_vectors`, each joined to the chunk it was made from.
_WHERE_P = ("v.tenant_id = %(tenant)s AND v.config = %(config)s "
            "AND (%(docs)s::text[] IS NULL OR v.document_id = ANY(%(docs)s))")
_COUNT_P = f"SELECT count(*) FROM (SELECT 1 FROM manifold.chunk_vectors v WHERE {_WHERE_P} LIMIT %(cap)s) n"
_JOIN_P = ("JOIN manifold.chunks c ON c.tenant_id = v.tenant_id AND c.chunk_id = v.chunk_id "
           "AND c.content_sha256 = v.content_sha256")
_HNSW_P = ("WITH knn AS (SELECT v.tenant_id, v.chunk_id, v.content_sha256, v.embedding <=> %(v)s AS distance "
           f"FROM manifold.chunk_vectors v WHERE {_WHERE_P} ORDER BY v.embedding <=> %(v)s LIMIT %(limit)s), "
           f"nn AS (SELECT {_INNER_COLS}, v.distance FROM knn v {_JOIN_P}) " + _OUTER)
_EXACT_P = (f"WITH scored AS MATERIALIZED (SELECT {_INNER_COLS}, v.embedding <=> %(v)s AS distance "
            f"FROM manifold.chunk_vectors v {_JOIN_P} WHERE {_WHERE_P}), "
            "nn AS (SELECT * FROM scored ORDER BY distance, chunk_id LIMIT %(limit)s) " + _OUTER)
_SQL = {True: (_COUNT, _EXACT, _HNSW), False: (_COUNT_P, _EXACT_P, _HNSW_P)}
"""is primary -> (count, exact, hnsw)."""

_CONFIG_RETRIES = 3
_LARGE_ENTRIES = 4096
"""At most this many remembered "large" sets (then all are forgotten at once)."""



class EmbeddingConfigChanged(RuntimeError):
    """The tenant's active embedding configuration is not the one the vector was made with."""

    def __init__(self, expected: str, active: str) -> None:
        super().__init__(f"vector made with embedding configuration {expected!r}, active is {active!r}")
        self.expected = expected
        self.active = active


@dataclass(frozen=True)
class VectorSearch:
    hits: tuple[TextHit, ...]
    mode: VectorMode
    filtered_count: int | None
    """Active chunks under the filter, counted only up to `exact_search_below` (so a value equal to
    it means "at least"), and only when the mode was chosen automatically by a count (None when
    the set was remembered as large, or the mode was given)."""
    dropped_inactive: int
    store_ms: float
    config: str = PRIMARY
    """The embedding configuration searched (the tenant's active one, read in the same snapshot)."""


def recall_at_k(approximate: Sequence[str], exact: Sequence[str], k: int = 10) -> float:
    """Share of the exact top-k ids that the approximate top-k also returned (1.0 if exact is empty)."""
    truth = list(exact)[:k]
    if not truth:
        return 1.0
    return len(set(list(approximate)[:k]) & set(truth)) / len(truth)


class VectorExecutor:
    """pgvector nearest neighbours under the tenant filter (see module docstring)."""

    def __init__(self, db: TenantConnections, embedder: Embedder, settings: QuerySettings,
                 configs: ConfigEmbedders | None = None) -> None:
        self._db = db
        self._embedder = embedder
        self._settings = settings
        self._configs = configs or ConfigEmbedders(embedder)
        self._last_config: dict[str, str] = {}
        """tenant -> the configuration it last searched (a guess, confirmed in each search)."""
        self._large: dict[tuple[Any, ...], float] = {}
        """(tenant, scope, configuration, documents) -> until when its set is known to be large."""

    def run(self, params: VectorSearchParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        docs = require_list(params.document_ids, "document_ids")
        if docs == []:
            return StepResult(result={"dropped_inactive": 0}, gaps=(
                Gap(kind="missing_data", step=None, detail="vector: no documents in scope"),))
        config = self._last_config.get(tenant_id, PRIMARY)
        found: VectorSearch | None = None
        for _ in range(_CONFIG_RETRIES):
            vector = self._configs.encode_query(config, params.query)
            try:
                found = self.search_vector(vector, tenant_id=tenant_id, limit=params.limit, timeout_s=timeout_s,
                                           ef_search=params.ef_search, document_ids=docs, config=config)
                break
            except EmbeddingConfigChanged as changed:
                config = self._last_config[tenant_id] = changed.active
        if found is None:  # the configuration keeps changing: embed inside the search's snapshot
            found = self._search(lambda active: self._configs.encode_query(active, params.query),
                                 tenant_id=tenant_id, limit=params.limit, timeout_s=timeout_s,
                                 ef_search=params.ef_search, document_ids=docs, mode=None, config=None)
        at = now_utc()
        return StepResult(
            outputs={"identifiers": unique(i for h in found.hits for i in h.identifiers),
                     "document_ids": unique(h.document_id for h in found.hits)},
            evidence=tuple(chunk_evidence(h, tenant_id=tenant_id, store="postgres", retrieved_at=at)
                           for h in found.hits),
            hits=found.hits, rows=len(found.hits) + found.dropped_inactive, store_ms=found.store_ms,
            result={"vector_mode": found.mode, "filtered_count": found.filtered_count,
                    "dropped_inactive": found.dropped_inactive, "embedding_config": found.config},
        )

    def search_vector(self, vector: Sequence[float], *, tenant_id: str, limit: int, timeout_s: float,
                      ef_search: int = 100, document_ids: Sequence[str] | None = None,
                      mode: VectorMode | None = None, config: str | None = None) -> VectorSearch:
        """Nearest active chunks to `vector`; `mode=None` chooses by the filtered count.

        `config` names the embedding configuration `vector` was made with; if it is not the
        tenant's active one, `EmbeddingConfigChanged` is raised and nothing is searched. `None`
        searches whichever configuration is active (`VectorSearch.config` says which)."""
        return self._search(lambda _: vector, tenant_id=tenant_id, limit=limit, timeout_s=timeout_s,
                            ef_search=ef_search, document_ids=document_ids, mode=mode, config=config)

    def _search(self, make_vector: Callable[[str], Sequence[float]], *, tenant_id: str, limit: int,
                timeout_s: float, ef_search: int, document_ids: Sequence[str] | None, mode: VectorMode | None,
                config: str | None) -> VectorSearch:
        """`search_vector` with the vector made from the active configuration's name, inside the
        search's snapshot."""
        clock = StoreClock()
        args: dict[str, Any] = {"tenant": tenant_id, "docs": _within_scope(tenant_id, document_ids),
                                "limit": limit, "cap": self._settings.exact_search_below}
        count: int | None = None
        with clock, self._db.transaction(tenant_id, snapshot=True) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(pg_timeout_ms(timeout_s, self._settings)),))
            active = active_config(conn, tenant_id)
            if config is not None and config != active:
                raise EmbeddingConfigChanged(config, active)
            args["config"] = active
            args["v"] = np.asarray(make_vector(active), dtype=np.float32)
            count_sql, exact_sql, hnsw_sql = _SQL[active == PRIMARY]
            key = (tenant_id, access.for_tenant(tenant_id), active,
                   None if args["docs"] is None else tuple(args["docs"]))
            if mode is None and self._large.get(key, 0.0) > time.monotonic():
                mode = "hnsw"
            elif mode is None:
                row = conn.execute(count_sql, args).fetchone()
                count = int(row[0]) if row else 0
                mode = "exact" if count < self._settings.exact_search_below else "hnsw"
                if mode == "hnsw" and self._settings.vector_large_ttl_s > 0:
                    if len(self._large) >= _LARGE_ENTRIES:
                        self._large.clear()
                    self._large[key] = time.monotonic() + self._settings.vector_large_ttl_s
            if mode == "exact":
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                rows = conn.execute(exact_sql, args).fetchall()
            else:
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                             "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (str(ef_search),))
                rows = conn.execute(hnsw_sql, args).fetchall()
                if len(rows) < limit and (count is None or count > len(rows)):
                    # a filter (ACL, documents) the iterative scan could not satisfy within its
                    # budget: never return fewer neighbours than exist, search exactly instead
                    conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                    rows = conn.execute(exact_sql, args).fetchall()
                    mode = "exact"
            hits = [hit_from_row(row, source_kind="vector", rank=1, score=1.0 - float(row[9]))
                    for row in sorted(rows, key=lambda r: (float(r[9]), r[0]))]
            kept, dropped = final_check(conn, tenant_id, hits)
        ranked = tuple(h.model_copy(update={"rank": i}) for i, h in enumerate(kept, start=1))
        self._last_config[tenant_id] = active
        return VectorSearch(hits=ranked, mode=mode, filtered_count=count, dropped_inactive=dropped,
                            store_ms=clock.ms, config=active)

    def exact_neighbours(self, vector: Sequence[float], *, tenant_id: str, limit: int = 10,
                         timeout_s: float = 10.0, document_ids: Sequence[str] | None = None) -> VectorSearch:
        """Ground truth for recall: exact search under the same tenant filter."""
        return self.search_vector(vector, tenant_id=tenant_id, limit=limit, timeout_s=timeout_s,
                                  document_ids=document_ids, mode="exact")


_NARROW_MAX_DOCS = 1000
"""Above this many readable documents the allow-list is not passed as a filter (a long `ANY`
list costs more to plan and probe than the policy's hashed set)."""


def _within_scope(tenant_id: str, document_ids: Sequence[str] | None) -> list[str] | None:
    """The document filter of a search: `document_ids`, narrowed to the reader's allow-list when
    its scope is one (default `none`). Only a planning aid, so the count and the exact scan use the
    `document_id` index instead of reading every chunk of the tenant through the policy; the
    RESTRICTIVE policies still decide what is read."""
    scope = access.for_tenant(tenant_id)
    if scope is None or not scope.allow or len(scope.documents) > _NARROW_MAX_DOCS:
        return list(document_ids) if document_ids is not None else None
    if document_ids is None:
        return sorted(scope.documents)
    return [d for d in document_ids if d in scope.documents]
