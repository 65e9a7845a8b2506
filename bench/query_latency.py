"""Query latency over the Kafka request/reply topics vs the raw store calls, and pgvector recall.

On one tenant (default `bench-q50k`, ≥ 50,000 active chunks from `ingest.sample_corpus`, loaded
by `bench/bulk_load.py` — the stage handlers in-process, reused across runs):

1. **Per route.** A query worker (`query.worker.serve(settings, stop, build_answerer(settings))`,
   a background thread of this process, on topics unique to this run) answers requests sent
   with `query.request_client.QueryClient`. Each operator route is an explicit one-step plan (so it
   exercises exactly that executor); each request is paired, in the same iteration, with the
   RAW store call of the same operation — the same ES query body / SQL / Cypher the executor
   sends, issued directly with the store client and timed around the client call only:

   | route | raw call(s) timed |
   |---|---|
   | exact_lookup | ES `terms`+title-phrase search, then the PostgreSQL records-by-number statement — summed (the executor reads chunks from PostgreSQL only when ES fails) |
   | bm25_search | ES `search` with `bm25_query(...)` (the route also fetches term statistics for terms unseen in 30 s, `bm25_weights`) |
   | vector_search | the HNSW SQL (`hnsw.ef_search` set), query vector embedded beforehand (not timed; `raw_with_query_embedding` adds one timed `encode` of the text) |
   | hybrid_search | raw bm25 (size=candidates) + raw HNSW (limit=candidates), run one after the other — summed (`raw_with_query_embedding` as for vector) |
   | metric_query | the template's three statements (totals, summary, evidence) in one REPEATABLE READ transaction |
   | graph_expand | `execute_read` of the Cypher template with the same parameters |

   The route time is wall clock around `client.ask` (produce → worker → reply consumed); the
   worker's own `trace.elapsed_ms` is recorded beside it. Routed natural-language questions
   (one list per intent class) are timed too; they have no single raw counterpart.
2. **Recall.** `VectorExecutor.search_vector(..., mode="hnsw", ef_search=ef)` against
   `exact_neighbours(...)` (same tenant filter) for ≥ 100 query texts at several `ef_search`
   values: recall@10 by chunk id, a tie-tolerant recall (HNSW hits whose distance is within
   1e-6 of the exact 10th distance count as correct; the corpus is templated, so equal
   distances are common), and the latency of each mode.

Writes bench/results/query_latency.json (machine, commit, dataset size, n per route, numbers).

Usage:
  .venv/bin/python bench/bulk_load.py --docs 25000          # once (resumable; ~2 chunks/doc)
  .venv/bin/python bench/query_latency.py --no-load [--n 200] [--recall-queries 120]
  (`--docs N` without --no-load first tops the tenant up to N documents with the bulk loader.)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

# ---------------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100, linear interpolation between order statistics), None if empty."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError("q must be within 0..100")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def summarise(values_ms: Sequence[float]) -> dict[str, Any]:
    """n, p50, p95, mean, min, max of a latency sample in milliseconds (rounded to 0.01 ms)."""
    if not values_ms:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "mean_ms": None, "min_ms": None, "max_ms": None}

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {"n": len(values_ms), "p50_ms": r(percentile(values_ms, 50)), "p95_ms": r(percentile(values_ms, 95)),
            "mean_ms": r(float(np.mean(values_ms))), "min_ms": r(min(values_ms)), "max_ms": r(max(values_ms))}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator rounded to 0.01, None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, 2)


# ---------------------------------------------------------------------------------- inputs

_TOPIC_QUERIES = [
    "how often must the {p} be calibrated",
    "calibration certificates for the {p}",
    "late delivery penalty for {p} orders",
    "return a damaged {p}",
    "warranty period of the {p} and what it excludes",
    "isolate power before servicing the {p}",
    "lockout procedures audit for {p} installation",
    "defective {p} replaced free of charge",
]
_BM25_TERMS = ["calibration bench", "lockout procedures", "late delivery penalty", "warranty wear parts",
               "damaged goods returned", "differential pressure", "incorrect installation", "purchase order",
               "certificates five years", "inspection defective", "site visit", "approved vendor"]

NL_QUESTIONS: dict[str, list[str]] = {
    "exact_lookup": ["Find invoice {inv}", "Show purchase order {po}", "What is contract {ctr}?"],
    "lexical": ['Which documents mention "lockout procedures"?', 'documents mentioning "calibration bench"',
                'Find the exact phrase "late delivery"'],
    "semantic": ["How often does the pressure sensor need calibrating?",
                 "What happens if a delivery is late?", "Can I send back broken goods?"],
    "aggregate": ["What was the total spend with Supplier Beta in 2026?",
                  "How much did we spend with Acme Sensors Ltd in 2026?",
                  "Total spend with Omega Valves Inc in March 2026"],
    "relationship": ["Which suppliers are approved vendors for Company A?",
                     "Which products does Supplier Gamma supply?",
                     "Who are the approved vendors of Northwind Traders?"],
}


def text_queries(n: int, seed: int) -> list[str]:
    from manifold.ingest.sample_corpus import PRODUCTS

    combos = [t.format(p=name) for t in _TOPIC_QUERIES for _, name, _ in PRODUCTS]
    random.Random(seed).shuffle(combos)
    return [combos[i % len(combos)] for i in range(n)]


# ---------------------------------------------------------------------------------- the run


class Bench:
    """Holds the store clients (raw side), the query client (route side) and the worker thread."""

    def __init__(self, settings: Any, tenant: str, seed: int) -> None:
        import neo4j
        from elasticsearch import Elasticsearch

        from manifold.query.composition import build_answerer
        from manifold.query.executors.vector import VectorExecutor
        from manifold.query.request_client import QueryClient, mint_dev_token
        from manifold.query.worker import serve
        from manifold.shared.embedding import SentenceTransformerEmbedder
        from manifold.shared.stores.pg_connections import TenantConnections

        run = uuid.uuid4().hex[:8]
        q = settings.query.model_copy(update={
            "request_topic": f"bench.query.requests.{run}", "reply_topic": f"bench.query.replies.{run}",
            "metrics_port": 0})
        self.settings = settings.model_copy(update={"query": q})
        self.tenant = tenant
        self.rng = random.Random(seed)
        self.seed = seed
        self.run_id = run
        self.exact_timeout_ms = settings.query.statement_timeout_ms
        self.n_override: dict[str, int] = {}
        # raw side: the same kinds of clients the executors use, as the same roles
        self.pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
        self.es = Elasticsearch(settings.elasticsearch.url, request_timeout=30)
        self.driver = neo4j.GraphDatabase.driver(settings.neo4j.uri, auth=(
            settings.neo4j.user, settings.neo4j.password.get_secret_value()))
        self.embedder = SentenceTransformerEmbedder()
        self.embedder.warm_up()
        self.vector = VectorExecutor(self.pg, self.embedder, settings.query)
        # route side: a worker in a background thread, a client on this run's topics
        self.stop = threading.Event()
        self.answerer = build_answerer(self.settings)
        self.worker = threading.Thread(target=serve, args=(self.settings, self.stop, self.answerer),
                                       kwargs={"threads": 1, "group_id": f"bench.query.{run}"}, daemon=True,
                                       name="bench-query-worker")
        self.worker.start()
        self.client = QueryClient(self.settings, token=mint_dev_token(self.settings, tenant, "bench"))

    def close(self) -> None:
        self.client.close()
        self.stop.set()
        self.worker.join(30)
        self.answerer.close()
        self.es.close()
        self.driver.close()

    # ------------------------------------------------------------------ data-derived inputs

    def identifiers(self) -> dict[str, list[str]]:
        with self.pg.transaction(self.tenant, snapshot=True) as conn:
            rows = conn.execute("SELECT record_type, number FROM manifold.serving_records "
                                "WHERE tenant_id = %s AND number IS NOT NULL", (self.tenant,)).fetchall()
            codes = conn.execute("SELECT DISTINCT unnest(identifiers) FROM manifold.serving_chunks "
                                 "WHERE tenant_id = %s AND document_id LIKE 'contracts/%%' LIMIT 5000",
                                 (self.tenant,)).fetchall()
        by_type: dict[str, list[str]] = {}
        for rtype, number in rows:
            by_type.setdefault(rtype, []).append(number)
        by_type["contract_ids"] = sorted(c[0] for c in codes if str(c[0]).startswith("CTR-"))
        for values in by_type.values():
            values.sort()
        return by_type

    def entities(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self.driver.session(default_access_mode="READ") as session:
            for label in ("Company", "Supplier"):
                out[label] = sorted(r["id"] for r in session.run(
                    f"MATCH (e:Entity:{label} {{tenant_id: $t}}) RETURN e.entity_id AS id", t=self.tenant))
        return out

    # ------------------------------------------------------------------ one route

    def ask_plan(self, operator: str, params: dict[str, Any]) -> tuple[float, Any]:
        plan = {"steps": [{"id": "s1", "operator": operator, "params": params}]}
        return self._ask(plan=plan)

    def ask_question(self, question: str) -> tuple[float, Any]:
        return self._ask(question=question)

    def _ask(self, **kwargs: Any) -> tuple[float, Any]:
        from manifold.query.request_client import QueryTimeout

        t = time.perf_counter()
        try:
            reply = self.client.ask(deadline_ms=30_000, **kwargs)
        except QueryTimeout:
            reply = _NoReply()
        return (time.perf_counter() - t) * 1000, reply

    # raw calls: each returns the milliseconds spent inside the store client call(s)

    def raw_exact(self, ids: list[str], limit: int = 20) -> float:
        from psycopg.rows import dict_row

        from manifold.query.executors import exact as ex
        from manifold.shared.stores.es_mapping import ES_ALIAS
        from manifold.shared.stores.serving import es_active_filter

        fetch = min(2 * limit, 200)
        should: list[dict[str, Any]] = [{"terms": {"identifiers": ids}}]
        should += [{"match_phrase": {"section_title.text": i}} for i in ids]
        query = {"bool": {"filter": es_active_filter(self.tenant), "should": should, "minimum_should_match": 1}}
        t = time.perf_counter()
        self.es.search(index=ES_ALIAS, query=query, size=fetch, timeout="30000ms",
                       sort=[{"document_id": "asc"}, {"ordinal": "asc"}, {"chunk_id": "asc"}])
        ms = (time.perf_counter() - t) * 1000
        args = {"tenant": self.tenant, "ids": ids, "likes": [f"%{i}%" for i in ids], "docs": None, "limit": fetch}
        with self.pg.transaction(self.tenant) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(self.exact_timeout_ms),))
            t = time.perf_counter()
            with conn.cursor(row_factory=dict_row) as cur:  # chunks come from ES (PostgreSQL's only if it fails)
                cur.execute(ex._RECORDS_BY_NUMBER, {**args, "limit": limit}).fetchall()  # noqa: SLF001 - the executor's own SQL
            ms += (time.perf_counter() - t) * 1000
        return ms

    def raw_bm25(self, text: str, size: int = 10) -> float:
        from manifold.query.executors.bm25 import bm25_query
        from manifold.shared.stores.es_mapping import ES_ALIAS

        body = bm25_query(text, self.tenant, None)
        t = time.perf_counter()
        self.es.search(index=ES_ALIAS, query=body, size=size, timeout="30000ms",
                       sort=["_score", {"chunk_id": "asc"}], track_scores=True)
        return (time.perf_counter() - t) * 1000

    def raw_encode(self, text: str) -> float:
        """One query embedding with the bundled model, as the vector executor makes it."""
        t = time.perf_counter()
        self.embedder.encode([text])
        return (time.perf_counter() - t) * 1000

    def raw_hnsw(self, vector: Sequence[float], limit: int = 10, ef_search: int = 100) -> float:
        from manifold.query.executors import vector as vx

        args = {"tenant": self.tenant, "v": np.asarray(vector, dtype=np.float32), "docs": None, "limit": limit,
                "config": "primary"}
        with self.pg.transaction(self.tenant, snapshot=True) as conn:
            conn.execute("SELECT set_config('statement_timeout', '30000', true)")
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                         "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (str(ef_search),))
            t = time.perf_counter()
            conn.execute(vx._HNSW, args).fetchall()  # noqa: SLF001 - the executor's own SQL
            return (time.perf_counter() - t) * 1000

    def explain_hnsw(self, vector: Sequence[float], ef_search: int = 100) -> list[str]:
        """The plan nodes PostgreSQL chooses for the executor's HNSW statement (is the index used?)."""
        from manifold.query.executors import vector as vx

        args = {"tenant": self.tenant, "v": np.asarray(vector, dtype=np.float32), "docs": None, "limit": 10,
                "config": "primary"}
        with self.pg.transaction(self.tenant, snapshot=True) as conn:
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                         "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (str(ef_search),))
            lines = [r[0] for r in conn.execute("EXPLAIN " + vx._HNSW, args).fetchall()]  # noqa: SLF001 - the executor's own SQL
        return [ln.strip().lstrip("-> ").split("  (")[0] for ln in lines if "Scan" in ln or "Limit" in ln]

    def raw_metric(self, metric: str, where: dict[str, Any]) -> float:
        from psycopg.rows import dict_row

        from manifold.query.executors.metric import template_for
        from manifold.query.plan import MetricQueryParams

        params = MetricQueryParams.model_validate({"metric": metric, "where": where})
        template = template_for(metric)
        bound = template.binder(params.where, self.tenant)
        ms = 0.0
        with self.pg.transaction(self.tenant, snapshot=True) as conn:
            # the executor's own session settings (query/executors/metric.py): no nested loops
            conn.execute("SELECT set_config('statement_timeout', '30000', true), "
                         "set_config('enable_nestloop', 'off', true)")
            for text in template.queries.values():
                with conn.cursor(row_factory=dict_row) as cur:
                    t = time.perf_counter()
                    cur.execute(text, bound).fetchall()
                    ms += (time.perf_counter() - t) * 1000
        return ms

    def raw_graph(self, from_ids: list[str], relation: str, direction: str = "out", hops: int = 1,
                  cap: int = 50) -> float:
        import neo4j

        from manifold.query.executors.graph import PATHS_PER_TARGET, TEMPLATES
        from manifold.shared.stores.serving import serving_params

        params = {"tenant": self.tenant, "from_ids": sorted(from_ids), "types": [relation], "start": None,
                  "end": None, "limit": cap + 1, "paths_per_target": PATHS_PER_TARGET,
                  **serving_params(self.tenant)}  # the reader's ACL parameters, as the executor binds them
        text = TEMPLATES[(direction, hops)]

        def work(tx: Any) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(text, params)]

        with self.driver.session(default_access_mode=neo4j.READ_ACCESS) as session:
            t = time.perf_counter()
            session.execute_read(neo4j.unit_of_work(timeout=30.0)(work))
            return (time.perf_counter() - t) * 1000


def _status_counts(replies: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in replies:
        out[r.status] = out.get(r.status, 0) + 1
    return out


def measure_routes(b: Bench, n: int, warmup: int, only: Sequence[str] | None = None) -> dict[str, Any]:
    from tqdm import tqdm

    ids = b.identifiers()
    ents = b.entities()
    rng = b.rng
    texts = text_queries(max(n, 50), b.seed)
    vectors = b.embedder.encode(texts)
    invoices, orders = ids.get("invoice", []), ids.get("order", [])
    suppliers = ["Supplier Beta", "Supplier Gamma", "Acme Sensors Ltd", "Delta Controls GmbH", "Omega Valves Inc"]
    companies = ["Company A", "Northwind Traders", "Contoso Manufacturing", "Fabrikam Industries"]
    products = [f"PRD-{400 + i}" for i in range(12)]

    def exact_input(i: int) -> list[str]:
        pool = [invoices, orders, products, ids.get("contract_ids", [])][i % 4] or invoices
        return [rng.choice(pool)]

    def metric_input(i: int) -> tuple[str, dict[str, Any]]:
        kind = i % 3
        if kind == 0:
            return "total_spend", {"supplier_names": [suppliers[i % 5]],
                                   "period": {"start": "2026-01-01", "end": "2027-01-01"}}
        if kind == 1:
            return "total_spend", {"company_names": [companies[i % 4]], "product_codes": [products[i % 12]]}
        return "unit_price_on", {"product_codes": [products[i % 12]], "on": "2026-06-30"}

    def graph_input(i: int) -> tuple[list[str], str]:
        if i % 2 == 0 and ents.get("Supplier"):
            return [ents["Supplier"][i // 2 % len(ents["Supplier"])]], "SUPPLIES"
        return [ents["Company"][i // 2 % len(ents["Company"])]], "APPROVED_VENDOR"

    def paired(ask: Callable[[int], tuple[float, Any]], raw: Callable[[int], float]
               ) -> Callable[[int], tuple[float, Any, float]]:
        def one(i: int) -> tuple[float, Any, float]:
            ms_route, reply = ask(i)
            return ms_route, reply, _raw_or_nan(raw, i)
        return one

    routes: dict[str, Callable[[int], tuple[float, Any, float]]] = {
        "exact_lookup": lambda i: _paired_exact(b, exact_input(i)),
        "bm25_search": paired(lambda i: b.ask_plan("bm25_search", {"query": texts[i], "limit": 10}),
                              lambda i: b.raw_bm25(texts[i], 10)),
        "vector_search": paired(
            lambda i: b.ask_plan("vector_search", {"query": texts[i], "limit": 10, "ef_search": 100}),
            lambda i: b.raw_hnsw(vectors[i], 10, 100)),
        "hybrid_search": paired(
            lambda i: b.ask_plan("hybrid_search", {"query": texts[i], "limit": 10, "candidates": 40}),
            lambda i: b.raw_bm25(texts[i], 40) + b.raw_hnsw(vectors[i], 40, 100)),
        "metric_query": paired(
            lambda i: b.ask_plan("metric_query", dict(zip(("metric", "where"), metric_input(i), strict=True))),
            lambda i: b.raw_metric(*metric_input(i))),
        "graph_expand": paired(
            lambda i: b.ask_plan("graph_expand", {"from_ids": graph_input(i)[0], "relation": graph_input(i)[1],
                                                  "direction": "out", "max_hops": 1, "fanout_cap": 50}),
            lambda i: b.raw_graph(*graph_input(i))),
    }
    # the routes that embed the question: their raw call is also reported with the query embedding
    # (one `encode` of the same text, timed alone) added, the work a plain script would do too
    embeds: dict[str, Callable[[int], float]] = {
        "vector_search": lambda i: b.raw_encode(texts[i]), "hybrid_search": lambda i: b.raw_encode(texts[i])}
    results: dict[str, Any] = {}
    for name, call in routes.items():
        if only and name not in only:
            continue
        route_ms: list[float] = []
        raw_ms: list[float] = []
        embedded_ms: list[float] = []
        worker_ms: list[float] = []
        replies = []
        raw_failed = 0
        for i in range(warmup):
            call(i)
        for i in tqdm(range(b.n_override.get(name, n)), desc=name, unit="req", file=sys.stderr, ncols=100, mininterval=2.0):
            ms_route, reply, ms_raw = call(i)
            route_ms.append(ms_route)
            if ms_raw == ms_raw:  # not NaN
                raw_ms.append(ms_raw)
                if name in embeds:
                    embedded_ms.append(ms_raw + embeds[name](i))
            else:
                raw_failed += 1
            worker_ms.append(reply.trace.elapsed_ms)
            replies.append(reply)
        r, w = summarise(route_ms), summarise(raw_ms)
        results[name] = {
            "route": r, "raw": w, "worker_answer": summarise(worker_ms),
            "ratio_p50": ratio(r["p50_ms"], w["p50_ms"]), "ratio_p95": ratio(r["p95_ms"], w["p95_ms"]),
            "statuses": _status_counts(replies),
            "step_status": _status_counts([_StepStatus(rep) for rep in replies]),
            "gap_kinds": _gap_kinds(replies), "raw_failed": raw_failed,
        }
        if embedded_ms:
            e = summarise(embedded_ms)
            results[name].update({"raw_with_query_embedding": e,
                                  "ratio_with_embedding_p50": ratio(r["p50_ms"], e["p50_ms"]),
                                  "ratio_with_embedding_p95": ratio(r["p95_ms"], e["p95_ms"])})
        print(f"{name:14s} route p50 {r['p50_ms']:8.1f} p95 {r['p95_ms']:8.1f} | raw p50 {w['p50_ms']:7.1f} "
              f"p95 {w['p95_ms']:7.1f} | x{results[name]['ratio_p50']} / x{results[name]['ratio_p95']} "
              f"{results[name]['statuses']}", file=sys.stderr)
    return results


class _NoReply:
    """Stands in for a reply that never came (counted as status `client_timeout`)."""

    status = "client_timeout"
    gaps: tuple[Any, ...] = ()

    class trace:  # noqa: N801 - mimics the reply's `trace` attribute
        elapsed_ms = 0.0
        steps: tuple[Any, ...] = ()


def _gap_kinds(replies: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in replies:
        for g in r.gaps:
            out[g.kind] = out.get(g.kind, 0) + 1
    return out


class _StepStatus:
    """Adapter so `_status_counts` can count the first trace step's status."""

    def __init__(self, reply: Any) -> None:
        self.status = reply.trace.steps[0].status if reply.trace.steps else "none"


def _paired_exact(b: Bench, ids: list[str]) -> tuple[float, Any, float]:
    ms_route, reply = b.ask_plan("exact_lookup", {"identifiers": ids, "limit": 20})
    return ms_route, reply, _raw_or_nan(lambda _: b.raw_exact(ids, 20), 0)


def _raw_or_nan(raw: Callable[[int], float], i: int) -> float:
    """A raw call's ms, or NaN when the store raised (counted in `raw_failed`, left out of the stats)."""
    try:
        return raw(i)
    except Exception as exc:  # noqa: BLE001 - counted in raw_failed
        print(f"raw call failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        return float("nan")


def measure_questions(b: Bench, n_per_class: int, ids: dict[str, list[str]]) -> dict[str, Any]:
    inv = (ids.get("invoice") or ["INV-2026-0001"])
    po = (ids.get("order") or ["PO-7002"])
    ctr = (ids.get("contract_ids") or ["CTR-2025-0000"])
    out: dict[str, Any] = {}
    for cls, templates in NL_QUESTIONS.items():
        ms_all: list[float] = []
        worker_ms: list[float] = []
        replies = []
        operators: dict[str, int] = {}
        b.ask_question(templates[0].format(inv=inv[0], po=po[0], ctr=ctr[0]))  # warm-up
        for i in range(n_per_class):
            q = templates[i % len(templates)].format(inv=inv[i % len(inv)], po=po[i % len(po)], ctr=ctr[i % len(ctr)])
            ms, reply = b.ask_question(q)
            ms_all.append(ms)
            worker_ms.append(reply.trace.elapsed_ms)
            replies.append(reply)
            key = "+".join(s.operator for s in reply.trace.steps) or "(none)"
            operators[key] = operators.get(key, 0) + 1
        s = summarise(ms_all)
        out[cls] = {"route": s, "worker_answer": summarise(worker_ms), "statuses": _status_counts(replies),
                    "gap_kinds": _gap_kinds(replies),
                    "plans": operators, "questions": templates}
        print(f"question/{cls:12s} p50 {s['p50_ms']:8.1f} p95 {s['p95_ms']:8.1f} {out[cls]['statuses']} {operators}",
              file=sys.stderr)
    return out


def measure_recall(b: Bench, n_queries: int, efs: Sequence[int], seed: int) -> dict[str, Any]:
    from manifold.query.executors.vector import recall_at_k

    texts = text_queries(n_queries, seed + 1)
    if n_queries > len(set(texts)):  # more queries than templates: add numbered variants
        texts = [t if i < len(set(texts)) else f"{t} within {2 + i % 29} days" for i, t in enumerate(texts)]
    vectors = b.embedder.encode(texts)
    auto = b.vector.search_vector(vectors[0], tenant_id=b.tenant, limit=10, timeout_s=10.0)
    plan_nodes = b.explain_hnsw(vectors[0])
    exact_ms: list[float] = []
    truth = []
    for v in vectors:
        t = time.perf_counter()
        found = b.vector.exact_neighbours(v, tenant_id=b.tenant, limit=10, timeout_s=30.0)
        exact_ms.append((time.perf_counter() - t) * 1000)
        truth.append(found)
    per_ef: dict[str, Any] = {}
    for ef in efs:
        rec: list[float] = []
        tol: list[float] = []
        wall: list[float] = []
        store: list[float] = []
        modes: set[str] = set()
        for v, ex in zip(vectors, truth, strict=True):
            t = time.perf_counter()
            approx = b.vector.search_vector(v, tenant_id=b.tenant, limit=10, timeout_s=10.0, ef_search=ef, mode="hnsw")
            wall.append((time.perf_counter() - t) * 1000)
            store.append(approx.store_ms)
            modes.add(approx.mode)
            rec.append(recall_at_k([h.chunk_id for h in approx.hits], [h.chunk_id for h in ex.hits], 10))
            if ex.hits:
                kth = 1.0 - min(h.score for h in ex.hits[:10])  # the exact 10th distance
                good = sum(1 for h in approx.hits[:10] if (1.0 - h.score) <= kth + 1e-6)
                tol.append(min(good, len(ex.hits[:10])) / len(ex.hits[:10]))
        per_ef[str(ef)] = {"recall_at_10": round(float(np.mean(rec)), 4),
                           "recall_at_10_min": round(float(np.min(rec)), 4),
                           "recall_at_10_tie_tolerant": round(float(np.mean(tol)), 4) if tol else None,
                           "hnsw_latency": summarise(wall), "hnsw_store_ms": summarise(store),
                           "modes": sorted(modes)}
        print(f"ef_search={ef:4d} recall@10 {per_ef[str(ef)]['recall_at_10']:.4f} "
              f"(tie-tolerant {per_ef[str(ef)]['recall_at_10_tie_tolerant']}) p50 "
              f"{per_ef[str(ef)]['hnsw_latency']['p50_ms']} ms", file=sys.stderr)
    return {"queries": len(vectors), "k": 10,
            "auto_mode": {"mode": auto.mode, "filtered_count": auto.filtered_count,
                          "exact_search_below": b.settings.query.exact_search_below},
            "hnsw_query_plan": plan_nodes,
            "exact_latency": summarise(exact_ms), "by_ef_search": per_ef}


def machine_info() -> dict[str, Any]:
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent.parent,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=Path(__file__).resolve().parent.parent,
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    return {"cores": os.cpu_count(), "ram_gib": round(mem_kb / 1024 / 1024, 1), "python": platform.python_version(),
            "platform": platform.platform(), "commit": commit, "worktree_modified": dirty}


def dataset_info(settings: Any, tenant: str) -> dict[str, Any]:
    """The tenant's serving rows as the query role sees them, read as the tool principal (`main`
    calls `access.allow_tool_reads`): a transaction without a principal reads nothing."""
    from manifold.shared.stores.pg_connections import TenantConnections

    with TenantConnections(settings.postgres.query_conninfo()).transaction(tenant) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM serving_chunks), (SELECT count(*) FROM serving_document_versions),"
                           " (SELECT count(*) FROM serving_records), (SELECT count(*) FROM serving_record_lines)"
                           ).fetchone()
    assert row is not None
    return {"tenant": tenant, "active_chunks": int(row[0]), "active_documents": int(row[1]),
            "active_records": int(row[2]), "active_record_lines": int(row[3])}


def main() -> None:
    from manifold.shared import access

    access.allow_tool_reads()  # executors are called directly, outside a query turn
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenant", default=None, help="default: bench-q50k (with --reuse)")
    ap.add_argument("--docs", type=int, default=25000, help="corpus size for the bulk loader")
    ap.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=True,
                    help="reuse the fixed bench tenant (default); --no-reuse loads a fresh tenant")
    ap.add_argument("--no-load", action="store_true", help="measure the tenant as it is, load nothing")
    ap.add_argument("--min-chunks", type=int, default=50_000, help="refuse to measure a smaller tenant (0: any)")
    ap.add_argument("--n", type=int, default=200, help="timed requests per route")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--routes", nargs="+", default=None, metavar="OPERATOR",
                    help="measure only these operators (default: every one)")
    ap.add_argument("--n-exact", type=int, default=None, help="timed exact_lookup requests (default --n)")
    ap.add_argument("--questions", type=int, default=30, help="timed natural-language questions per class")
    ap.add_argument("--recall-queries", type=int, default=120)
    ap.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--load-report", type=Path, default=None,
                    help="with --no-load: a bench/bulk_load.py --out JSON to include as the load section")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "query_latency.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import bulk_load

    from manifold.shared.config import ManifoldSettings

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    settings = ManifoldSettings()
    tenant = args.tenant or (bulk_load.DEFAULT_TENANT if args.reuse else f"bench-q-{uuid.uuid4().hex[:8]}")
    load_report = None
    if not args.no_load:
        load_report = bulk_load.bulk_load(settings, tenant, args.docs).as_dict()
    dataset = dataset_info(settings, tenant)
    if dataset["active_chunks"] < args.min_chunks:
        raise SystemExit(f"tenant {tenant} has {dataset['active_chunks']} active chunks < --min-chunks "
                         f"{args.min_chunks}; load more (bench/bulk_load.py) or lower --min-chunks")
    print(json.dumps(dataset), file=sys.stderr)
    bench = Bench(settings, tenant, args.seed)
    if args.n_exact is not None:
        bench.n_override["exact_lookup"] = args.n_exact
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        t0 = time.perf_counter()
        routes = measure_routes(bench, args.n, args.warmup, args.routes)
        questions = measure_questions(bench, args.questions, bench.identifiers())
        recall = measure_recall(bench, args.recall_queries, args.ef, args.seed)
        elapsed = time.perf_counter() - t0
    finally:
        bench.close()
    result = {
        "benchmark": "query_latency",
        "machine": machine_info() | {"loadavg_1_5_15_at_start": load_before,
                                     "loadavg_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()],
                                     "note": "other sessions' processes may share the cores; see loadavg"},
        "dataset": dataset | {"meets_50k_chunk_goal": dataset["active_chunks"] >= 50_000,
                              "chunks_per_document": round(dataset["active_chunks"] / max(dataset["active_documents"], 1), 3),
                              "corpus": f"ingest.sample_corpus.write_corpus(size={args.docs}, seed=7)",
                              "loader": bulk_load.LOADER_NOTE},
        "load": load_report or (json.loads(args.load_report.read_text()) if args.load_report else None),
        "load_span_from_manifest": load_span(settings, tenant),
        "transport": {"kafka": settings.kafka.bootstrap_servers, "worker": "query.worker.serve, 1 consumer thread, "
                      "in-process background thread", "client": "query.request_client.QueryClient (one request at a time)",
                      "topics": {"request": bench.settings.query.request_topic,
                                 "reply": bench.settings.query.reply_topic}},
        "method": {
            "route": "wall time around QueryClient.ask with a one-step explicit plan (produce, worker answers, "
                     "reply consumed); worker_answer = reply.trace.elapsed_ms",
            "raw": "the executor's own store call(s) issued directly with the store client, timed around the "
                   "client call only (see module docstring); vector raw excludes query embedding; hybrid raw is "
                   "raw bm25 + raw HNSW at the candidate depth, sequential",
            "interleaving": "each route request is followed by its raw call on the same input",
            "n_per_route": args.n, "n_exact_lookup": args.n_exact or args.n,
            "exact_raw_statement_timeout_ms": bench.exact_timeout_ms, "warmup_per_route": args.warmup, "questions_per_class": args.questions,
        },
        "routes": routes,
        "questions": questions,
        "vector_recall": recall,
        "elapsed_s": round(elapsed, 1),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("dataset", "elapsed_s")}, indent=2))


def load_span(settings: Any, tenant: str) -> dict[str, Any]:
    """First staged → last activated version of the tenant, from the manifest (spans every loader
    run, pauses between resumed runs included)."""
    import psycopg

    with psycopg.connect(settings.postgres.ingest_conninfo()) as conn, conn.transaction():
        conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant,))
        row = conn.execute("SELECT min(staged_at), max(activated_at), count(*) FILTER (WHERE state = 'active') "
                           "FROM manifold.version_manifest WHERE tenant_id = %s", (tenant,)).fetchone()
    if not row or row[0] is None or row[1] is None:
        return {}
    return {"first_staged_at": row[0].isoformat(), "last_activated_at": row[1].isoformat(),
            "span_s": round((row[1] - row[0]).total_seconds(), 1), "active_versions": int(row[2])}


if __name__ == "__main__":
    main()
