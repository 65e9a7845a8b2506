"""HTTP `POST /v1/ask` through the `manifold serve` gateway vs the Kafka request/reply route.

Same process, same stack, same questions, same query worker: a query worker
(`query.worker.serve` + `build_answerer`, two consumer threads) on topics unique to this run,
and the distributed gateway (`deploy.serve`, `GatewayBackend`) under uvicorn on a loopback port
in front of the same topics. Each iteration asks every question once per route, in random
order: the Kafka route is `QueryClient.ask` (wall clock around the call), the HTTP route is an
`httpx.Client.post` with keep-alive (wall clock around the call: HTTP parsing, token check, the
gateway's own Kafka round trip, JSON back). Only `answered`/`partial`/`no_answer` replies count;
anything else is reported as a failure.

The sample world is ingested first for two fresh tenants (the real Kafka pipeline, in-process
workers) unless `--reuse NORTHSTAR` names a tenant that already holds it.

Writes bench/results/serve_latency.json: p50/p95 per route overall and per question, the p50
and p95 ratios HTTP/Kafka, and the machine.

Usage: .venv/bin/python bench/serve_latency.py [--n 40] [--reuse w1234abcd-northstar]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from query_latency import machine_info, ratio, summarise  # noqa: E402 - after bench/ joins sys.path

QUESTIONS = [
    "Find invoice INV-2026-0211",
    "Which suppliers supply PRD-482?",
    "differential pressure calibration",
    "What was Northstar Manufacturing's total spend on Monitoring Products from approved vendors in Q1 2026?",
]
OK = {"answered", "partial", "no_answer"}


def ingest_world(settings: Any) -> str:
    """Publish the sample world for fresh tenants and run the workers until it is active."""
    import tempfile

    from manifold.deploy.compose.distributed import upstream_client
    from manifold.ingest import ROLES, lifecycle, sample_world, workers

    run = uuid.uuid4().hex[:8]
    tenant = f"b{run}-northstar"
    root = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    written = sample_world.write_world(root)
    client = upstream_client(settings)
    report = client.publish_paths(tenant, [root / "northstar"])
    assert not report.rejected, report.rejected
    wanted = {p.relative_to(root / "northstar").as_posix() for p in written["northstar"]}
    ports = lifecycle.build_ports(settings)
    stop = threading.Event()
    thread = threading.Thread(target=workers.run, args=(settings, list(ROLES), stop), daemon=True)
    thread.start()
    try:
        give_up = time.monotonic() + 900
        while time.monotonic() < give_up:
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            if wanted <= active:
                return tenant
            time.sleep(2)
        raise TimeoutError("the sample world was not published in 15 minutes")
    finally:
        stop.set()
        thread.join(60)


def main() -> None:
    import httpx

    from manifold.deploy.serve.backend import GatewayBackend
    from manifold.deploy.serve.run import build, in_thread
    from manifold.ingest.sample_world import AS_OF
    from manifold.query.composition import build_answerer
    from manifold.query.request_client import QueryClient, mint_dev_token
    from manifold.query.worker import serve
    from manifold.shared.config import IngestSettings, ManifoldSettings, ServerSettings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="iterations (each asks every question once per route)")
    ap.add_argument("--reuse", metavar="TENANT", help="a tenant that already holds the northstar sample world")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "serve_latency.json")
    args = ap.parse_args()

    base = ManifoldSettings()
    base = base.model_copy(update={"ingest": IngestSettings(metrics_port=0)})
    tenant = args.reuse or ingest_world(base)
    run = uuid.uuid4().hex[:8]
    query = base.query.model_copy(update={"request_topic": f"bench.serve.requests.{run}",
                                          "reply_topic": f"bench.serve.replies.{run}", "metrics_port": 0})
    settings = base.model_copy(update={"query": query, "server": ServerSettings(rate_per_minute=0)})
    answerer = build_answerer(settings)
    stop = threading.Event()
    worker = threading.Thread(target=serve, args=(settings, stop, answerer), kwargs={"threads": 2}, daemon=True)
    worker.start()
    token = mint_dev_token(settings, tenant, subject="bench")
    as_of = datetime.combine(AS_OF, datetime.min.time(), UTC)
    app, backend = build(settings, GatewayBackend(settings))
    times: dict[str, dict[str, list[float]]] = {"kafka": {q: [] for q in QUESTIONS}, "http": {q: [] for q in QUESTIONS}}
    failures: list[str] = []
    rng = random.Random(7)
    try:
        with in_thread(app) as url, QueryClient(settings, token=token) as kafka, \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:

            def via_kafka(question: str) -> str:
                return kafka.ask(question, deadline_ms=30_000, as_of=as_of).status

            def via_http(question: str) -> str:
                r = http.post("/v1/ask", json={"question": question, "deadline_ms": 30_000,
                                               "as_of": as_of.isoformat()})
                return str(r.json().get("status")) if r.status_code == 200 else f"http {r.status_code}"

            routes = {"kafka": via_kafka, "http": via_http}
            for question in QUESTIONS:  # warm up: classifier, connections, topic metadata, both routes
                for fn in routes.values():
                    fn(question)
            for _ in range(args.n):
                for question in QUESTIONS:
                    order = list(routes)
                    rng.shuffle(order)
                    for name in order:
                        started = time.perf_counter()
                        status = routes[name](question)
                        elapsed_ms = (time.perf_counter() - started) * 1000
                        if status in OK:
                            times[name][question].append(elapsed_ms)
                        else:
                            failures.append(f"{name}: {question!r}: {status}")
    finally:
        backend.close()
        stop.set()
        worker.join(60)
        answerer.close()

    every = {name: [t for q in QUESTIONS for t in per[q]] for name, per in times.items()}
    overall = {name: summarise(values) for name, values in every.items()}
    result = {
        "benchmark": "serve_latency",
        "what": "POST /v1/ask through the distributed gateway vs QueryClient.ask over Kafka, same worker and questions",
        "tenant": tenant, "iterations": args.n, "questions": QUESTIONS,
        "http_p50_ms": overall["http"]["p50_ms"], "kafka_p50_ms": overall["kafka"]["p50_ms"],
        "http_p95_ms": overall["http"]["p95_ms"], "kafka_p95_ms": overall["kafka"]["p95_ms"],
        "ratio_p50": ratio(overall["http"]["p50_ms"], overall["kafka"]["p50_ms"]),
        "ratio_p95": ratio(overall["http"]["p95_ms"], overall["kafka"]["p95_ms"]),
        "overall": overall,
        "per_question": {q: {name: summarise(times[name][q]) for name in times} for q in QUESTIONS},
        "failures": failures,
        "machine": machine_info(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"http  p50 {result['http_p50_ms']} ms  p95 {result['http_p95_ms']} ms")
    print(f"kafka p50 {result['kafka_p50_ms']} ms  p95 {result['kafka_p95_ms']} ms")
    print(f"ratio p50 {result['ratio_p50']}  p95 {result['ratio_p95']}  failures {len(failures)}  -> {args.out}")


if __name__ == "__main__":
    main()
