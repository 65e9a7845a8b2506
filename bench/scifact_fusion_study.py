"""How far can BM25 + MiniLM go on SciFact? Fusion variants on the TRAIN split only.

A study, not a served system: it asks whether any cheap extra signal or fusion rule lifts hybrid
nDCG@10 above the linear fusion the query service serves, so that the target of issue 15
(hybrid ≥ 0.74 on the test split) can be judged without touching the test split. Every variant
is scored on the 809 train queries (`eval_scifact.load_test(..., "train")`); nothing here reads
the test qrels.

Inputs, from a stack that holds the SciFact tenant (`bench/eval_scifact.py ingest`) with the
`primary` embedding configuration active:
- BM25: the served `BM25Executor` (Elasticsearch, stemmed analysis), 100 chunks per query;
- dense: every serving chunk's stored vector (read as the query role, so under the tenant's
  policies) and the served embedder for the queries; cosine is computed exactly for every chunk.

Documents are scored from their chunks (a document's score in a branch is its best chunk's), each
branch is z-scored over its own top-100 chunk scores, a document absent from BM25's 100 gets that
branch's lowest value, and the candidates are BM25's and the dense branch's top-100 documents.
Variants:
- `convex`: alpha * z_bm25 + (1 - alpha) * z_dense over a grid of alpha (the served fusion, at
  document level);
- `rrf`: weighted RRF over the two document rankings;
- `prf`: dense pseudo-relevance feedback (Rocchio: the query vector plus beta times the mean of the
  first pass's top documents' best chunk vectors, then a second fusion);
- `multi_chunk`: a document's other chunks add lambda times their (sum of BM25 / mean cosine);
- `adaptive_alpha`: alpha per query from a query-performance feature (top z-score or top-10 gap of
  either branch), a linear rule fitted on the same train queries (an upper bound for such rules);
- `oracle_alpha`: the best alpha per query (not a method: the room any per-query weighting has);
- `sentences` (with `--sentences`, about 15 minutes): every abstract sentence embedded, a
  document's best sentence cosine (z-scored over the top-100 sentences) added with a weight.

Writes bench/results/scifact_fusion_study.json.
Usage: .venv/bin/python bench/scifact_fusion_study.py [--sentences] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_scifact as E  # noqa: E402  (the benchmark's loaders and metrics)
from metrics_eval import commit  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "scifact_fusion_study.json"
ALPHAS = tuple(round(0.05 * i, 2) for i in range(6, 15))


class Study:
    """Per-query inputs (BM25 chunk hits, exact cosines) and document-level fusion over them."""

    def __init__(self, chunk_docs: list[str], matrix: np.ndarray, qvecs: dict[str, np.ndarray],
                 bm25: dict[str, list[tuple[str, float]]], qrels: dict[str, set[str]]) -> None:
        self.docs = sorted(set(chunk_docs))
        self.index = {d: i for i, d in enumerate(self.docs)}
        self.row_doc = np.array([self.index[d] for d in chunk_docs])
        self.chunks_per_doc = np.bincount(self.row_doc, minlength=len(self.docs))
        self.matrix, self.qvecs, self.bm25, self.qrels = matrix, qvecs, bm25, qrels

    def doc_max(self, values: np.ndarray) -> np.ndarray:
        out = np.full(len(self.docs), -np.inf)
        np.maximum.at(out, self.row_doc, values)
        return out

    def doc_sum(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(self.docs))
        np.add.at(out, self.row_doc, values)
        return out

    def signals(self, qid: str, qvec: np.ndarray | None = None) -> dict[str, Any]:
        cos = self.matrix @ (self.qvecs[qid] if qvec is None else qvec)
        top = np.argsort(-cos)[:100]
        bm_max: dict[str, float] = {}
        bm_sum: dict[str, float] = defaultdict(float)
        for doc, score in self.bm25[qid]:
            bm_max[doc] = max(bm_max.get(doc, -np.inf), score)
            bm_sum[doc] += score
        return {"cos": cos, "dense": self.doc_max(cos), "dense_sum": self.doc_sum(cos), "dense_stat": cos[top],
                "bm": bm_max, "bm_sum": bm_sum, "bm_stat": np.array([s for _, s in self.bm25[qid]] or [0.0]),
                "candidates": set(bm_max) | {self.docs[self.row_doc[i]] for i in top}}

    @staticmethod
    def z(value: float | np.ndarray, stat: np.ndarray) -> Any:
        return (value - stat.mean()) / (stat.std() or 1.0)

    def fuse(self, sig: dict[str, Any], alpha: float, *, lb: float = 0.0, lv: float = 0.0,
             extra: tuple[float, np.ndarray, np.ndarray] | None = None) -> list[str]:
        """Documents by alpha * z_bm25 + (1 - alpha) * z_dense (+ an optional third signal)."""
        low = self.z(sig["bm_stat"].min(), sig["bm_stat"])
        scores = {}
        for doc in sig["candidates"]:
            i = self.index[doc]
            bm = sig["bm"].get(doc)
            zb = self.z(bm + lb * (sig["bm_sum"][doc] - bm), sig["bm_stat"]) if bm is not None else low
            others = (sig["dense_sum"][i] - sig["dense"][i]) / max(1, self.chunks_per_doc[i] - 1)
            zv = self.z(sig["dense"][i] + lv * others, sig["dense_stat"])
            score = alpha * zb + (1 - alpha) * zv
            if extra is not None:
                weight, values, stat = extra
                score += weight * self.z(values[i], stat)
            scores[doc] = score
        return sorted(scores, key=lambda d: (-scores[d], d))[:100]

    def score(self, runs: dict[str, list[str]]) -> dict[str, float]:
        return E.score_runs(runs, self.qrels)


def load_inputs(data: Path, tenant: str) -> tuple[list[str], np.ndarray, dict[str, np.ndarray],
                                                   dict[str, list[tuple[str, float]]], dict[str, set[str]],
                                                   dict[str, str]]:
    from elasticsearch import Elasticsearch

    from manifold.query.executors.bm25 import BM25Executor
    from manifold.query.plan import BM25SearchParams
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    settings = ManifoldSettings()
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    with pg.transaction(tenant) as conn:
        rows = conn.execute("SELECT c.document_id, c.embedding FROM manifold.serving_chunks c "
                            "WHERE c.tenant_id = %s AND c.embedding IS NOT NULL ORDER BY c.chunk_id",
                            (tenant,)).fetchall()
    chunk_docs = [r[0] for r in rows]
    matrix = np.array([r[1].to_numpy() for r in rows], dtype=np.float32)
    queries, qrels = E.load_test(data, "train")
    ids = sorted(qrels, key=int)
    embedder = SentenceTransformerEmbedder()
    qvecs = dict(zip(ids, np.asarray(embedder.encode([queries[q] for q in ids]), dtype=np.float32), strict=True))
    bm25 = BM25Executor(Elasticsearch(settings.elasticsearch.url, request_timeout=30), pg, settings.query)
    hits = {}
    for qid in ids:
        res = bm25.run(BM25SearchParams.model_construct(query=queries[qid], limit=100, document_ids=None),
                       tenant_id=tenant, timeout_s=10)
        hits[qid] = [(h.document_id, float(h.score)) for h in res.hits]
    return chunk_docs, matrix, qvecs, hits, qrels, queries


def sentence_signal(data: Path, study: Study) -> tuple[np.ndarray, list[str]]:
    """Every corpus sentence embedded: (vectors, document id per sentence)."""
    from manifold.shared.embedding import SentenceTransformerEmbedder

    docs, texts = [], []
    for line in (data / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(])", doc["text"]):
            if sentence.strip() and doc["_id"] in study.index:
                docs.append(doc["_id"])
                texts.append(sentence.strip())
    return np.asarray(SentenceTransformerEmbedder().encode(texts), dtype=np.float32), docs


def main() -> None:
    from manifold.shared import access

    access.allow_tool_reads()  # executors are called directly, outside a query turn
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=E.DATA)
    ap.add_argument("--tenant", default=E.TENANT)
    ap.add_argument("--sentences", action="store_true", help="also embed every sentence (about 15 minutes)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    started = time.monotonic()
    chunk_docs, matrix, qvecs, bm25, qrels, _ = load_inputs(args.data, args.tenant)
    study = Study(chunk_docs, matrix, qvecs, bm25, qrels)
    ids = sorted(qrels, key=int)
    sig = {q: study.signals(q) for q in ids}
    out: dict[str, Any] = {"split": "train", "queries": len(ids), "chunks": len(chunk_docs)}

    convex = {a: study.score({q: study.fuse(sig[q], a) for q in ids}) for a in ALPHAS}
    best_alpha = max(convex, key=lambda a: convex[a]["ndcg@10"])
    out["convex"] = {"grid": {str(a): r["ndcg@10"] for a, r in convex.items()},
                     "best": {"alpha": best_alpha, **convex[best_alpha]}}
    bm_rank = {q: list(dict.fromkeys(d for d, _ in bm25[q])) for q in ids}
    dense_rank = {q: [study.docs[i] for i in np.argsort(-sig[q]["dense"])[:100]] for q in ids}
    out["rrf"] = {f"k={k},w={w}": study.score({q: E.rrf_docs({"bm25": bm_rank[q], "vector": dense_rank[q]}, k=k,
                                                              weights={"bm25": w, "vector": 1.0}) for q in ids})["ndcg@10"]
                  for k in (5, 20, 60) for w in (1.0, 1.25)}

    prf = {}
    for beta in (0.5, 1.0):
        runs = {}
        for q in ids:
            first = study.fuse(sig[q], best_alpha)[:3]
            best_rows = [max(np.flatnonzero(study.row_doc == study.index[d]), key=lambda r, s=sig[q]: s["cos"][r])
                         for d in first]
            vec = qvecs[q] + beta * matrix[best_rows].mean(axis=0)
            runs[q] = study.fuse(study.signals(q, vec / np.linalg.norm(vec)), best_alpha)
        prf[f"beta={beta},docs=3"] = study.score(runs)
    out["prf"] = prf
    out["multi_chunk"] = {f"bm25_sum={lb},dense_mean={lv}": study.score(
        {q: study.fuse(sig[q], best_alpha, lb=lb, lv=lv) for q in ids})["ndcg@10"]
        for lb, lv in ((0.1, 0.0), (0.3, 0.0), (0.0, 0.1), (0.0, 0.3))}

    per_alpha = {a: {q: E.ndcg_at_k(study.fuse(sig[q], a), qrels[q], 10) for q in ids} for a in ALPHAS}
    out["oracle_alpha"] = round(float(np.mean([max(per_alpha[a][q] for a in ALPHAS) for q in ids])), 4)
    features = {
        "bm25_top_z": {q: float(study.z(sig[q]["bm_stat"].max(), sig[q]["bm_stat"])) for q in ids},
        "dense_top_z": {q: float(study.z(sig[q]["dense_stat"].max(), sig[q]["dense_stat"])) for q in ids},
        "bm25_gap10": {q: float(study.z(sig[q]["bm_stat"][0], sig[q]["bm_stat"])
                                - study.z(sig[q]["bm_stat"][min(9, len(sig[q]["bm_stat"]) - 1)], sig[q]["bm_stat"]))
                       for q in ids},
    }
    adaptive = {}
    for name, f in features.items():
        values = np.array([f[q] for q in ids])
        mid, spread = float(np.median(values)), float(values.std() or 1.0)
        best = None
        for a0 in (0.5, 0.55, 0.6):
            for a1 in (-0.1, -0.05, 0.05, 0.1):
                chosen = {q: min(ALPHAS, key=lambda a, q=q: abs(a - (a0 + a1 * (f[q] - mid) / spread))) for q in ids}
                value = float(np.mean([per_alpha[chosen[q]][q] for q in ids]))
                if best is None or value > best["ndcg@10"]:
                    best = {"ndcg@10": round(value, 4), "a0": a0, "a1": a1}
        adaptive[name] = best
    out["adaptive_alpha"] = adaptive

    if args.sentences:
        vectors, sentence_docs = sentence_signal(args.data, study)
        rows = np.array([study.index[d] for d in sentence_docs])
        grid = {}
        for weight in (0.15, 0.25):
            runs = {}
            for q in ids:
                cos = vectors @ qvecs[q]
                doc_best = np.full(len(study.docs), -np.inf)
                np.maximum.at(doc_best, rows, cos)
                runs[q] = study.fuse(sig[q], best_alpha, extra=(weight, doc_best, np.sort(cos)[-100:]))
            grid[f"weight={weight}"] = study.score(runs)["ndcg@10"]
        out["sentences"] = {"sentences": len(sentence_docs), "grid": grid}
    out["seconds"] = round(time.monotonic() - started, 1)
    out["commit"] = commit()
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("convex", "oracle_alpha", "adaptive_alpha")}, indent=1))


if __name__ == "__main__":
    main()
