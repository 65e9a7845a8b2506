"""Everyday documents: the served query service on real public documentation (bench/everyday/).

The corpus (`bench/everyday/corpus/`, real documentation from Debian packages in several domains,
see `bench/everyday/SOURCES.md`) is ingested through the real pipeline for a fresh tenant, then
every question of `bench/everyday/questions.jsonl` is asked through `build_answerer(settings)`
(the `QueryService` a query worker runs) as that tenant's principal:

- `--profile embedded` (default): everything on one PostgreSQL (a temporary data directory, or
  `--data DIR`; `--reuse TENANT` asks a tenant that already holds the corpus there);
- `--profile distributed`: the local stack (`manifold stack up && manifold migrate`): Kafka,
  PostgreSQL/pgvector, Elasticsearch, Neo4j, with the ingest workers run in this process.

Scoring (the same rule as the baselines, `everyday_common`):
- answerable: *found* when one of the question's `support` strings is in the text (section title
  and chunk text) of the first five evidence items of the reply (whatever its status), compared on
  letters and digits only; *empty* when the reply has no evidence;
- unanswerable: *abstained* when the reply is `no_answer`, or `partial` with the gap that names
  a term no evidence holds (`step == "terms"`); `abstained_strict` counts `no_answer` only;
- refused: any question refused by the guard (none should be: the questions are harmless).
Both halves of the set are reported (`dev` was used while developing, `heldout` was not).

Usage: .venv/bin/python bench/eval_everyday.py [--profile embedded|distributed] [--split dev|heldout|all]
Writes bench/results/everyday_<profile>.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from everyday_common import corpus_dir, found, load_questions, summarise  # noqa: E402 - bench/ on sys.path
from metrics_eval import commit, machine  # noqa: E402 - as above

TOP_K = 5
STALL_S = 600
"""Distributed ingestion stops waiting when no document became active for this long (the rest are
reported as `not_active`; dead-lettered documents never do)."""


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def ingest_embedded(settings: Any, tenant: str, root: Path) -> dict[str, Any]:
    """Publish the corpus onto the embedded bus and drive every stage until it is drained."""
    from manifold.deploy.compose.embedded import drive, open_bus, upstream_client

    bus = open_bus(settings)
    try:
        report = upstream_client(settings, bus).publish_paths(tenant, [root])
        drained = drive(settings, bus, quiet=True, expected=len(report.published))
    finally:
        bus.close()
    return {"published": len(report.published), "rejected": [f"{p}: {why}" for p, why in report.rejected],
            "dead_letters": [f"{d.document_id} {d.stage}: {d.error.splitlines()[0]}" for d in drained.dead_letters]}


def ingest_distributed(settings: Any, tenant: str, root: Path, timeout_s: float = 3600) -> dict[str, Any]:
    """Publish the corpus to Kafka and run the ingest workers here until every document is settled."""
    from manifold.deploy.compose.distributed import upstream_client
    from manifold.ingest import ROLES, lifecycle, workers

    report = upstream_client(settings).publish_paths(tenant, [root])
    wanted = {doc for doc, _version in report.published}
    ports = lifecycle.build_ports(settings)
    stop = threading.Event()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            workers.run(settings, list(ROLES), stop)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    deadline, last, still, moved = time.monotonic() + timeout_s, -1, len(wanted), time.monotonic()
    try:
        while not errors and time.monotonic() < deadline and time.monotonic() - moved < STALL_S:
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            still = len([d for d in wanted if d not in active])
            if still == 0:
                break
            if still != last:
                logging.info("distributed ingest: %d of %d documents not active yet", still, len(wanted))
                last, moved = still, time.monotonic()
            time.sleep(3)
    finally:
        stop.set()
        thread.join(120)
    if errors:
        raise RuntimeError(f"workers failed: {errors[0]!r}")
    return {"published": len(report.published), "rejected": [f"{p}: {why}" for p, why in report.rejected],
            "not_active": still}


def _texts(reply: Any) -> list[str]:
    items = [ev for ev in reply.evidence if ev.text][:TOP_K]
    return [f"{ev.claims.get('section_title') or ''}\n{ev.text}" for ev in items]


def ask_all(settings: Any, tenant: str, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from manifold.deploy.compose.embedded import warm_up
    from manifold.query.composition import build_answerer
    from manifold.query.types import Principal, QueryRequest

    answerer = build_answerer(settings)
    warm_up(answerer)
    rows = []
    try:
        for q in questions:
            request = QueryRequest(request_id=f"e-{uuid.uuid4().hex[:12]}", reply_topic="manifold.query.replies",
                                   deadline=datetime.now(UTC) + timedelta(seconds=30), question=q["question"],
                                   session_id=f"everyday-{q['id']}")
            t0 = time.monotonic()
            reply = answerer.answer(request, Principal(tenant_id=tenant, subject="everyday-eval"))
            elapsed = time.monotonic() - t0
            texts = _texts(reply)
            terms_gap = any(g.step == "terms" for g in reply.gaps)
            abstained = reply.status == "no_answer" or (reply.status == "partial" and terms_gap)
            rows.append({
                "id": q["id"], "split": q["split"], "kind": q["kind"], "domain": q.get("domain"),
                "answerable": q["answerable"], "question": q["question"], "status": reply.status,
                "found": found(texts, q["support"]) if q["answerable"] else None,
                "found_at_1": found(texts[:1], q["support"]) if q["answerable"] else None,
                "answer_quotes_support": found([reply.answer], q["support"]) if q["answerable"] else None,
                "empty": not reply.evidence, "abstained": abstained,
                "abstained_strict": reply.status == "no_answer", "refused": reply.status == "refused",
                "answer": reply.answer[:300], "texts": texts, "documents": [ev.document_id for ev in reply.evidence][:TOP_K],
                "expected_files": q.get("files", []), "ms": round(elapsed * 1000, 1),
                "policy": [p for p in reply.trace.policy if p.startswith(("plan:", "abstain:", "fallback:"))],
                "gaps": [f"{g.kind}: {g.detail}" for g in reply.gaps],
            })
    finally:
        answerer.close()
    return rows


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = summarise(rows)
    for split in ("dev", "heldout", "all"):
        part = [r for r in rows if split == "all" or r["split"] == split]
        answerable = [r for r in part if r["answerable"]]
        unanswerable = [r for r in part if not r["answerable"]]
        out.setdefault(split, {}).update({
            "answerable_with_empty_evidence": sum(r["empty"] for r in answerable),
            "abstained_strict": round(sum(r["abstained_strict"] for r in unanswerable) / len(unanswerable), 3)
            if unanswerable else None,
            "false_abstentions": sum(r["abstained"] for r in answerable),
            "found_at_1": round(sum(bool(r.get("found_at_1")) for r in answerable) / len(answerable), 3)
            if answerable else None,
            "answer_quotes_support": round(sum(bool(r.get("answer_quotes_support")) for r in answerable)
                                           / len(answerable), 3) if answerable else None,
            "refused": sum(r["refused"] for r in part),
            "median_ms": sorted(r["ms"] for r in part)[len(part) // 2] if part else None,
        })
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--split", choices=["dev", "heldout", "all"], default="all")
    parser.add_argument("--data", type=Path, help="embedded data directory (default: a new temporary one)")
    parser.add_argument("--reuse", help="a tenant that already holds the corpus (skips ingestion)")
    parser.add_argument("--tenant", help="ingest into this tenant (unchanged files publish nothing: a re-run "
                                         "after a corpus change ingests only the change)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--neighbour-chunks", type=int, default=0,
                        help="distributed: ask with this many non-serving chunks of another tenant in the "
                             "Elasticsearch index (bench/es_neighbour.py), removed afterwards")
    parser.add_argument("--show-heldout-misses", action="store_true",
                        help="also print the held-out half's misses (off by default: that half is measured, not read)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("elastic_transport", "neo4j", "httpx", "sentence_transformers", "manifold"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench: development keys (docs/query.md "Keys")
    from manifold.shared.config import EmbeddedSettings, ManifoldSettings

    base = ManifoldSettings()
    settings = base.model_copy(update={"profile": args.profile,
                                       "ingest": base.ingest.model_copy(update={"metrics_port": 0})})
    if args.profile == "embedded":
        from manifold.deploy.compose.embedded import prepare

        data = args.data or Path(tempfile.mkdtemp(prefix="everyday-embedded-"))
        settings = settings.model_copy(update={"embedded": EmbeddedSettings(dir=data)})
        prepare(settings, quiet=True)
    questions = [q for q in load_questions() if args.split == "all" or q["split"] == args.split]
    root = corpus_dir()
    tenant, ingest, t0 = args.reuse, None, time.monotonic()
    if tenant is None:
        tenant = args.tenant or f"everyday-{uuid.uuid4().hex[:6]}"
        run = ingest_embedded if args.profile == "embedded" else ingest_distributed
        ingest = {**run(settings, tenant, root), "files": len(_files(root)), "s": round(time.monotonic() - t0, 1)}
        logging.info("ingested %s as %s", ingest, tenant)
    neighbour = None
    if args.neighbour_chunks and args.profile == "distributed":
        import es_neighbour
        from elasticsearch import Elasticsearch

        es = Elasticsearch(settings.elasticsearch.url, request_timeout=60)
        neighbour = {"tenant": es_neighbour.DEFAULT_TENANT,
                     "chunks": es_neighbour.add(es, es_neighbour.DEFAULT_TENANT, args.neighbour_chunks)}
        logging.info("neighbour tenant: %s", neighbour)
    try:
        rows = ask_all(settings, tenant, questions)
    finally:
        if neighbour is not None:
            es_neighbour.remove(es, es_neighbour.DEFAULT_TENANT)
    summary = report(rows)
    result = {"benchmark": "everyday documents (served)", "profile": args.profile, "tenant": tenant,
              "generated_at": datetime.now(UTC).isoformat(), "commit": commit(), "machine": machine(),
              "ingest": ingest, "neighbour": neighbour, "summary": summary, "questions": rows}
    out = args.out or ROOT / "results" / f"everyday_{args.profile}.json"
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for split in ("dev", "heldout", "all"):
        s = summary.get(split, {})
        print(f"{split:<8} found={s.get('found_rate')} abstained={s.get('abstention_rate')} "
              f"strict={s.get('abstained_strict')} "
              f"empty={s.get('answerable_with_empty_evidence')} false_abstain={s.get('false_abstentions')} "
              f"refused={s.get('refused')} median_ms={s.get('median_ms')} found@1={s.get('found_at_1')} "
              f"answer_quotes_support={s.get('answer_quotes_support')}")
    for r in rows:
        bad = (r["answerable"] and not r["found"]) or (not r["answerable"] and not r["abstained"])
        if bad and (r["split"] == "dev" or args.show_heldout_misses):
            print(f"MISS {r['split']:<7} {r['kind']:<14} {r['question']!r}: {r['status']} docs={r['documents'][:3]} "
                  f"want={r['expected_files'][:2]} {r['policy']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
