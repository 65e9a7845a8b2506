"""`hybrid_search`: BM25 + vector (+ exact, when identifiers are given) fused into one ranking.

Guarantees of `HybridExecutor.run(params, *, tenant_id, timeout_s)`:
- The branches run in parallel on long-lived threads owned by the executor (`close()` stops
  them), each with `params.candidates` depth, the same tenant, the same `document_ids` scope
  and the step's timeout; each branch applies its own tenant filters and active-version check.
- A branch that raises (including `Transient` and timeouts) does not fail the step: the others
  still fuse and a `Gap(kind="degraded", detail="<branch> branch failed: ...")` is returned; a
  branch still running `_GRACE_S` after the step budget counts as failed ("timed out"). Only
  if every branch fails is `Transient` raised.
- Fusion is `manifold.query.fusion.fuse` with the method of
  `settings.fusion_method[params.query_class]` (else `["default"]`): weighted RRF with
  `k = settings.rrf_k` and `settings.rrf_weights[class]`, or normalised score fusion (min-max or
  z-score) with `settings.score_weights[class]`, with `settings.fusion_document_support`; then
  union, dedup (chunk id, content hash, overlap), identity hits first, per-document cap. The
  first `_TERM_POOL` fused chunks (with `params.terms`, the technical identifiers the question
  names, also the terms branch's hits that hold one) are then ordered by `query.pool.arrange`:
  navigation (tables of contents) after content, chunks holding more of the terms literally
  first, the best two fused content chunks kept; then `params.limit` are kept. Before that, a
  table of contents among the best fused hits whose entry matches the question is followed
  (`query.contents`): one BM25 search of the entry within its document, after the branches and
  within the step budget, and the section that holds the entry joins the pool at the contents'
  place; and a document the question names by its file name (`query.named`: "openssl verify",
  "the Artistic license") that has at most one chunk among the first `params.limit` gets its
  best other passage for the question, from one BM25 search within it, third in the pool; and a
  table chunk among the BM25 and vector branches' hits whose best row holds enough of the
  question's words (`query.rows`) joins the pool third when it is not already shown, and a prose
  chunk among them whose one sentence holds at least half of the question's content words
  (`query.sentences`) joins it fourth when it is not already shown.
  `result["contents"]` lists what was followed (a failed search follows nothing).
  `result["fusion"]` names the method used.
- Output hits carry the fused rank and score; each evidence item carries every branch's original
  rank in `claims["ranks"]`, the branches in `routes`, and merged duplicate ids in
  `claims["duplicates"]`. Record evidence from the exact branch follows the chunk evidence.
- A final active-version check runs on the fused hits; `result["dropped_inactive"]` counts the
  branches' drops plus the final one's. `store_ms` is the sum of the branches' store time plus
  the final check (branches overlap in time, so it can exceed the step's wall time).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from manifold.query import contents, named, rows, sentences
from manifold.query.evidence import StoreClock, chunk_evidence, final_check, now_utc, require_list, unique
from manifold.query.executors.vector import VectorExecutor
from manifold.query.fusion import Fused, fuse
from manifold.query.plan import BM25SearchParams, ExactLookupParams, HybridSearchParams, VectorSearchParams
from manifold.query.pool import arrange, lift, with_term_hits
from manifold.query.types import Evidence, StepResult
from manifold.shared.config import QuerySettings
from manifold.shared.errors import Transient
from manifold.shared.stores.pg_connections import TenantConnections

_BRANCH_LIMIT = 100  # LIMIT_CAP of the per-operator params
_BRANCHES = 3
_CONCURRENT_STEPS = 2
_GRACE_S = 0.5
"""Beyond the step budget, how long to wait for a branch before calling it timed out (each
store call is already bounded by its own timeout)."""


_TERM_POOL = 30
"""How many fused candidates `query.pool.arrange` orders before the step's `limit` is taken."""


def fusion_choice(settings: QuerySettings, query_class: str) -> tuple[str, dict[str, float]]:
    """(method, branch weights) for a query class: `fusion_method` (else its `default`), then
    `rrf_weights` for RRF or `score_weights` for a normalised method (else their `default`)."""
    method = settings.fusion_method.get(query_class) or settings.fusion_method.get("default", "rrf")
    table = settings.rrf_weights if method == "rrf" else settings.score_weights
    return method, table.get(query_class) or table["default"]


class ExactBranch(Protocol):
    """The exact branch: `exact.ExactLookupExecutor` (Elasticsearch) or `pg_lexical.PgExactLookupExecutor`."""

    def run(self, params: ExactLookupParams, *, tenant_id: str, timeout_s: float,
            document_ids: Sequence[str] | None = None) -> StepResult: ...


class BM25Branch(Protocol):
    """The BM25 branch: `bm25.BM25Executor` (Elasticsearch) or `pg_lexical.PgBM25Executor`."""

    def run(self, params: BM25SearchParams, *, tenant_id: str, timeout_s: float) -> StepResult: ...


class HybridExecutor:
    """Parallel exact/BM25/vector branches and their fusion (see module docstring)."""

    def __init__(self, exact: ExactBranch, bm25: BM25Branch, vector: VectorExecutor,
                 db: TenantConnections, settings: QuerySettings) -> None:
        self._exact = exact
        self._bm25 = bm25
        self._vector = vector
        self._db = db
        self._settings = settings
        self._pool: ThreadPoolExecutor | None = None

    def _threads(self) -> ThreadPoolExecutor:
        """Long-lived branch threads (created on first use, never at construction), so each keeps
        its per-thread PostgreSQL connection across calls instead of reconnecting every time."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=_BRANCHES * _CONCURRENT_STEPS, thread_name_prefix="hybrid")
        return self._pool

    def close(self) -> None:
        """Stop the branch threads (running branches finish; nothing new starts)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _follow_contents(self, hits: Sequence[Fused], query: str, tenant_id: str,
                         deadline: float) -> tuple[list[dict[str, Any]], list[Fused]]:
        """The fused hits with the sections that the tables of contents among them list for the
        question (`query.contents`), each found by a BM25 search of the entry within its
        document; what was followed, for the trace. A failed or late search follows nothing."""
        out, followed = list(hits), list[dict[str, Any]]()
        for toc, entry in contents.leads(out, query):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                found = self._bm25.run(BM25SearchParams(query=entry[:1000], limit=5,
                                                        document_ids=[toc.hit.document_id]),
                                       tenant_id=tenant_id, timeout_s=remaining)
            except Exception as exc:  # following is a refinement: the pool stands without it
                followed.append({"document_id": toc.hit.document_id, "entry": entry,
                                 "error": f"{type(exc).__name__}: {exc}"})
                continue
            section = contents.section_for(found.hits, entry)
            followed.append({"document_id": toc.hit.document_id, "entry": entry,
                             "chunk_id": section.chunk_id if section else None})
            if section is not None:
                out = contents.placed(out, toc, section)
        return followed, out

    def _follow_named(self, hits: list[Fused], query: str, document_id: str, tenant_id: str,
                      deadline: float, limit: int) -> tuple[dict[str, Any], list[Fused]]:
        """The fused hits with the best passage of a document the question names by its file name
        (`query.named`) at `named.NAMED_AT`, found by a BM25 search of the question within that
        document; what was searched, for the trace. A failed or late search adds nothing."""
        trace: dict[str, Any] = {"document_id": document_id, "named": True}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return {**trace, "error": "no time left"}, hits
        try:
            found = self._bm25.run(BM25SearchParams(query=query[:1000], limit=5, document_ids=[document_id]),
                                   tenant_id=tenant_id, timeout_s=remaining)
        except Exception as exc:  # a refinement: the pool stands without it
            return {**trace, "error": f"{type(exc).__name__}: {exc}"}, hits
        passage = named.passage_for(found.hits, query, document_id, (f.hit.chunk_id for f in hits[:limit]))
        if passage is None:
            return {**trace, "chunk_id": None}, hits
        return {**trace, "chunk_id": passage.chunk_id}, lift(hits, named.NAMED_AT, passage, "named")

    def run(self, params: HybridSearchParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        docs = require_list(params.document_ids, "document_ids")
        ids = require_list(params.identifiers, "identifiers") or []
        depth = min(params.candidates, _BRANCH_LIMIT)
        calls: dict[str, Any] = {
            "bm25": lambda: self._bm25.run(
                BM25SearchParams(query=params.query, limit=depth, document_ids=docs),
                tenant_id=tenant_id, timeout_s=timeout_s),
            "vector": lambda: self._vector.run(
                VectorSearchParams(query=params.query, limit=depth, document_ids=docs),
                tenant_id=tenant_id, timeout_s=timeout_s),
        }
        if params.terms:
            calls["terms"] = lambda: self._bm25.run(
                BM25SearchParams(query=" ".join(params.terms)[:1000], limit=depth, document_ids=docs),
                tenant_id=tenant_id, timeout_s=timeout_s)
        if ids:
            calls["exact"] = lambda: self._exact.run(
                ExactLookupParams(identifiers=ids, limit=depth), tenant_id=tenant_id, timeout_s=timeout_s,
                document_ids=docs)
        results: dict[str, StepResult] = {}
        failed: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s + _GRACE_S
        futures = {name: self._threads().submit(contextvars.copy_context().run, call)  # the reader's scope
                   for name, call in calls.items()}
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                future.cancel()
                failed[name] = f"timed out after {timeout_s:.2f}s"
            except Exception as exc:  # a branch failure degrades the step, never fails it
                failed[name] = f"{type(exc).__name__}: {exc}"
        anchored = results.pop("terms", None)
        if not results:
            raise Transient("hybrid search: every branch failed: " +
                            "; ".join(f"{b}: {r}" for b, r in failed.items()))
        method, weights = fusion_choice(self._settings, params.query_class)
        depth_out = max(params.limit, _TERM_POOL)
        fusion = fuse({b: r.hits for b, r in results.items()}, k=self._settings.rrf_k, weights=weights,
                      per_document_cap=params.per_document_cap, limit=depth_out, failed=failed, method=method,
                      document_support=self._settings.fusion_document_support)
        followed, fusion_hits = self._follow_contents(fusion.hits, params.query, tenant_id, deadline - _GRACE_S)
        found_docs = unique([*(f.hit.document_id for f in fusion_hits),
                             *(h.document_id for r in results.values() for h in r.hits)])
        shown = [f.hit.document_id for f in fusion_hits[:params.limit]]
        for doc in named.named(params.query, found_docs):
            if shown.count(doc) > named.SHOWN_ENOUGH:
                continue  # the named document already has its passages in the evidence
            searched, fusion_hits = self._follow_named(fusion_hits, params.query, doc, tenant_id,
                                                       deadline - _GRACE_S, params.limit)
            followed.append(searched)
        branches = [r.hits for b, r in results.items() if b in ("bm25", "vector")]
        row = rows.row_hit(rows.branch_order(branches), params.query,
                           (f.hit.chunk_id for f in fusion_hits[:params.limit]))
        if row is not None:  # a table whose one row says what is asked (`query.rows`): no search, no I/O
            fusion_hits = lift(fusion_hits, rows.ROW_AT, row, "row")
            followed.append({"document_id": row.document_id, "row": True, "chunk_id": row.chunk_id})
        line = sentences.sentence_hit(branches, params.query, (f.hit.chunk_id for f in fusion_hits[:params.limit]))
        if line is not None:  # a passage whose one sentence says what is asked (`query.sentences`): no I/O
            fusion_hits = lift(fusion_hits, sentences.SENTENCE_AT, line, "sentence")
            followed.append({"document_id": line.document_id, "sentence": True, "chunk_id": line.chunk_id})
        fused = arrange(with_term_hits(fusion_hits, anchored.hits if anchored else (), params.terms),
                        params.terms, limit=params.limit, per_document_cap=params.per_document_cap,
                        query=params.query)
        clock = StoreClock()
        with clock, self._db.transaction(tenant_id) as conn:
            checked, dropped = final_check(conn, tenant_id, [f.hit for f in fused])
        active_ids = {h.chunk_id for h in checked}
        kept = [f for f in fused if f.hit.chunk_id in active_ids]
        stores = {e.chunk_id: e.store for r in results.values() for e in r.evidence if e.chunk_id}
        at = now_utc()
        evidence: list[Evidence] = []
        hits = []
        for rank, f in enumerate(kept, start=1):
            hit = f.hit.model_copy(update={"rank": rank})
            hits.append(hit)
            claims: dict[str, Any] = {"ranks": dict(f.ranks), "fused_score": round(f.score, 6)}
            if f.merged_ids:
                claims["duplicates"] = list(f.merged_ids)
            evidence.append(chunk_evidence(hit, tenant_id=tenant_id, store=stores.get(hit.chunk_id, "postgres"),
                                           retrieved_at=at, routes=tuple(f.ranks), claims=claims))
        if "exact" in results:
            evidence += [e for e in results["exact"].evidence if e.kind == "record"]
        gaps = [*fusion.gaps, *(g for r in results.values() for g in r.gaps)]
        kept_docs = {h.document_id for h in hits}
        return StepResult(
            outputs={"identifiers": unique(i for h in hits for i in h.identifiers),
                     "document_ids": unique(h.document_id for h in hits)},
            evidence=tuple(evidence), hits=tuple(hits), gaps=tuple(gaps),
            rows=sum(r.rows for r in results.values()),
            store_ms=sum(r.store_ms for r in results.values()) + clock.ms,
            result={
                "branches": {b: len(r.hits) for b, r in results.items()},
                "failed_branches": sorted(failed),
                "fusion": method,
                "vector_mode": results["vector"].result.get("vector_mode") if "vector" in results else None,
                "candidates": fusion.candidates, "deduplicated": fusion.deduplicated, "capped": fusion.capped,
                "documents": [{"document_id": d.document_id, "version": d.version, "score": round(d.score, 6),
                               "chunk_ids": list(d.chunk_ids)}
                              for d in fusion.documents if d.document_id in kept_docs],
                "contents": followed,
                "dropped_inactive": dropped + sum(int(r.result.get("dropped_inactive", 0)) for r in results.values()),
            },
        )
