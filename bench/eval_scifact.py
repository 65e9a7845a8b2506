"""BEIR SciFact (test split) through the real pipeline and the real text executors.

Two phases, both resumable:

1. **ingest** — verifies `SHA256SUMS` (the data files are never modified), then publishes every
   corpus document with the upstream client as a `text/markdown` document `"title\n\ntext"` whose
   document id is the corpus `_id` and whose `title` metadata is the corpus title, under one tenant
   (default `scifact`), runs every worker role
   in this process (what `manifold workers` runs) and waits until all 5,183 versions are active.
   The client's version ledger skips unchanged documents, so a re-run publishes nothing and only
   waits; messages left on the topics by an interrupted run are picked up by the consumer groups.
   `ingest --bulk` instead runs the same stage handlers in this process without Kafka
   (`bench/bulk_load.py`: embeddings batched across documents; it also writes the PostgreSQL text
   index), judged documents first so that an interrupted load can be scored with `--partial`.
2. **evaluate** — in one run, for the 300 test queries: BM25 (`BM25Executor`, Elasticsearch),
   dense (`VectorExecutor`, MiniLM on pgvector: as routed, HNSW above `exact_search_below`
   chunks, plus a forced exact scan), hybrid RRF as served (`HybridExecutor`, the settings'
   defaults) and the embedded profile's BM25 (`PgBM25Executor` over `PostgresTextIndex`, filled
   from the staged `extracted` payloads of the active versions; `--skip-pg` leaves it out).
   Scores are per DOCUMENT: a document's rank is the rank of its best chunk; the document id is
   the corpus id. nDCG@10 and recall@100 with binary relevance (every qrel score is 1), as BEIR.

Tuning, never on the test queries: document-level RRF k and the BM25:vector weight are chosen on
the TRAIN qrels (grid `GRID_K` x `GRID_W`), then applied to the test queries twice: as
document-level RRF over the same BM25/vector runs, and through `HybridExecutor` with a settings
copy (`rrf_k`, default weights). `shared/config.py` is not changed.

Depth: the plan IR caps a text step at 100 chunks (`plan.LIMIT_CAP`) and an abstract is one to
three chunks, so the single-store runs build their params with `model_construct` (skipping the
plan cap; the executors are unchanged) and ask for `--depth` chunks (default 300).

An incomplete ingestion is refused unless `--partial`: then only the test (and train) queries
whose relevant documents are all active are scored, and the result is flagged as not comparable.

Usage:
  .venv/bin/python bench/eval_scifact.py ingest             # ~20 min at ~5 docs/s on an idle machine
  .venv/bin/python bench/eval_scifact.py evaluate           # writes bench/results/scifact.json
  .venv/bin/python bench/eval_scifact.py all
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine, mean, ndcg_at_k, percentile, recall_at_k  # noqa: E402 - after bench/ joins sys.path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir-scifact"  # the team folder beside the repo
TENANT = "scifact"
OUT = ROOT / "results" / "scifact.json"
MAX_QUERIES: int | None = None
NOTES = [
    "Document level: each system's chunk ranking is collapsed to documents (a document takes its best "
    "chunk's rank); the document id is the corpus _id.",
    'Depth: single-store runs ask for 300 chunks (executor params built with model_construct, past the '
    'plan cap of 100 chunks), so recall@100 is over documents, not chunks; the served hybrid keeps the '
    "executor's cap of 100 candidates per branch.",
    'Dense: the routed VectorExecutor chooses HNSW above query.exact_search_below (2000) active chunks '
    'and exact below; vector_modes says which ran; vector_exact forces the exact scan.',
    "Elasticsearch BM25: each term's IDF is the tenant's own (query.executors.bm25_weights boosts each term "
    "by idf over the tenant's chunks / idf over the index), the average length is the whole shared index's "
    "(every tenant and version); PostgreSQL BM25 uses this tenant's serving chunks only: the two lexical rows "
    'differ partly for that reason.',
    'Tuning never looks at the test split: RRF k and the BM25 weight (document level) and the served '
    'fusion method, weights and document support (query.fusion.fuse, chunk level) are chosen on the train qrels.',
    'Served hybrid runs search what the query service would: the passages step of the plan compiled from each '
    'claim (router with an empty catalog, then planner.compile_plan): its text (planner.passage_query), the '
    'identifiers of its exact branch and its fusion class (routed_classes counts them; '
    'served_query_differs_from_claim and served_queries_with_identifiers say how often the text or the exact '
    'branch differ from the plain claim).',
    'Each abstract is published as "title\n\ntext" with the corpus title as the document\'s title metadata: '
    'the title heads the root section, so every chunk\'s BM25 title field holds it.',
    'Lexical analysis: shared/analysis.py (stop words, Snowball English stems) for both text indexes and the '
    'query side.',
]
log = logging.getLogger("eval_scifact")


# ---- data ---------------------------------------------------------------------------------------

def verify_checksums(data: Path) -> dict[str, str]:
    """Check every file listed in SHA256SUMS; raise on any mismatch. Returns name -> sha256."""
    sums: dict[str, str] = {}
    for line in (data / "SHA256SUMS").read_text().splitlines():
        if not line.strip():
            continue
        digest, name = line.split(maxsplit=1)
        name = name.lstrip("*").strip()
        actual = hashlib.sha256((data / name).read_bytes()).hexdigest()
        if actual != digest:
            raise SystemExit(f"checksum mismatch for {name}: {actual} != {digest}")
        sums[name] = digest
    return sums


def load_corpus(data: Path) -> list[dict[str, str]]:
    with (data / "corpus.jsonl").open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_test(data: Path, split: str = "test") -> tuple[dict[str, str], dict[str, set[str]]]:
    qrels: dict[str, set[str]] = defaultdict(set)
    with (data / "qrels" / f"{split}.tsv").open(newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels[row["query-id"].strip()].add(row["corpus-id"].strip())
    queries = {}
    with (data / "queries.jsonl").open() as fh:
        for line in fh:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q["text"]
    return queries, dict(qrels)


def document_text(doc: dict[str, str]) -> str:
    return f"{doc['title']}\n\n{doc['text']}"


def document_metadata(doc: dict[str, str]) -> dict[str, str]:
    """The corpus title is the document's `title` metadata (it names the root section, so every
    chunk's title field holds it); the body keeps it too, as the abstract's first line."""
    meta = {"source_path": doc["_id"]}
    if doc.get("title", "").strip():
        meta["title"] = doc["title"].strip()
    return meta


def ingest_bulk(settings: Any, tenant: str, corpus: list[dict[str, str]], data: Path) -> dict[str, Any]:
    """The fast path (`bench/bulk_load.py`): the same stage handlers and store adapters in this
    process, no Kafka, embeddings batched across documents; each activated version is also written
    to the embedded profile's PostgreSQL text index. Resumable (active documents are skipped)."""
    from bulk_load import load_sources

    from manifold.shared.stores.pg_text import PostgresTextIndex

    # documents judged by some train or test query first, then the rest in corpus order: an
    # interrupted load can still be scored with --partial (labelled as such)
    judged = set().union(*(rel for split in ("test", "train") for rel in load_test(data, split)[1].values()))
    ordered = sorted(corpus, key=lambda d: d["_id"] not in judged)
    items = [(d["_id"], document_text(d).encode(), "text/markdown", document_metadata(d)) for d in ordered]
    report = load_sources(settings, tenant, items, pg_text=PostgresTextIndex.from_settings(settings))
    return {"loader": "bench/bulk_load.py load_sources (stage handlers in-process, no Kafka)", **report.as_dict()}


# ---- phase 1: ingestion -----------------------------------------------------------------------------

def ingest(settings: Any, tenant: str, corpus: list[dict[str, str]], timeout_s: float) -> dict[str, Any]:
    from manifold.deploy.compose.distributed import upstream_client
    from manifold.ingest import ROLES, lifecycle, workers

    client = upstream_client(settings)
    ports = lifecycle.build_ports(settings)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            workers.run(settings, list(ROLES), stop)
        except BaseException as err:  # noqa: BLE001 - reported by the wait loop
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True, name="scifact-workers")
    thread.start()
    started = time.monotonic()
    published = unchanged = 0
    try:
        for i, doc in enumerate(corpus, start=1):
            version = client.publish_bytes(tenant, doc["_id"], document_text(doc).encode(), "text/markdown",
                                           document_metadata(doc))
            if version is None:
                unchanged += 1
            else:
                published += 1
            if i % 500 == 0:
                log.info("published %d/%d (new %d, unchanged %d)", i, len(corpus), published, unchanged)
        client.producer.flush(30)
        publish_s = time.monotonic() - started
        wanted = {d["_id"] for d in corpus}
        deadline = time.monotonic() + timeout_s
        last = first = -1
        waited = time.monotonic()
        while True:
            if errors:
                raise RuntimeError(f"workers failed: {errors[0]!r}")
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            done = len(wanted & active)
            if first < 0:
                first = done
            if done != last:
                rate = (done - first) / max(time.monotonic() - waited, 1e-9)
                log.info("active %d/%d (%.2f docs/s activated by this run)", done, len(wanted), rate)
                last = done
            if done == len(wanted):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {done}/{len(wanted)} documents active after {timeout_s:.0f}s")
            time.sleep(10)
    finally:
        stop.set()
        thread.join(60)
    return {"tenant": tenant, "documents": len(corpus), "published_now": published, "unchanged": unchanged,
            "publish_s": round(publish_s, 1), "wall_s": round(time.monotonic() - started, 1)}


# ---- phase 2: evaluation ----------------------------------------------------------------------------

def doc_ranking(hits: Any) -> list[str]:
    """Chunk hits (best first) → document ids, each at the rank of its best chunk."""
    out: list[str] = []
    seen: set[str] = set()
    for h in hits:
        if h.document_id not in seen:
            seen.add(h.document_id)
            out.append(h.document_id)
    return out


def rrf_docs(rankings: dict[str, list[str]], *, k: int, weights: dict[str, float]) -> list[str]:
    """Document-level weighted RRF: score(d) = Σ_b w_b / (k + rank_b(d)); ties by document id."""
    scores: dict[str, float] = defaultdict(float)
    for branch, ranking in rankings.items():
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] += weights.get(branch, 0.0) / (k + rank)
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def score_runs(runs: dict[str, list[str]], qrels: dict[str, set[str]]) -> dict[str, float]:
    ndcg = [ndcg_at_k(runs[q], qrels[q], 10) for q in qrels]
    r100 = [recall_at_k(runs[q], qrels[q], 100) for q in qrels]
    r10 = [recall_at_k(runs[q], qrels[q], 10) for q in qrels]
    return {"ndcg@10": round(mean(ndcg), 4), "recall@100": round(mean(r100), 4),
            "recall@10": round(mean(r10), 4), "queries": len(qrels)}


GRID_K = (5, 10, 20, 30, 40, 60, 100)
GRID_W = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
GRID_ALPHA = tuple(round(0.05 * i, 2) for i in range(2, 19))
"""Convex BM25 weight for normalised score fusion (vector weight 1 - alpha)."""
GRID_SUPPORT = (0.0, 1.0)
"""Document support (query.fusion) tried with the normalised methods; RRF runs at 0, as before."""
SERVED_DEPTH = 100


def fusion_grid(b_hits: dict[str, Any], v_hits: dict[str, Any], qrels: dict[str, set[str]]) -> list[dict[str, Any]]:
    """The served fusion (`query.fusion.fuse`, chunk level, 100 candidates per branch, per-document
    cap 1) over the train queries' BM25 and vector chunk hits, for every method and weight."""
    from manifold.query import fusion

    # `fusion.overlaps` (the near-duplicate test inside `fuse`) depends only on the two chunks,
    # not on the method or weights, and is most of `fuse`'s time: remember it across the grid.
    # The fused results are exactly `fuse`'s; only repeated pair comparisons are skipped.
    seen: dict[tuple[str, str, float], bool] = {}
    plain = fusion.overlaps

    def overlaps(a: Any, b: Any, share: float = fusion.OVERLAP_SHARE) -> bool:
        if a.document_id != b.document_id or a.section_id != b.section_id:
            return False  # `overlaps`' own first test, cheaper than remembering it
        key = (a.chunk_id, b.chunk_id, share)
        if key not in seen:
            seen[key] = plain(a, b, share)
        return seen[key]

    def score(method: str, k: int, weights: dict[str, float], support: float = 0.0) -> dict[str, float]:
        runs = {}
        for qid in qrels:
            fused = fusion.fuse({"bm25": b_hits[qid], "vector": v_hits[qid]}, k=k, weights=weights,
                                per_document_cap=1, limit=100, method=method, document_support=support)
            runs[qid] = doc_ranking([f.hit for f in fused.hits])
        return score_runs(runs, qrels)

    fusion.overlaps = overlaps  # type: ignore[assignment]
    try:
        return _grid(score)
    finally:
        fusion.overlaps = plain  # type: ignore[assignment]


def _grid(score: Any) -> list[dict[str, Any]]:
    """Every RRF (k, BM25 weight), and every min-max / z-score convex weight with every document
    support, scored by `score`."""
    grid = []
    for k in GRID_K:
        for w in GRID_W:
            grid.append({"method": "rrf", "k": k, "bm25": w, "vector": 1.0, "support": 0.0,
                         **score("rrf", k, {"bm25": w, "vector": 1.0}, 0.0)})
    for method in ("minmax", "zscore"):
        for support in GRID_SUPPORT:
            for a in GRID_ALPHA:
                grid.append({"method": method, "k": None, "bm25": a, "vector": round(1 - a, 2), "support": support,
                             **score(method, 60, {"bm25": a, "vector": round(1 - a, 2)}, support)})
    return grid


def tune_on_train(settings: Any, tenant: str, data: Path, timeout_s: float, depth: int,
                  only_docs: set[str] | None = None) -> dict[str, Any]:
    """Document-level RRF k and BM25:vector weight chosen on the TRAIN queries (809), never on test.
    `only_docs`: keep only queries whose relevant documents are all in this set (partial corpus)."""
    from elasticsearch import Elasticsearch

    from manifold.query.executors.bm25 import BM25Executor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.plan import BM25SearchParams
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    queries, qrels = load_test(data, "train")
    if only_docs is not None:
        qrels = {q: rel for q, rel in qrels.items() if rel <= only_docs}
    if MAX_QUERIES:
        qrels = dict(sorted(qrels.items(), key=lambda kv: int(kv[0]))[:MAX_QUERIES])
    q = settings.query
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    es = Elasticsearch(settings.elasticsearch.url, request_timeout=30)
    bm25 = BM25Executor(es, pg, q)
    vector = VectorExecutor(pg, SentenceTransformerEmbedder(), q)
    ids = sorted(qrels, key=int)
    vectors = vector._embedder.encode([queries[i] for i in ids])  # noqa: SLF001 - the executor's own embedder
    b_runs, v_runs, b_hits, v_hits = {}, {}, {}, {}
    for qid, vec in zip(ids, vectors, strict=True):
        hits = bm25.run(BM25SearchParams.model_construct(query=queries[qid], limit=depth, document_ids=None),
                        tenant_id=tenant, timeout_s=timeout_s).hits
        b_runs[qid], b_hits[qid] = doc_ranking(hits), hits[:SERVED_DEPTH]
        hits = vector.search_vector(vec, tenant_id=tenant, limit=depth, timeout_s=timeout_s).hits
        v_runs[qid], v_hits[qid] = doc_ranking(hits), hits[:SERVED_DEPTH]
    grid = []
    for k in GRID_K:
        for w in GRID_W:
            runs = {qid: rrf_docs({"bm25": b_runs[qid], "vector": v_runs[qid]}, k=k, weights={"bm25": w, "vector": 1.0})
                    for qid in ids}
            grid.append({"k": k, "bm25_weight": w, "vector_weight": 1.0, **score_runs(runs, qrels)})
    best = max(grid, key=lambda g: (g["ndcg@10"], -abs(g["k"] - 60), -abs(g["bm25_weight"] - 1.0)))
    served = fusion_grid(b_hits, v_hits, qrels)
    best_served = max(served, key=lambda g: (g["ndcg@10"], g["recall@100"], g["method"] == "rrf"))
    return {"queries": len(ids), "bm25": score_runs(b_runs, qrels), "vector": score_runs(v_runs, qrels),
            "best": best, "grid": grid, "served_fusion_best": best_served, "served_fusion_grid": served,
            "served_fusion_note": "query.fusion.fuse over the first 100 chunk hits of each branch (the served "
                                  "depth), per-document cap 1; method and weights chosen by train nDCG@10"}


def _pg_lexical(settings: Any) -> tuple[Any, str]:
    """The embedded profile's BM25 executor when it exists, else (None, reason)."""
    try:
        from manifold.query.executors.pg_lexical import PgBM25Executor
        from manifold.shared.stores.pg_text import PostgresTextIndex  # noqa: F401 - probes that the module exists
    except ImportError as exc:
        return None, f"not available yet: the embedded profile's text index / executor is missing ({exc})"
    # The benchmark raises the statement timeout cap (3 s by default) to 60 s: the embedded profile's
    # BM25 aggregates postings in SQL, and on a loaded 2-core machine a long claim can exceed 3 s.
    from manifold.shared.stores.pg_connections import TenantConnections

    q = settings.query.model_copy(update={"statement_timeout_ms": 60_000})
    return PgBM25Executor(TenantConnections(settings.postgres.query_conninfo()), q), "present"


def index_pg_text(settings: Any, tenant: str) -> dict[str, Any]:
    """Index the ACTIVE versions into the embedded profile's PostgreSQL text index.

    The embedded profile's load stage writes `PostgresTextIndex` where the distributed one writes
    Elasticsearch, from the same `ExtractedDocument`. Rather than embedding the corpus a second
    time through the embedded pipeline, this reads each active version's staged `extracted`
    payload (the exact input the load stage gave Elasticsearch) and writes it with
    `PostgresTextIndex.write_version`, then marks it serving, as the publisher would. Idempotent:
    a version already serving is skipped."""
    import psycopg

    from manifold.ingest import lifecycle
    from manifold.ingest.notices import payload_key
    from manifold.shared.artifacts import ExtractedDocument
    from manifold.shared.stores.pg_staging import PostgresStagingStore
    from manifold.shared.stores.pg_text import PostgresTextIndex

    index = PostgresTextIndex.from_settings(settings)
    staging = PostgresStagingStore.from_settings(settings)
    entries = [e for e in lifecycle.build_ports(settings).manifest.entries(tenant) if e.state == "active"]
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        serving = {(d, v) for d, v in conn.execute(
            "SELECT DISTINCT document_id, version FROM manifold.text_chunks WHERE tenant_id = %s AND serving",
            (tenant,)).fetchall()}
    written = skipped = 0
    started = time.monotonic()
    for n, e in enumerate(entries, start=1):
        if (e.document_id, e.version) in serving:
            skipped += 1
            continue
        key = payload_key(tenant, e.document_id, e.version, e.config_fingerprint)
        doc = ExtractedDocument.model_validate_json(staging.get_payload(tenant, key, "extracted"))
        index.write_version(doc)
        index.set_serving(tenant, e.document_id, e.version, True)
        written += 1
        if n % 1000 == 0:
            log.info("pg text index: %d/%d", n, len(entries))
    return {"documents": len(entries), "written_now": written, "already_serving": skipped,
            "seconds": round(time.monotonic() - started, 1)}


def served_passages(queries: dict[str, str], ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each query's passage search as the query service plans it: the router (with an empty
    catalog: SciFact names no company, supplier or product), then `planner.compile_plan`; its
    `passages` step gives the search text (`planner.passage_query`), the identifiers of its exact
    branch and its fusion class (`planner.text_query_class`). A claim whose plan has no passage
    search (a rule read it as a total and the planner refused it, or planned a metric that finds no
    data in SciFact) is answered from `planner.fallback_plan`, as the service does: its text step."""
    from datetime import date

    from manifold.query.planner import PlanningGap, compile_plan, fallback_plan
    from manifold.query.router import route

    out: dict[str, dict[str, Any]] = {}
    for qid in ids:
        text = queries[qid]
        routed = route(text, [], as_of=date.today())
        try:
            plan = compile_plan(routed, text, as_of=date.today())
        except PlanningGap:
            plan = None
        step = next((s for s in plan.steps if s.id == "passages"), None) if plan is not None else None
        if step is None:
            fallback = fallback_plan(routed, text)
            step = next(s for s in fallback.steps if s.operator == "hybrid_search") if fallback else None
        params = step.params if step is not None else None
        out[qid] = {"query": getattr(params, "query", text), "identifiers": getattr(params, "identifiers", None),
                    "query_class": getattr(params, "query_class", "semantic")}
    return out


def served_fusion_label(q: Any, query_class: str = "semantic") -> str:
    from manifold.query.executors.hybrid import fusion_choice

    method, weights = fusion_choice(q, query_class)
    shown = f"bm25 {weights.get('bm25', 0):g}, vector {weights.get('vector', 0):g}, " \
            f"document support {q.fusion_document_support:g}"
    return f"weighted RRF k={q.rrf_k}, {shown}" if method == "rrf" else f"{method} score fusion, {shown}"


def evaluate(settings: Any, tenant: str, queries: dict[str, str], qrels: dict[str, set[str]], *,
             depth: int, rrf_k: int, timeout_s: float, tuned: dict[str, Any] | None = None,
             skip_pg: bool = False) -> dict[str, Any]:
    from elasticsearch import Elasticsearch

    from manifold.query.executors.bm25 import TITLE_BOOST, BM25Executor
    from manifold.query.executors.exact import ExactLookupExecutor
    from manifold.query.executors.hybrid import HybridExecutor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.plan import BM25SearchParams, HybridSearchParams
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    q = settings.query
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    es = Elasticsearch(settings.elasticsearch.url, request_timeout=30)
    embedder = SentenceTransformerEmbedder()
    bm25 = BM25Executor(es, pg, q)
    vector = VectorExecutor(pg, embedder, q)
    hybrid = HybridExecutor(ExactLookupExecutor(es, pg, q), bm25, vector, pg, q)
    tuned_q = None
    variants: dict[str, HybridExecutor] = {}
    # the served executor with the previous serving default: weighted RRF k=60, equal weights
    equal = {"exact": 1.0, "bm25": 1.0, "vector": 1.0}
    rrf60 = q.model_copy(update={"rrf_k": 60, "fusion_document_support": 0.0,
                                 "fusion_method": dict.fromkeys(("default", "exact", "lexical", "semantic"), "rrf"),
                                 "rrf_weights": dict.fromkeys(("default", "exact", "lexical", "semantic"), equal)})
    variants["hybrid_rrf60"] = HybridExecutor(ExactLookupExecutor(es, pg, rrf60), bm25, vector, pg, rrf60)
    if tuned is not None:  # the served executor with the train-selected fusion (settings override only)
        sb = tuned.get("served_fusion_best")
        if sb:
            weights = {"exact": 1.0, "bm25": sb["bm25"], "vector": sb["vector"]}
            table = "rrf_weights" if sb["method"] == "rrf" else "score_weights"
            text_classes = ("default", "lexical", "semantic")  # every class but exact, whatever the routing
            tuned_q = q.model_copy(update={
                "rrf_k": sb["k"] or q.rrf_k, "fusion_document_support": sb.get("support", 0.0),
                "fusion_method": {**q.fusion_method, **dict.fromkeys(text_classes, sb["method"])},
                table: {**getattr(q, table), **dict.fromkeys(text_classes, weights)}})
            variants["hybrid_tuned"] = HybridExecutor(ExactLookupExecutor(es, pg, tuned_q), bm25, vector, pg,
                                                      tuned_q)
        tuned = tuned["best"]
    ids = sorted(qrels, key=int)
    texts = [queries[i] for i in ids]
    served = served_passages(queries, ids)
    t0 = time.monotonic()
    vectors = embedder.encode(texts)
    encode_ms = (time.monotonic() - t0) * 1000 / len(ids)

    runs: dict[str, dict[str, list[str]]] = defaultdict(dict)
    latency: dict[str, list[float]] = defaultdict(list)
    modes: dict[str, int] = defaultdict(int)
    for n, (qid, text, vec) in enumerate(zip(ids, texts, vectors, strict=True), start=1):
        t = time.monotonic()
        res = bm25.run(BM25SearchParams.model_construct(query=text, limit=depth, document_ids=None),
                       tenant_id=tenant, timeout_s=timeout_s)
        latency["bm25"].append((time.monotonic() - t) * 1000)
        runs["bm25"][qid] = doc_ranking(res.hits)

        t = time.monotonic()
        found = vector.search_vector(vec, tenant_id=tenant, limit=depth, timeout_s=timeout_s)
        latency["vector"].append((time.monotonic() - t) * 1000 + encode_ms)
        modes[found.mode] += 1
        runs["vector"][qid] = doc_ranking(found.hits)

        t = time.monotonic()
        exact = vector.search_vector(vec, tenant_id=tenant, limit=depth, timeout_s=timeout_s, mode="exact")
        latency["vector_exact"].append((time.monotonic() - t) * 1000 + encode_ms)
        runs["vector_exact"][qid] = doc_ranking(exact.hits)

        t = time.monotonic()
        hres = hybrid.run(HybridSearchParams.model_construct(
            **served[qid], limit=100, document_ids=None, candidates=100, per_document_cap=1),
            tenant_id=tenant, timeout_s=timeout_s)
        latency["hybrid"].append((time.monotonic() - t) * 1000)
        runs["hybrid"][qid] = doc_ranking(hres.hits)

        for name, executor in variants.items():
            t = time.monotonic()
            vres = executor.run(HybridSearchParams.model_construct(
                **served[qid], limit=100, document_ids=None, candidates=100, per_document_cap=1),
                tenant_id=tenant, timeout_s=timeout_s)
            latency[name].append((time.monotonic() - t) * 1000)
            runs[name][qid] = doc_ranking(vres.hits)
        if tuned is not None:
            runs["hybrid_rrf_doc_tuned"][qid] = rrf_docs(
                {"bm25": runs["bm25"][qid], "vector": runs["vector"][qid]}, k=tuned["k"],
                weights={"bm25": tuned["bm25_weight"], "vector": tuned["vector_weight"]})
        default_w = q.rrf_weights["default"]
        runs["hybrid_rrf_doc"][qid] = rrf_docs({"bm25": runs["bm25"][qid], "vector": runs["vector"][qid]},
                                               k=rrf_k, weights=default_w)
        if n % 50 == 0:
            log.info("evaluated %d/%d queries", n, len(ids))
    hybrid.close()
    for executor in variants.values():
        executor.close()

    pg_lex, pg_status = (None, "skipped (--skip-pg)") if skip_pg else _pg_lexical(settings)
    if pg_lex is not None:
        pg_index = index_pg_text(settings, tenant)
        log.info("pg text index: %s", pg_index)
        pg_failures = 0
        for qid, text in zip(ids, texts, strict=True):
            t = time.monotonic()
            try:
                res = pg_lex.run(BM25SearchParams.model_construct(query=text, limit=depth, document_ids=None),
                                 tenant_id=tenant, timeout_s=60)
                runs["pg_bm25"][qid] = doc_ranking(res.hits)
            except (TimeoutError, Exception) as exc:  # noqa: BLE001 - counted; the query scores 0
                pg_failures += 1
                runs["pg_bm25"][qid] = []
                log.warning("pg bm25 failed for query %s: %s", qid, exc)
            latency["pg_bm25"].append((time.monotonic() - t) * 1000)
    systems: dict[str, Any] = {}
    labels = {
        "bm25": "BM25, Elasticsearch (BM25Executor: stemmed text + title^%s, Python Snowball analysis)" % TITLE_BOOST,
        "vector": "Dense all-MiniLM-L6-v2 on pgvector, HNSW (VectorExecutor as routed)",
        "vector_exact": "Dense all-MiniLM-L6-v2 on pgvector, exact scan",
        "hybrid": "Hybrid as served (HybridExecutor, settings defaults for the routed class: %s, 100 "
                  "candidates/branch, per-document cap 1)" % served_fusion_label(q),
        "hybrid_rrf60": "Hybrid, served executor with weighted RRF k=60, equal weights, no document support",
        "hybrid_rrf_doc": "Hybrid RRF, document level (same BM25 + HNSW runs, k=%d)" % rrf_k,
    }
    if tuned_q is not None:
        labels["hybrid_tuned"] = "Hybrid, served executor with the train-selected fusion (%s)" % served_fusion_label(tuned_q)
    if tuned is not None:
        labels["hybrid_rrf_doc_tuned"] = ("Hybrid RRF, document level, train-tuned (k=%d, bm25 weight %.2f)"
                                          % (tuned["k"], tuned["bm25_weight"]))
    for name, label in labels.items():
        systems[name] = {"label": label, **score_runs(runs[name], qrels),
                         "latency_ms": {"p50": round(percentile(latency.get(name, [0.0]) or [0.0], 50), 1),
                                        "p95": round(percentile(latency.get(name, [0.0]) or [0.0], 95), 1)}
                         if name in latency else None}
    if pg_lex is not None:
        systems["pg_bm25"] = {"label": "BM25, PostgreSQL text index (embedded profile, PgBM25Executor)",
                              **score_runs(runs["pg_bm25"], qrels),
                              "latency_ms": {"p50": round(percentile(latency["pg_bm25"], 50), 1),
                                             "p95": round(percentile(latency["pg_bm25"], 95), 1)},
                              "index": pg_index, "failed_queries": pg_failures,
                              "statement_timeout_ms": 60_000}
    else:
        systems["pg_bm25"] = {"label": "BM25, PostgreSQL (embedded profile)", "status": pg_status}
    return {"systems": systems, "vector_modes": dict(modes), "depth_chunks": depth,
            "routed_classes": dict(Counter(p["query_class"] for p in served.values())),
            "served_query_differs_from_claim": sum(served[q]["query"] != queries[q] for q in ids),
            "served_queries_with_identifiers": sum(bool(served[q]["identifiers"]) for q in ids),
            "query_encode_ms": round(encode_ms, 2), "runs": runs}


def main() -> None:
    from manifold.shared import access

    access.allow_tool_reads()  # executors are called directly, outside a query turn
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("ingest", "evaluate", "all"), nargs="?", default="all")
    ap.add_argument("--tenant", default=TENANT)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--depth", type=int, default=300, help="chunks asked of each single-store run")
    ap.add_argument("--rrf-k", type=int, default=60)
    ap.add_argument("--timeout", type=float, default=10.0, help="per store call, seconds")
    ap.add_argument("--ingest-timeout", type=float, default=7200)
    ap.add_argument("--max-queries", type=int, default=None, help="smoke test: only the first N queries per split")
    ap.add_argument("--partial", action="store_true",
                    help="evaluate an incomplete ingestion: only queries whose relevant documents are all active "
                         "(the result is flagged PARTIAL and is not comparable with published figures)")
    ap.add_argument("--bulk", action="store_true",
                    help="ingest with bench/bulk_load.py (stage handlers in-process, no Kafka; also fills the "
                         "PostgreSQL text index) instead of publishing through Kafka to the workers")
    ap.add_argument("--skip-pg", action="store_true", help="do not index/evaluate the embedded profile's BM25")
    ap.add_argument("--no-tune", action="store_true", help="skip choosing RRF k/weights on the train split")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--runs-out", type=Path, default=Path("/tmp/scifact_runs.json"),
                    help="document rankings per system and query (a few MB; kept out of bench/results)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("elastic_transport", "neo4j", "httpx", "sentence_transformers", "manifold", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from manifold.shared.config import ManifoldSettings

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0})})
    sums = verify_checksums(args.data)
    log.info("SHA256SUMS verified for %d files", len(sums))
    corpus = load_corpus(args.data)
    ingestion = None
    if args.phase in ("ingest", "all"):
        if args.bulk:
            ingestion = ingest_bulk(settings, args.tenant, corpus, args.data)
        else:
            ingestion = ingest(settings, args.tenant, corpus, args.ingest_timeout)
        log.info("ingestion: %s", ingestion)
    if args.phase in ("evaluate", "all"):
        from manifold.ingest import lifecycle

        active = {e.document_id for e in lifecycle.build_ports(settings).manifest.entries(args.tenant)
                  if e.state == "active"} & {d["_id"] for d in corpus}
        queries, qrels = load_test(args.data)
        only_docs = None
        if len(active) < len(corpus):
            if not args.partial:
                raise SystemExit(f"only {len(active)} of {len(corpus)} documents are active; finish `ingest` first "
                                 "(or pass --partial for a clearly labelled, non-comparable subset run)")
            only_docs = active
            qrels = {q: rel for q, rel in qrels.items() if rel <= active}
            log.warning("PARTIAL CORPUS: %d of %d documents active; %d test queries have all their relevant "
                        "documents ingested", len(active), len(corpus), len(qrels))
        if args.max_queries:
            global MAX_QUERIES
            MAX_QUERIES = args.max_queries
            qrels = dict(sorted(qrels.items(), key=lambda kv: int(kv[0]))[:args.max_queries])
        tuning = None
        if not args.no_tune:
            log.info("tuning document-level RRF on the train split")
            tuning = tune_on_train(settings, args.tenant, args.data, args.timeout, args.depth, only_docs)
            log.info("train: best %s", tuning["best"])
        result = evaluate(settings, args.tenant, queries, qrels, depth=args.depth, rrf_k=args.rrf_k,
                          timeout_s=args.timeout, tuned=tuning, skip_pg=args.skip_pg)
        result["tuning_on_train"] = tuning
        runs = result.pop("runs")
        out = {"benchmark": "BEIR SciFact test (300 queries, 5,183 documents)",
               "machine": machine(), "commit": commit(), "data_sha256": sums, "tenant": args.tenant,
               "corpus_documents": len(corpus), "corpus_active_documents": len(active),
               "test_queries_scored": len(qrels),
               "ingestion": ingestion, **result,
               "target": {"system": "hybrid", "ndcg@10": 0.74, "recall@100": 0.95}, "notes": NOTES,
               "published": {"bm25_multifield_beir": 0.665, "bm25_flat_anserini": 0.6789,
                             "bm25_multifield_anserini": 0.6647, "minilm_dense": 0.645,
                             "bm25_minilm_rrf_k60": 0.7143, "bm25_minilm_convex": 0.7338}}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")
        # the document rankings (top 100 per query and system), for re-scoring without the stack
        args.runs_out.write_text(json.dumps(
            {name: {qid: ranking[:100] for qid, ranking in per_q.items()} for name, per_q in runs.items()}) + "\n")
        for name, s in out["systems"].items():
            log.info("%-16s %s", name, {k: v for k, v in s.items() if k != "label"})


if __name__ == "__main__":
    main()
