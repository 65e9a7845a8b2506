"""Embedded BM25 at 50,000 chunks: bounded reading vs every posting vs computed statistics (issue 30, item 4).

Loads one tenant of the configured PostgreSQL (the dev stack's, or any migrated server) with at
least `--chunks` serving chunks of real text, through the real `PostgresTextIndex` adapter (its
analysis, postings and the migration-14 triggers) and the real `PostgresVersionManifest`
(staged, verified, activated), then asks `--queries` SciFact questions of one split with
`PgBM25Executor` as the query role, four ways, interleaved in the same run (the order rotates
per question):

- **served**: the executor as served: statistics kept at publication (`text_stats` /
  `text_df`), each term's best `query.bm25_postings_depth` postings, the best
  `query.bm25_candidates` chunks scored exactly (migration 17);
- **all_postings**: the same with a depth no list reaches, i.e. every posting of every query
  term read, as before migration 17;
- **computed**: every posting and the kept statistics withheld (`kept_statistics` returns None),
  i.e. statistics aggregated over the tenant per question, as before migration 14;
- **words_only**: as served, without the question's adjacent words joined into one
  (`query.bm25_join_adjacent_words` off: the cost and the nDCG of `analysis.compound_terms`).

After loading it runs `ANALYZE`, as the embedded pipeline does after a batch. It reports
p50/p95/mean per mode (a statement past the step budget counts as a timeout, at its time), the
ratios of served to the other two, SciFact nDCG@10 per mode (the copies of an abstract count as
one document), and on how many questions each other mode has the same top 10 as served (the
same contents at every rank, scores equal to 1e-9 relative), and writes
`bench/results/pg_bm25_latency.json` (machine, commit, tenant size). Settings are chosen with
`--split train`; the quoted figures are `--split test`.

Text: the BEIR SciFact abstracts (`../shared/data/beir-scifact`), cut at sentence ends into
chunks of at most 500 characters, loaded as `--copies` copies (document ids `c<k>-<id>`) until
the chunk target is reached; questions: SciFact's queries that have judgements in the split (a fixed random sample). Copies make
each term's document frequency a multiple of the single corpus's, so posting lists are as long
as a 50,000-chunk collection's would be. Shortcuts, for this benchmark only: no embeddings,
relational rows or graph (BM25 reads only the text index), and the manifest's expected store list
is the text index's manifest alone.

Usage: .venv/bin/python bench/pg_bm25_latency.py [--chunks 50000] [--queries 300] [--split test] [--tenant bench-bm25-50k]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "beir-scifact"
OUT = ROOT / "bench" / "results" / "pg_bm25_latency.json"
MAX_CHARS = 500
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def pieces(text: str, max_chars: int = MAX_CHARS) -> list[str]:
    """Sentences packed into chunks of at most `max_chars` (a longer sentence stands alone)."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text.strip()):
        if out and len(out[-1]) + 1 + len(sentence) <= max_chars:
            out[-1] += " " + sentence
        elif sentence:
            out.append(sentence)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": round(percentile(ms, 0.5), 2), "p95_ms": round(percentile(ms, 0.95), 2),
            "mean_ms": round(statistics.fmean(ms), 2)}


def build_documents(tenant: str, corpus: list[dict[str, Any]], copies: int) -> list[Any]:
    from manifold.ingest.chunk import CHUNKER_VERSION
    from manifold.shared.artifacts import Chunk, DocRef, ExtractedDocument, PipelineVersions, Section
    from manifold.shared.ids import child_id, version_scope
    from manifold.shared.stores.pg_schema import PG_SCHEMA_VERSION

    versions = PipelineVersions(parser="bench", chunker=CHUNKER_VERSION, embedding_model="none",
                                embedding_revision="none", embedding_dim=384, embedding_normalized=True,
                                extraction="bench", pg_schema=PG_SCHEMA_VERSION, es_schema="-", graph_schema="-",
                                chunk_max_chars=MAX_CHARS, chunk_overlap_chars=0)
    docs = []
    for k in range(copies):
        for row in corpus:
            document_id = f"c{k}-{row['_id']}"
            body = pieces(row.get("text") or "") or [row.get("title") or document_id]
            sha = hashlib.sha256(f"{document_id}\n{row.get('text')}".encode()).hexdigest()
            ref = DocRef(tenant_id=tenant, document_id=document_id, version=1, content_sha256=sha,
                         media_type="text/plain", metadata={"title": row.get("title") or ""})
            scope = version_scope(tenant, document_id, 1, sha, versions.fingerprint())
            section = Section(section_id=child_id("sec", scope, 0), ordinal=0, title=row.get("title") or "",
                              path=[row.get("title") or ""])
            chunks = [Chunk(chunk_id=child_id("chunk", scope, i), section_id=section.section_id, ordinal=i,
                            kind="text", text=t, content_sha256=hashlib.sha256(t.encode()).hexdigest())
                      for i, t in enumerate(body)]
            docs.append(ExtractedDocument(doc=ref, versions=versions, sections=[section], chunks=chunks,
                                          vectors=[[0.0] * 384 for _ in chunks], entities=[], relations=[],
                                          records=[], review=[]))
    return docs


def load(settings: Any, tenant: str, docs: list[Any], batch: int = 200) -> dict[str, Any]:
    """Write, stage, verify, activate and mark every document not yet active (resumable)."""
    from manifold.shared.artifacts import LoadNotice
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.pg_text import PostgresTextIndex

    text = PostgresTextIndex.from_settings(settings)
    manifest = PostgresVersionManifest.from_settings(settings)
    active = {d for d, _v, state in manifest.states(tenant) if state == "active"}
    todo = [d for d in docs if d.doc.document_id not in active]
    started = time.perf_counter()
    for i in range(0, len(todo), batch):
        part = todo[i:i + batch]
        manifests = text.write_versions(part)
        with manifest.batch(tenant):
            for doc, m in zip(part, manifests, strict=True):
                if isinstance(m, Exception):
                    raise m
                manifest.stage(LoadNotice(doc=doc.doc, versions=doc.versions, stores=[m]))
                manifest.mark_verified(tenant, doc.doc.document_id, 1)
        text.set_serving_many(tenant, [(d.doc.document_id, 1) for d in part], True)
        with manifest.batch(tenant):
            for doc in part:
                manifest.activate(tenant, doc.doc.document_id, 1)
        done = i + len(part)
        if done % 2000 < batch or done == len(todo):
            print(f"  loaded {done}/{len(todo)} documents ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return {"documents_loaded_now": len(todo), "load_s": round(time.perf_counter() - started, 1)}


def size(settings: Any, tenant: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(settings.postgres.conninfo()) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM manifold.text_chunks WHERE tenant_id = %(t)s AND serving),"
                           " (SELECT count(*) FROM manifold.text_terms WHERE tenant_id = %(t)s),"
                           " (SELECT count(*) FROM manifold.text_df WHERE tenant_id = %(t)s)",
                           {"t": tenant}).fetchone()
    assert row is not None
    return {"serving_chunks": int(row[0]), "postings": int(row[1]), "df_rows": int(row[2])}


def _content_key(hit: Any) -> tuple[str, str]:
    """A hit as its content: the SciFact id (without the copy prefix) and its text. The copies of
    one chunk score the same up to the last bit of the float sum, so which copy comes first is
    noise (the summation order), not ranking."""
    return hit.document_id.split("-", 1)[-1], hashlib.sha256(hit.text.encode()).hexdigest()[:16]


def same_ranking(a: list[tuple[tuple[str, str], float]] | None, b: list[tuple[tuple[str, str], float]] | None,
                 rel: float = 1e-9) -> bool:
    """The same contents at every rank with the same scores (relative 1e-9); equal scores in
    either order."""
    if a is None or b is None or len(a) != len(b):
        return False

    def canonical(hits: list[tuple[tuple[str, str], float]]) -> list[tuple[tuple[str, str], float]]:
        return sorted(hits, key=lambda h: (-round(h[1], 6), h[0]))

    return all(ka == kb and abs(sa - sb) <= rel * max(1.0, abs(sa))
               for (ka, sa), (kb, sb) in zip(canonical(a), canonical(b), strict=True))


MODES = ("served", "all_postings", "computed", "words_only")


def ranking(hits: list[Any], k: int = 10) -> list[str]:
    """SciFact ids in rank order, each once (the copies of an abstract count as one)."""
    out: list[str] = []
    for h in hits:
        doc = h.document_id.split("-", 1)[-1]
        if doc not in out:
            out.append(doc)
    return out[:k]


def measure(settings: Any, tenant: str, queries: list[tuple[str, str]], qrels: dict[str, set[str]],
            warmup: int) -> dict[str, Any]:
    from metrics_eval import ndcg_at_k

    from manifold.query.executors import pg_lexical
    from manifold.query.plan import BM25SearchParams
    from manifold.shared import access
    from manifold.shared.stores.pg_connections import TenantConnections

    access.allow_tool_reads()
    db = TenantConnections(settings.postgres.query_conninfo())
    depth = settings.query.bm25_postings_depth
    every = pg_lexical.PgBM25Executor(db, settings.query.model_copy(update={"bm25_postings_depth": 10_000_000}))
    words = pg_lexical.PgBM25Executor(db, settings.query.model_copy(update={"bm25_join_adjacent_words": False}))
    executors = {"served": pg_lexical.PgBM25Executor(db, settings.query), "all_postings": every, "computed": every,
                 "words_only": words}
    kept_fn = pg_lexical.kept_statistics

    def run(query: str, mode: str) -> tuple[float, list[Any] | None, str]:
        if mode == "computed":
            pg_lexical.kept_statistics = lambda conn, tenant_id: None  # type: ignore[assignment]
        t0 = time.perf_counter()
        try:
            res = executors[mode].run(BM25SearchParams(query=query, limit=40), tenant_id=tenant, timeout_s=30.0)
        except TimeoutError:  # past the statement budget (settings.query.statement_timeout_ms)
            return (time.perf_counter() - t0) * 1000, None, "timeout"
        finally:
            pg_lexical.kept_statistics = kept_fn  # type: ignore[misc]
        ms = (time.perf_counter() - t0) * 1000
        return ms, list(res.hits), str(res.result["statistics"])

    def top10(hits: list[Any]) -> list[tuple[tuple[str, str], float]]:
        return [(_content_key(h), float(h.score or 0.0)) for h in hits[:10]]

    for _qid, q in queries[:warmup]:
        for mode in MODES:
            run(q, mode)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    ndcg: dict[str, list[float]] = {m: [] for m in MODES}
    timeouts = dict.fromkeys(MODES, 0)
    same = {"all_postings": 0, "computed": 0, "words_only": 0}
    used = set()
    for i, (qid, q) in enumerate(queries):
        order = MODES[i % len(MODES):] + MODES[:i % len(MODES)]  # each mode goes first, second, … in turn
        got: dict[str, list[Any] | None] = {}
        for mode in order:
            ms, hits, stat = run(q, mode)
            times[mode].append(ms)
            got[mode] = hits
            timeouts[mode] += hits is None
            ndcg[mode].append(ndcg_at_k(ranking(hits or []), qrels[qid], 10))
            if mode == "served":
                used.add(stat)
        for other in same:
            first, second = got["served"], got[other]
            if first is not None and second is not None and same_ranking(top10(first), top10(second)):
                same[other] += 1
    summaries = {m: summary(times[m]) for m in MODES}
    served = summaries["served"]
    return {**summaries, "postings_depth_served": depth, "statistics_used_by_served_mode": sorted(used),
            "timeouts": timeouts, "statement_timeout_ms": settings.query.statement_timeout_ms,
            "ndcg_at_10": {m: round(sum(v) / len(v), 4) for m, v in ndcg.items()},
            "ratio_served_over_all_postings": {k: round(served[k] / summaries["all_postings"][k], 3)
                                               for k in ("p50_ms", "p95_ms", "mean_ms")},
            "ratio_served_over_computed": {k: round(served[k] / summaries["computed"][k], 3)
                                           for k in ("p50_ms", "p95_ms", "mean_ms")},
            "ratio_served_over_words_only": {k: round(served[k] / summaries["words_only"][k], 3)
                                             for k in ("p50_ms", "p95_ms", "mean_ms")},
            "same_top10_and_scores_as_served": same,
            "same_means": "the same contents at every rank, scores equal to 1e-9 relative (copies of one chunk in "
                          "either order)", "questions": len(queries)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", default="bench-bm25-50k")
    parser.add_argument("--chunks", type=int, default=50_000, help="serving chunks to reach (whole copies)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--split", default="test", choices=("train", "test"),
                        help="SciFact queries and judgements (choose settings on train, report test)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT / "bench"))
    from query_latency import machine_info

    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    corpus = [json.loads(line) for line in (DATA / "corpus.jsonl").read_text().splitlines() if line.strip()]
    per_copy = sum(len(pieces(r.get("text") or "") or [""]) for r in corpus)
    copies = max(1, -(-args.chunks // per_copy))
    docs = build_documents(args.tenant, corpus, copies)
    print(f"{len(corpus)} abstracts, {per_copy} chunks a copy, {copies} copies", file=sys.stderr)
    loaded = load(settings, args.tenant, docs)
    from manifold.deploy.compose.embedded import refresh_statistics
    refresh_statistics(settings)  # what the embedded pipeline does after a batch of publications
    dataset = size(settings, args.tenant)
    from eval_scifact import load_test
    by_id, qrels = load_test(DATA, args.split)
    queries = sorted(by_id.items())
    random.Random(args.seed).shuffle(queries)
    result = measure(settings, args.tenant, queries[:args.queries], qrels, args.warmup)
    out = {"benchmark": "embedded BM25: bounded reading (served) vs every posting vs statistics computed per question", "machine": machine_info(),
           "split": args.split, "dataset": {**dataset, "copies": copies, "abstracts": len(corpus), "chunk_max_chars": MAX_CHARS,
                       "tenant": args.tenant, **loaded}, "result": result}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["result"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
