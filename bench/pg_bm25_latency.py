"""Embedded BM25 at 50,000 chunks: kept statistics vs statistics computed per question (issue 30, item 4).

Loads one tenant of the configured PostgreSQL (the dev stack's, or any migrated server) with at
least `--chunks` serving chunks of real text, through the real `PostgresTextIndex` adapter (its
analysis, postings and the migration-14 triggers) and the real `PostgresVersionManifest`
(staged, verified, activated), then asks `--queries` real questions with `PgBM25Executor` as the
query role, three ways, interleaved in the same run (the order rotates per question):

- **kept**: the executor as served: collection and term statistics read from `text_stats` /
  `text_df`, which the database keeps at publication;
- **computed**: the same executor with the kept statistics withheld (`kept_statistics` returns
  None), i.e. the statement as it was before migration 14: statistics aggregated over the tenant
  per question;
- **joined**: the kept statistics with the scoring shape as it was before migration 15 (each
  posting joined to its chunk for its field length, serving mark and analysis version;
  `joined_statement`). The postings' set-based active-version policy of migration 15 applies to
  every mode (it is the database's), so this isolates the join, not the policy change.

After loading it runs `ANALYZE`, as the embedded pipeline does after a batch. It reports
p50/p95/mean per mode (a statement past the step budget counts as a timeout, at its time), the ratios of kept to the other two, and whether each other mode returns the same top 10 as kept for every question
(the same contents at every rank, scores equal to 1e-9 relative: the ranking must not change), and writes
`bench/results/pg_bm25_latency.json` (machine, commit, tenant size).

Text: the BEIR SciFact abstracts (`../shared/data/beir-scifact`), cut at sentence ends into
chunks of at most 500 characters, loaded as `--copies` copies (document ids `c<k>-<id>`) until
the chunk target is reached; questions: SciFact's queries (a fixed random sample). Copies make
each term's document frequency a multiple of the single corpus's, so posting lists are as long
as a 50,000-chunk collection's would be. Shortcuts, for this benchmark only: no embeddings,
relational rows or graph (BM25 reads only the text index), and the manifest's expected store list
is the text index's manifest alone.

Usage: .venv/bin/python bench/pg_bm25_latency.py [--chunks 50000] [--queries 300] [--tenant bench-bm25-50k]
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


_POSTINGS_ALONE = """    FROM manifold.text_terms t
    JOIN q ON q.term = t.term
    JOIN df ON df.field = t.field AND df.term = t.term
    CROSS JOIN stats s"""
_JOINED = """    FROM manifold.text_terms t
    JOIN q ON q.term = t.term
    JOIN df ON df.field = t.field AND df.term = t.term
    JOIN manifold.text_chunks c ON c.tenant_id = t.tenant_id AND c.chunk_id = t.chunk_id
    CROSS JOIN stats s"""


def joined_statement(kept_sql: str) -> str:
    """The served statement as it was before migration 15: every posting joined to its chunk for
    the field length, the serving mark and the analysis version (same scores)."""
    out = kept_sql.replace(_POSTINGS_ALONE, _JOINED)
    out = out.replace("t.field_length::float8 AS len",
                      "CASE t.field WHEN 'text' THEN c.text_length ELSE c.title_length END::float8 AS len")
    out = out.replace("WHERE t.tenant_id = %(tenant)s AND t.text_schema_version = %(schema)s\n      AND "
                      "(%(docs)s::text[] IS NULL OR t.document_id",
                      "WHERE t.tenant_id = %(tenant)s AND c.serving AND c.text_schema_version = %(schema)s\n      AND "
                      "(%(docs)s::text[] IS NULL OR c.document_id")
    if out.count("text_chunks c") != 2 or "c.serving" not in out:
        raise RuntimeError("the served statement changed shape: update joined_statement()")
    return out


MODES = ("kept", "computed", "joined")


def measure(settings: Any, tenant: str, queries: list[str], warmup: int) -> dict[str, Any]:
    from manifold.query.executors import pg_lexical
    from manifold.query.plan import BM25SearchParams
    from manifold.shared import access

    access.allow_tool_reads()
    executor = pg_lexical.PgBM25Executor.from_settings(settings)
    kept_fn, kept_sql = pg_lexical.kept_statistics, pg_lexical.BM25_KEPT_SQL
    joined_sql = joined_statement(kept_sql)

    def run(query: str, mode: str) -> tuple[float, list[tuple[tuple[str, str], float]] | None, str]:
        if mode == "computed":
            pg_lexical.kept_statistics = lambda conn, tenant_id: None  # type: ignore[assignment]
        if mode == "joined":
            pg_lexical.BM25_KEPT_SQL = joined_sql  # type: ignore[misc]
        t0 = time.perf_counter()
        try:
            res = executor.run(BM25SearchParams(query=query, limit=10), tenant_id=tenant, timeout_s=30.0)
        except TimeoutError:  # past the statement budget (settings.query.statement_timeout_ms)
            return (time.perf_counter() - t0) * 1000, None, "timeout"
        finally:
            pg_lexical.kept_statistics, pg_lexical.BM25_KEPT_SQL = kept_fn, kept_sql  # type: ignore[misc]
        ms = (time.perf_counter() - t0) * 1000
        return ms, [(_content_key(h), float(h.score or 0.0)) for h in res.hits], str(res.result["statistics"])

    for q in queries[:warmup]:
        for mode in MODES:
            run(q, mode)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    timeouts = dict.fromkeys(MODES, 0)
    same = {"computed": 0, "joined": 0}
    compared = {"computed": 0, "joined": 0}
    differ: dict[str, list[str]] = {"computed": [], "joined": []}
    used = set()
    for i, q in enumerate(queries):
        order = MODES[i % 3:] + MODES[:i % 3]  # each mode goes first, second and third in turn
        got = {}
        for mode in order:
            ms, hits, stat = run(q, mode)
            times[mode].append(ms)
            got[mode] = hits
            timeouts[mode] += hits is None
            if mode == "kept":
                used.add(stat)
        for other in ("computed", "joined"):
            if got["kept"] is None or got[other] is None:
                continue  # a timeout: nothing to compare
            compared[other] += 1
            if same_ranking(got["kept"], got[other]):
                same[other] += 1
            else:
                differ[other].append(q)
    summaries = {m: summary(times[m]) for m in MODES}
    kept = summaries["kept"]
    return {**summaries, "statistics_used_by_kept_mode": sorted(used),
            "timeouts": timeouts, "statement_timeout_ms": settings.query.statement_timeout_ms,
            "ratio_kept_over_computed": {k: round(kept[k] / summaries["computed"][k], 3)
                                         for k in ("p50_ms", "p95_ms", "mean_ms")},
            "ratio_kept_over_joined": {k: round(kept[k] / summaries["joined"][k], 3)
                                       for k in ("p50_ms", "p95_ms", "mean_ms")},
            "same_top10_and_scores": same, "compared": compared,
            "same_means": "the same contents at every rank, scores equal to 1e-9 relative (copies of one chunk in "
                          "either order)", "questions": len(queries), "differing_questions": differ}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", default="bench-bm25-50k")
    parser.add_argument("--chunks", type=int, default=50_000, help="serving chunks to reach (whole copies)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
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
    queries = [json.loads(line)["text"] for line in (DATA / "queries.jsonl").read_text().splitlines() if line.strip()]
    random.Random(args.seed).shuffle(queries)
    result = measure(settings, args.tenant, queries[:args.queries], args.warmup)
    out = {"benchmark": "embedded BM25: postings alone with kept statistics vs computed statistics vs postings joined to chunks", "machine": machine_info(),
           "dataset": {**dataset, "copies": copies, "abstracts": len(corpus), "chunk_max_chars": MAX_CHARS,
                       "tenant": args.tenant, **loaded}, "result": result}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["result"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
