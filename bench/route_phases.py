"""Where a single route's worker time goes: every store statement and the query embedding, timed
inside the served `QueryService.answer` (no Kafka), next to the route's whole answer time.

For each route (`bm25_search`, `vector_search`, `hybrid_search`) the script asks `--n` one-step
explicit plans, as `bench/query_latency.py` does over Kafka, through `build_answerer(settings)`
(the service a query worker runs) as the tenant's principal. While it answers, three class-level
wrappers record wall time: `psycopg.Connection.execute` (each statement, labelled by its first
words: set_config, the active-configuration read, the count, the HNSW search, the final check,
…), `Elasticsearch.search`, and the query encoder (`SentenceTransformerEmbedder.encode`).
"other" is the answer's time minus everything recorded: planning, guard, fusion, the evidence
pack, the trace, Python. The medians per phase show which part of the route ÷ raw ratio is
store work, which is the embedding and which is the service itself.

Usage (a loaded tenant, e.g. after `bench/bulk_load.py`):
  .venv/bin/python bench/route_phases.py [--tenant bench-q50k] [--n 60]
      [--out bench/results/route_phases.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

_LABELS = (
    ("select set_config('manifold.tenant_id'", "tenant set_config"),
    ("select set_config('manifold.principal'", "principal set_config"),
    ("select set_config('statement_timeout'", "timeout set_config"),
    ("select set_config('hnsw.ef_search'", "hnsw set_config"),
    ("select set_config('enable_indexscan'", "exact set_config"),
    ("select count(*) from (select 1 from manifold.chunks", "vector count"),
    ("with nn as", "hnsw search"),
    ("with scored as materialized", "exact search"),
    ("with knn as", "hnsw search (parallel config)"),
)


def _label(sql: Any) -> str:
    text = " ".join(str(sql.as_string(None) if hasattr(sql, "as_string") else sql).split()).lower()
    for prefix, name in _LABELS:
        if text.startswith(prefix):
            return name
    if "embedding_configs" in text:
        return "active config"
    if "version_manifest" in text and "active" in text:
        return "active versions (final check)"
    return "sql: " + text[:60]


class Recorder:
    """Accumulates the wall time of each labelled call made during one answer."""

    def __init__(self) -> None:
        self.current: dict[str, float] | None = None

    @contextmanager
    def answer(self) -> Iterator[dict[str, float]]:
        self.current = defaultdict(float)
        try:
            yield self.current
        finally:
            self.current = None

    def wrap(self, owner: Any, name: str, label: Callable[..., str]) -> None:
        original = getattr(owner, name)
        recorder = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if recorder.current is not None:
                    recorder.current[label(*args, **kwargs)] += (time.perf_counter() - t) * 1000

        setattr(owner, name, timed)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "mean_ms": round(statistics.fmean(ordered), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenant", default="bench-q50k")
    ap.add_argument("--n", type=int, default=60, help="answers per route (after 5 warm-up answers)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "route_phases.json")
    args = ap.parse_args()
    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")

    import psycopg
    from elasticsearch import Elasticsearch
    from query_latency import machine_info

    from manifold.deploy.compose.embedded import warm_up
    from manifold.query.composition import build_answerer
    from manifold.query.types import Principal, QueryRequest
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder

    rec = Recorder()
    rec.wrap(psycopg.Connection, "execute", lambda _conn, sql, *a, **k: _label(sql))
    rec.wrap(Elasticsearch, "search", lambda *a, **k: "elasticsearch search")
    rec.wrap(SentenceTransformerEmbedder, "encode", lambda *a, **k: "query embedding")

    settings = ManifoldSettings()
    answerer = build_answerer(settings)
    warm_up(answerer)
    principal = Principal(tenant_id=args.tenant, subject="route-phases")
    rng = random.Random(args.seed)
    words = ["supplier", "invoice", "payment terms", "delivery", "contract renewal", "warranty", "late fee",
             "quality audit", "shipping", "discount", "penalty clause", "purchase order", "credit note",
             "framework agreement", "price list", "freight", "packaging", "inspection", "tender", "escalation"]
    routes: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        for operator in ("bm25_search", "vector_search", "hybrid_search"):
            phases: dict[str, list[float]] = defaultdict(list)
            totals: list[float] = []
            for i in range(args.n + 5):
                query = " ".join(rng.sample(words, 2))
                plan = {"steps": [{"id": "s1", "operator": operator, "params": {"query": query, "limit": 10}}]}
                request = QueryRequest(request_id=f"rp-{uuid.uuid4().hex[:12]}", reply_topic="manifold.query.replies",
                                       deadline=datetime.now(UTC) + timedelta(seconds=30), plan=plan)
                with rec.answer() as spent:
                    t = time.perf_counter()
                    reply = answerer.answer(request, principal)
                    total = (time.perf_counter() - t) * 1000
                if reply.status == "error":
                    raise SystemExit(f"{operator}: {reply.status} {reply.answer}")
                if i < 5:
                    continue
                totals.append(total)
                for name, ms in spent.items():
                    phases[name].append(ms)
                phases["other (service, Python)"].append(total - sum(spent.values()))
            routes[operator] = {"answer": _summary(totals), "phases": {
                name: {**_summary(values + [0.0] * (len(totals) - len(values))), "calls_with": len(values)}
                for name, values in sorted(phases.items(), key=lambda kv: -statistics.fmean(kv[1]))}}
    finally:
        answerer.close()
    out = {"benchmark": "route_phases", "machine": machine_info(), "tenant": args.tenant, "n_per_route": args.n,
           "method": __doc__.split("\n\n")[1].replace("\n", " "), "routes": routes,
           "elapsed_s": round(time.perf_counter() - started, 1),
           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for operator, data in routes.items():
        print(f"{operator}: answer p50 {data['answer']['p50_ms']} ms")
        for name, s in data["phases"].items():
            print(f"    {name:40s} p50 {s['p50_ms']:8.2f}  mean {s['mean_ms']:8.2f}  ({s['calls_with']} answers)")


if __name__ == "__main__":
    main()
