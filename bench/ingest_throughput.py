"""Ingestion throughput through the whole Kafka pipeline on the local stack.

Generates a mixed corpus (`ingest.sample_corpus`, round-robin over md/csv/json/html/txt/eml),
publishes it with the upstream client under a fresh tenant, runs every worker role in this
process (exactly what `manifold workers` runs), and waits until every document is loaded.
Then, in the same run, it encodes the same chunk texts directly with `model.encode` (same
model, same batch size) to show how much of the pipeline's time the model itself accounts for.

Reports end-to-end docs/s and chunks/s, per-stage docs/s (messages over the time that stage's
handler spent, i.e. what the stage could sustain alone on this machine), and the ratio
pipeline chunks/s ÷ raw encode chunks/s. Writes bench/results/ingest_throughput.json.

Usage: .venv/bin/python bench/ingest_throughput.py [--docs 2000]
(the stack must be up and migrated: `manifold stack up && manifold migrate`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psycopg

from manifold.ingest import ROLES, workers
from manifold.ingest.sample_corpus import write_corpus
from manifold.shared import metrics
from manifold.shared.config import ManifoldSettings
from manifold.shared.cli import _upstream_client


def _sample(metric, stage: str, suffix: str) -> float:
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith(suffix) and sample.labels.get("stage") == stage:
                return float(sample.value)
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ingest_throughput.json")
    args = ap.parse_args()

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (README "Keys")
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0})})
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    root = Path(tempfile.mkdtemp(prefix="manifold-corpus-"))
    write_corpus(root, args.docs)

    stop = threading.Event()
    thread = threading.Thread(target=workers.run, args=(settings, list(ROLES), stop), daemon=True)
    thread.start()
    ports = workers.build_ports(settings)
    ports.embedder.warm_up()  # type: ignore[attr-defined]
    time.sleep(5)  # let the consumer groups settle before the clock starts

    loaded0 = _sample(metrics.PROCESSED, "load", "_total")
    failed0 = sum(_sample(metrics.FAILED, s, "_total") for s in ROLES)
    before = {s: (_sample(metrics.LATENCY, s, "_count"), _sample(metrics.LATENCY, s, "_sum")) for s in ROLES}
    t0 = time.perf_counter()
    report = _upstream_client(settings).publish_paths(tenant, [root])
    t_published = time.perf_counter()
    expected = len(report.published)
    while True:
        done = _sample(metrics.PROCESSED, "load", "_total") - loaded0
        failed = sum(_sample(metrics.FAILED, s, "_total") for s in ROLES) - failed0
        if done + failed >= expected:
            break
        if time.perf_counter() - t0 > args.timeout or not thread.is_alive():
            raise SystemExit(f"gave up: {done} of {expected} loaded")
        time.sleep(1)
    elapsed = time.perf_counter() - t0
    stop.set()
    thread.join(60)

    with psycopg.connect(settings.postgres.ingest_conninfo()) as conn, conn.transaction():
        conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant,))
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
    t1 = time.perf_counter()
    ports.embedder.encode(texts)
    encode_s = time.perf_counter() - t1

    stages = {}
    for s in ROLES:
        n = _sample(metrics.LATENCY, s, "_count") - before[s][0]
        busy = _sample(metrics.LATENCY, s, "_sum") - before[s][1]
        stages[s] = {"messages": int(n), "busy_s": round(busy, 1), "docs_per_s": round(n / busy, 1) if busy else None}
    pipeline_cps = len(texts) / elapsed
    raw_cps = len(texts) / encode_s
    result = {
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "documents_published": expected,
        "documents_loaded": int(done),
        "documents_dead_lettered": int(failed),
        "chunks": len(texts),
        "publish_s": round(t_published - t0, 1),
        "end_to_end_s": round(elapsed, 1),
        "end_to_end_docs_per_s": round(done / elapsed, 2),
        "end_to_end_chunks_per_s": round(pipeline_cps, 1),
        "stages": stages,
        "raw_encode_chunks_per_s": round(raw_cps, 1),
        "pipeline_to_raw_encode_ratio": round(pipeline_cps / raw_cps, 3),
        "embed_batch_size": settings.ingest.embed_batch_size,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
