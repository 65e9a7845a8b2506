"""Vector search latency of the tenant's ACTIVE embedding configuration, HNSW and exact.

The served `VectorExecutor.search_vector` (same SQL, tenant filter, policies and final active
check as a query worker) is timed for each query text, once per mode, after one warm-up query.
Queries are embedded beforehand (not timed). The result is merged into the output file under
the active configuration's name, so measuring two configurations is:

    .venv/bin/python bench/vector_config_latency.py --tenant scifact            # primary active
    .venv/bin/manifold embeddings activate minilm-titled --tenant scifact
    .venv/bin/python bench/vector_config_latency.py --tenant scifact
    .venv/bin/manifold embeddings activate primary --tenant scifact

`primary` searches `chunks.embedding`; any other configuration searches `chunk_vectors`, whose
one HNSW index holds every configuration (filtered by `config` with pgvector's iterative scan).
Run it alone on the machine; the figures are wall-clock milliseconds per search.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics_eval import commit, machine, percentile  # noqa: E402 - after bench/ joins sys.path

from manifold.query.executors.vector import VectorExecutor
from manifold.shared.config import ManifoldSettings
from manifold.shared.embedding import SentenceTransformerEmbedder
from manifold.shared.stores.pg_connections import TenantConnections

OUT = Path(__file__).resolve().parent / "results" / "vector_config_latency.json"
QUERIES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir-scifact" / "queries.jsonl"


def main() -> None:
    from manifold.shared import access

    access.allow_tool_reads()  # executors are called directly, outside a query turn
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenant", default="scifact")
    ap.add_argument("--queries", type=Path, default=QUERIES, help="JSON lines with a `text` field")
    ap.add_argument("--count", type=int, default=100, help="query texts used (the first N)")
    ap.add_argument("--limit", type=int, default=100, help="neighbours per search (the hybrid's candidates)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    settings = ManifoldSettings()
    texts = [json.loads(line)["text"] for line in args.queries.read_text().splitlines() if line.strip()]
    texts = texts[:args.count]
    executor = VectorExecutor(TenantConnections(settings.postgres.query_conninfo(), vectors=True),
                              SentenceTransformerEmbedder(), settings.query)
    vectors = SentenceTransformerEmbedder().encode(texts)
    config = None
    modes: dict[str, dict[str, float]] = {}
    for mode in ("hnsw", "exact"):
        executor.search_vector(vectors[0], tenant_id=args.tenant, limit=args.limit, timeout_s=30, mode=mode)
        times = []
        for vector in vectors:
            start = time.perf_counter()
            found = executor.search_vector(vector, tenant_id=args.tenant, limit=args.limit, timeout_s=30, mode=mode)
            times.append(1000 * (time.perf_counter() - start))
            config = found.config
        modes[mode] = {"p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1),
                       "mean_ms": round(statistics.fmean(times), 1)}
    assert config is not None
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault("configs", {})[config] = {
        "tenant": args.tenant, "queries": len(texts), "limit": args.limit, "commit": commit(),
        "machine": machine(), **modes}
    results["benchmark"] = "vector search latency per active embedding configuration (bench/vector_config_latency.py)"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(config, json.dumps(modes))


if __name__ == "__main__":
    main()
