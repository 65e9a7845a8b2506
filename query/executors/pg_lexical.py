"""`bm25_search` and `exact_lookup` over the PostgreSQL text index (embedded profile).

Same parameters and `StepResult` shape as `bm25.BM25Executor` and `exact.ExactLookupExecutor`;
only the store differs (`shared.stores.pg_text` tables, read through the query role).

**BM25 as implemented** (`BM25_SQL`), per field f in {text, title}, over the tenant's active
versions only (row-level security keeps the query role to them; the publisher sets a version's
serving marks before activating it and clears them after retiring it, so every active chunk is
a serving one):

    S_f(d) = sum over distinct query terms t of
             qtf(t) * IDF_f(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * len_f(d) / avgdl_f))
    IDF_f(t) = ln(1 + (N_f - n_f(t) + 0.5) / (n_f(t) + 0.5))          (Lucene's BM25 IDF)

with k1 = 1.2, b = 0.75; N_f = serving chunks whose field f has at least one token, n_f(t) =
those containing t, len_f(d) = tokens of field f in d, avgdl_f = total tokens of f / N_f,
qtf(t) = occurrences of t in the analysed query (Lucene sums repeated clauses). Query and
documents go through the same analysis (`analysis.terms`: stop words, Snowball English stems, the
terms Elasticsearch's `text_terms`/`title_terms` hold; the query also looks for its adjacent
words joined into one, `analysis.compound_terms`, as the Elasticsearch branch does); only rows of the current
`PG_TEXT_SCHEMA_VERSION` are read (counted in the statistics and scored). The
fields combine as Elasticsearch's `multi_match` best_fields with `tie_breaker` 0.3 and the title
boost `bm25.TITLE_BOOST`: score = max(S_text, B*S_title) + 0.3 * min(S_text, B*S_title). Ties
are broken by chunk id. Differences from Elasticsearch: collection statistics are the tenant's
serving chunks (Elasticsearch uses the whole shard, every tenant and version), lengths are exact
(Lucene stores them lossily in one byte), and the constant (k1 + 1) factor is kept (Lucene 8+
dropped it); none changes the order within one tenant's corpus except through those statistics.

**Exact lookup**: source `"elasticsearch"` is served by the text index (the same role: keyword
`identifiers` overlap, or the requested id as an analysed phrase in the section title, then
verified by extracting identifiers from the title), source `"postgres"` by `serving_chunks` /
`serving_records` exactly as `exact.py`. Evidence is labelled `store="postgres"`.

**Statistics** (N_f, n_f(t), avgdl_f): read from `text_stats` / `text_df` (migration 14), which
the database keeps in step with the serving marks in the transaction that changes them
(`BM25_KEPT_SQL`), so a question does not aggregate the tenant. Row-level security shows those
rows to the query role only while nothing in the tenant is hidden from the transaction's
principal; otherwise (or when the tenant has none) they are computed per question over the
serving chunks the reader can see (`BM25_SQL`), so scores never reflect documents the reader may
not see. Both give the same scores on the same serving set; the one difference is a version
whose marks are set but which is not yet active (the publisher's window between marking and
activating), which the kept statistics count a moment early. `result["statistics"]` says which
was used (`kept` or `computed`).

**Bounded reading** (migration 17): a question reads at most `query.bm25_postings_depth`
postings of each query term and field, best first (`manifold.bm25_impact`: the posting's BM25
term-frequency factor at a reference field length, in a dedicated index), scores the chunks they
name, keeps the best `query.bm25_candidates` (at least the step's limit), and then scores those
candidates exactly, from every posting they have for the query's terms. A term in no more chunks
than the depth is read whole, so the cut only shortens the lists of the least informative terms;
what it can change is which chunks become candidates (a chunk none of whose postings is among any
term's best ones), never a candidate's score. On SciFact at 58,000 chunks the ranking matches
every posting's on 5 of 6 questions and nDCG@10 is unchanged to 0.005
(`bench/pg_bm25_latency.py`, which measures both in one run).

**Plan shape**: scores come from postings alone: each posting carries its field's length and its
chunk's analysis version (migration 15), and the postings' active-version policy is one hashed
set per statement, so no posting is joined to `text_chunks`; only the `limit` best chunk ids are
joined back for their columns. `stats` and `df` are `MATERIALIZED` (computed once). Inlined, the row-level
security predicates (tenant, active version, per-document ACL) make the planner estimate one row
everywhere and rescan the whole-tenant `stats` aggregate once per posting (21 s instead of 70 ms
for a three-term question over 5,000 chunks).

Both: the tenant is only the `tenant_id` argument (set for the transaction and named in every
statement); a local statement timeout from the step budget; the active-version final check last.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

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
from manifold.query.executors.bm25 import TIE_BREAKER, TITLE_BOOST
from manifold.query.executors.exact import exact_result, normalise_all
from manifold.query.plan import BM25SearchParams, ExactLookupParams
from manifold.query.types import Gap, StepResult, TextHit
from manifold.shared import analysis
from manifold.shared.config import ManifoldSettings, QuerySettings
from manifold.shared.errors import Transient
from manifold.shared.identifiers import find_identifiers
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.pg_text import PG_TEXT_SCHEMA_VERSION, analyze, title_phrase

__all__ = ["BM25_B", "BM25_K1", "BM25_KEPT_SQL", "BM25_SQL", "TIE_BREAKER", "PgBM25Executor",
           "PgExactLookupExecutor", "bm25_arguments", "kept_statistics"]

BM25_K1 = 1.2
BM25_B = 0.75

_TEXT_COLUMNS = ("c.chunk_id, c.document_id, c.version, c.section_id, c.section_title, c.ordinal, c.text, "
                 "c.content_sha256, c.identifiers")

_Q = "q AS (SELECT term, qtf FROM unnest(%(terms)s::text[], %(qtfs)s::int[]) AS q(term, qtf))"
_COMPUTED_STATISTICS = """stats AS MATERIALIZED (
    SELECT count(*) FILTER (WHERE text_length > 0)::float8 AS n_text,
           coalesce(sum(text_length), 0)::float8 AS sum_text,
           count(*) FILTER (WHERE title_length > 0)::float8 AS n_title,
           coalesce(sum(title_length), 0)::float8 AS sum_title
    FROM manifold.text_chunks WHERE tenant_id = %(tenant)s AND serving AND text_schema_version = %(schema)s
), df AS MATERIALIZED (
    SELECT t.field, t.term, count(*)::float8 AS n_t
    FROM manifold.text_terms t
    WHERE t.tenant_id = %(tenant)s AND t.text_schema_version = %(schema)s AND t.term = ANY(%(terms)s::text[])
    GROUP BY t.field, t.term
)"""
_KEPT_STATISTICS = """stats AS MATERIALIZED (
    SELECT %(n_text)s::float8 AS n_text, %(sum_text)s::float8 AS sum_text,
           %(n_title)s::float8 AS n_title, %(sum_title)s::float8 AS sum_title
), df AS MATERIALIZED (
    SELECT field, term, chunks::float8 AS n_t FROM manifold.text_df
    WHERE tenant_id = %(tenant)s AND text_schema_version = %(schema)s AND term = ANY(%(terms)s::text[])
)"""
def _ranked(name: str, postings: str, limit: str) -> str:
    """CTEs `{name}_fields` and `{name}`: the BM25 score of every chunk among `postings` (rows of
    chunk_id, field, tf, field_length, qtf, n_t), best `limit` first (module docstring)."""
    return f"""{name}_fields AS (
    SELECT t.chunk_id, t.field,
           sum(t.qtf * ln(1.0 + (f.n - t.n_t + 0.5) / (t.n_t + 0.5))
               * t.tf * (%(k1)s + 1.0)
               / (t.tf + %(k1)s * (1.0 - %(b)s + %(b)s * f.len / f.avgdl))) AS score
    FROM {postings} t
    CROSS JOIN stats s
    CROSS JOIN LATERAL (SELECT
        CASE t.field WHEN 'text' THEN s.n_text ELSE s.n_title END AS n,
        t.field_length::float8 AS len,
        CASE t.field WHEN 'text' THEN s.sum_text / nullif(s.n_text, 0)
                     ELSE s.sum_title / nullif(s.n_title, 0) END AS avgdl) f
    GROUP BY t.chunk_id, t.field
), {name} AS (
    SELECT chunk_id, greatest(s_text, s_title) + %(tie)s * least(s_text, s_title) AS score
    FROM (SELECT chunk_id,
                 coalesce(max(score) FILTER (WHERE field = 'text'), 0) AS s_text,
                 %(title_boost)s * coalesce(max(score) FILTER (WHERE field = 'title'), 0) AS s_title
          FROM {name}_fields GROUP BY chunk_id) x
    ORDER BY score DESC, chunk_id LIMIT {limit}
)"""


def _postings(name: str, condition: str) -> str:
    """CTE `name`: for each query term and field, the postings that meet `condition` (an SQL
    fragment over `t`, possibly with an ORDER BY / LIMIT tail), as rows `_ranked` reads."""
    return f"""{name} AS (
    SELECT p.chunk_id, df.field, p.tf, p.field_length, q.qtf, df.n_t
    FROM q
    JOIN df ON df.term = q.term
    CROSS JOIN LATERAL (
        SELECT t.chunk_id, t.tf, t.field_length FROM manifold.text_terms t
        WHERE t.tenant_id = %(tenant)s AND t.term = q.term AND t.field = df.field
          AND t.text_schema_version = %(schema)s
          AND {condition}) p
)"""


_BEST_FIRST = """(%(docs)s::text[] IS NULL OR t.document_id = ANY(%(docs)s::text[]))
        ORDER BY manifold.bm25_impact(t.field, t.tf, t.field_length) DESC, t.chunk_id
        LIMIT %(depth)s"""
_SCORE = f"""{_postings("best_postings", _BEST_FIRST)}, {_ranked("candidates", "best_postings", "%(candidates)s")},
{_postings("candidate_postings", "t.chunk_id = ANY(ARRAY(SELECT chunk_id FROM candidates))")},
{_ranked("top", "candidate_postings", "%(limit)s")}
SELECT {_TEXT_COLUMNS}, f.score
FROM top f
JOIN manifold.text_chunks c ON c.tenant_id = %(tenant)s AND c.chunk_id = f.chunk_id
ORDER BY f.score DESC, c.chunk_id
"""

BM25_SQL = f"WITH {_Q}, {_COMPUTED_STATISTICS}, {_SCORE}"
"""The BM25 statement with the statistics computed over what the reader can see (module docstring)."""

BM25_KEPT_SQL = f"WITH {_Q}, {_KEPT_STATISTICS}, {_SCORE}"
"""The same ranking with the statistics maintained at publication (`text_stats`, `text_df`)."""

_READ_STATS = ("SELECT field, chunks, tokens FROM manifold.text_stats "
               "WHERE tenant_id = %(tenant)s AND text_schema_version = %(schema)s")

_INDEX_BY_ID = (
    f"SELECT {_TEXT_COLUMNS} FROM manifold.text_chunks c "
    "WHERE c.tenant_id = %(tenant)s AND c.serving "
    "AND (c.identifiers && %(ids)s::text[] OR c.section_title_terms LIKE ANY(%(phrases)s::text[])) "
    "AND (%(docs)s::text[] IS NULL OR c.document_id = ANY(%(docs)s::text[])) "
    "ORDER BY c.document_id, c.ordinal, c.chunk_id LIMIT %(limit)s"
)
_CHUNKS_BY_ID = (
    f"SELECT {CHUNK_COLUMNS} FROM manifold.serving_chunks c "
    "LEFT JOIN manifold.serving_sections s ON s.tenant_id = c.tenant_id AND s.section_id = c.section_id "
    "WHERE c.tenant_id = %(tenant)s AND (c.identifiers && %(ids)s::text[] OR s.title ILIKE ANY(%(likes)s)) "
    "AND (%(docs)s::text[] IS NULL OR c.document_id = ANY(%(docs)s)) "
    "ORDER BY c.document_id, c.ordinal, c.chunk_id LIMIT %(limit)s"
)
_RECORDS_BY_NUMBER = (
    "SELECT record_id, document_id, version, record_type, number, counterparty_name, issued_on, currency, "
    "status, chunk_id FROM manifold.serving_records "
    "WHERE tenant_id = %(tenant)s AND number = ANY(%(ids)s) "
    "AND (%(docs)s::text[] IS NULL OR document_id = ANY(%(docs)s)) "
    "ORDER BY number, document_id, record_id LIMIT %(limit)s"
)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _set_timeout(conn: psycopg.Connection[Any], timeout_s: float, settings: QuerySettings) -> None:
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(pg_timeout_ms(timeout_s, settings)),))


class _Timeouts:
    """Maps a cancelled statement to `TimeoutError` (the engine's step timeout)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and issubclass(exc_type, psycopg.errors.QueryCanceled):
            raise TimeoutError("postgres text index: statement exceeded the step timeout") from exc


def bm25_arguments(tenant_id: str, counts: Counter[str], *, limit: int, settings: QuerySettings,
                   docs: list[str] | None = None) -> dict[str, Any]:
    """The parameters of `BM25_SQL` / `BM25_KEPT_SQL` (without the kept statistics) for the
    analysed query `counts` (term -> occurrences)."""
    return {"tenant": tenant_id, "terms": list(counts), "qtfs": list(counts.values()), "docs": docs,
            "k1": BM25_K1, "b": BM25_B, "title_boost": TITLE_BOOST, "tie": TIE_BREAKER,
            "limit": limit, "schema": PG_TEXT_SCHEMA_VERSION, "depth": settings.bm25_postings_depth,
            "candidates": max(settings.bm25_candidates, limit)}


def kept_statistics(conn: psycopg.Connection[Any], tenant_id: str) -> dict[str, float] | None:
    """The collection statistics kept at publication (migration 14), as `BM25_KEPT_SQL`'s
    parameters; None when the reader may not use them (something in the tenant is hidden from
    the transaction's principal, so row-level security shows no row) or the tenant has none."""
    found = {field: (float(n), float(total)) for field, n, total in
             conn.execute(_READ_STATS, {"tenant": tenant_id, "schema": PG_TEXT_SCHEMA_VERSION}).fetchall()}
    if not found:
        return None
    text, title = found.get("text", (0.0, 0.0)), found.get("title", (0.0, 0.0))
    return {"n_text": text[0], "sum_text": text[1], "n_title": title[0], "sum_title": title[1]}


class PgBM25Executor:
    """BM25 over the tenant's serving chunks in the PostgreSQL text index (module docstring).

    `db` must connect as the query role (`settings.postgres.query_conninfo()`)."""

    def __init__(self, db: TenantConnections, settings: QuerySettings) -> None:
        self._db = db
        self._settings = settings

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> PgBM25Executor:
        return cls(TenantConnections(settings.postgres.query_conninfo()), settings.query)

    def run(self, params: BM25SearchParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        docs = require_list(params.document_ids, "document_ids")
        if docs == []:
            return StepResult(result={"dropped_inactive": 0}, gaps=(
                Gap(kind="missing_data", step=None, detail="bm25: no documents in scope"),))
        counts = Counter(analysis.query_terms(params.query) if self._settings.bm25_join_adjacent_words
                         else analysis.terms(params.query))
        clock = StoreClock()
        rows: list[tuple[Any, ...]] = []
        with clock, self._db.transaction(tenant_id, snapshot=True) as conn, _Timeouts():
            statistics = "none"
            if counts:
                _set_timeout(conn, timeout_s, self._settings)
                args = bm25_arguments(tenant_id, counts, limit=params.limit, settings=self._settings, docs=docs)
                held = kept_statistics(conn, tenant_id)
                statistics = "kept" if held is not None else "computed"
                rows = conn.execute(BM25_SQL if held is None else BM25_KEPT_SQL, {**args, **(held or {})}).fetchall()
            hits = [hit_from_row(r, source_kind="bm25", rank=i, score=float(r[9]))
                    for i, r in enumerate(rows, start=1)]
            kept, dropped = final_check(conn, tenant_id, hits)
        kept = [h.model_copy(update={"rank": i}) for i, h in enumerate(kept, start=1)]
        at = now_utc()
        return StepResult(
            outputs={"identifiers": unique(i for h in kept for i in h.identifiers),
                     "document_ids": unique(h.document_id for h in kept)},
            evidence=tuple(chunk_evidence(h, tenant_id=tenant_id, store="postgres", retrieved_at=at) for h in kept),
            hits=tuple(kept), rows=len(hits), store_ms=clock.ms,
            result={"dropped_inactive": dropped, "timed_out": False, "terms": list(counts),
                    "statistics": statistics},
        )


class PgExactLookupExecutor:
    """Exact identifier lookup over the PostgreSQL text index and relational tables (module
    docstring); same normalisation, verification and order as `exact.ExactLookupExecutor`."""

    def __init__(self, db: TenantConnections, settings: QuerySettings) -> None:
        self._db = db
        self._settings = settings

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> PgExactLookupExecutor:
        return cls(TenantConnections(settings.postgres.query_conninfo()), settings.query)

    def run(self, params: ExactLookupParams, *, tenant_id: str, timeout_s: float,
            document_ids: Sequence[str] | None = None) -> StepResult:
        raw = require_list(params.identifiers, "identifiers") or []
        ids, unrecognised = normalise_all(raw)
        docs = require_list(document_ids, "document_ids") if document_ids is not None else None
        if not ids:
            return StepResult(result={"identifiers": [], "unrecognised": unrecognised, "dropped_inactive": 0})
        clock = StoreClock()
        fetch = min(2 * params.limit, 200)
        hits: dict[str, TextHit] = {}
        records: list[dict[str, Any]] = []
        gaps: list[Gap] = []
        failures: list[str] = []
        sources = [s for s in ("elasticsearch", "postgres") if s in params.sources]
        for source in sources:
            try:
                found, recs = self._search(source, ids, tenant_id, timeout_s, fetch, params.limit, docs, clock)
            except Transient as exc:
                failures.append(f"{source}: {exc}")
                continue
            for hit in found:
                hits.setdefault(hit.chunk_id, hit)
            records = records or recs
        if failures and len(failures) == len(sources):
            raise Transient("exact lookup failed in every source: " + "; ".join(failures))
        gaps.extend(Gap(kind="degraded", step=None, detail=f"exact lookup: {f}") for f in failures)

        return exact_result(self._db, tenant_id=tenant_id, ids=ids, unrecognised=unrecognised,
                            hits={cid: (h, "postgres") for cid, h in hits.items()}, records=records, gaps=gaps,
                            limit=params.limit, clock=clock)

    def _search(self, source: str, ids: list[str], tenant_id: str, timeout_s: float, size: int, limit: int,
                docs: list[str] | None, clock: StoreClock) -> tuple[list[TextHit], list[dict[str, Any]]]:
        args: dict[str, Any] = {"tenant": tenant_id, "ids": ids, "docs": docs, "limit": size}
        records: list[dict[str, Any]] = []
        with clock, self._db.transaction(tenant_id, snapshot=True) as conn, _Timeouts():
            _set_timeout(conn, timeout_s, self._settings)
            if source == "elasticsearch":  # the text index plays the Elasticsearch role
                phrases = ["%" + _like_escape(title_phrase(t)) + "%" for t in (analyze(i) for i in ids) if t]
                rows = conn.execute(_INDEX_BY_ID, {**args, "phrases": phrases}).fetchall()
            else:
                rows = conn.execute(_CHUNKS_BY_ID, {**args, "likes": [f"%{i}%" for i in ids]}).fetchall()
                with conn.cursor(row_factory=dict_row) as cur:
                    records = cur.execute(_RECORDS_BY_NUMBER, {**args, "limit": limit}).fetchall()
        hits = []
        for row in rows:
            hit_ids = unique([*(row[8] or ()), *find_identifiers(row[4] or "")])
            if set(ids) & set(hit_ids):  # a title phrase match must carry the identifier itself
                hits.append(hit_from_row(row, source_kind="exact", rank=1, score=None, identity=True,
                                         identifiers=hit_ids))
        return hits, records

