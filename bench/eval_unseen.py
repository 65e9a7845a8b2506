"""Unseen-world evaluation: generated procurement worlds through the real pipeline and query service.

For each seed, `worlds.generate.generate(seed)` writes a complete world (two tenants, many file
types, varied vocabularies, see that module); this script ingests it with the embedded profile
(in-process bus and pipeline, every stage, on the PostgreSQL named by the settings: the dev stack's
when it runs, else one started in a temporary data directory) for two fresh tenants, asks every
question through `build_answerer(settings).answer(...)` as the main tenant's principal, and scores
each reply against the answer the generator computed independently of the pipeline:

- exact / lexical / semantic: status answered or partial and an expected document among the first
  three cited documents;
- aggregate / mixed: the reply's metric totals equal the expected totals (Decimal equality);
  mixed also cites the notice;
- price: the expected price is the reply's structured price, or appears in the fallback quote;
- relationship: the names the graph step returns equal the expected set (case-insensitive);
- clarify / refused: the status;
- other_tenant: nothing of the other tenant (its ids, names, codes, prices) in the reply.

Leaks: any evidence of another tenant, or any `forbidden` string in an other-tenant reply.
Wrong numbers: a structured total or price that differs from the truth, or a price/total answer
whose only number is not the expected one (a `partial` without the number is not wrong, it is
just not correct).

HELD_OUT seeds are measurement-only (never used while developing; see BENCHMARKS.md).
Usage: .venv/bin/python bench/eval_unseen.py [--seeds 11,12] [--held-out] [--out FILE]
Writes bench/results/unseen_worlds.json (per class accuracy, leaks, wrong numbers, failures).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine  # noqa: E402 - after bench/ joins sys.path
from worlds.generate import Question, World, generate  # noqa: E402 - as above

HELD_OUT = (9101, 9202, 9303, 9404, 9505)
"""Measurement-only seeds: never used while developing rules or this script."""
DEV_SEEDS = (1, 2, 3)
CLASSES = ("exact", "lexical", "semantic", "aggregate", "price", "relationship", "mixed", "clarify", "refused",
           "other_tenant")
RESULTS = ROOT / "results" / "unseen_worlds.json"


def ingest(settings: Any, world: World, tenants: dict[str, str], root: Path) -> dict[str, Any]:
    """Write the world and run it through the embedded pipeline until every document is active."""
    from manifold.deploy.compose.embedded import drive, lifecycle_ports, open_bus, upstream_client

    folders = world.write(root)
    bus = open_bus(settings)
    published = 0
    try:
        client = upstream_client(settings, bus)
        for label, folder in folders.items():
            report = client.publish_paths(tenants[label], [folder])
            if report.rejected:
                raise RuntimeError(f"rejected: {report.rejected}")
            published += len(report.published)
        drained = drive(settings, bus, quiet=True, expected=published)
    finally:
        bus.close()
    ports = lifecycle_ports(settings)
    missing = {}
    for label, files in world.files.items():
        active = {e.document_id for e in ports.manifest.entries(tenants[label]) if e.state == "active"}
        missing[label] = sorted(set(files) - active)
    return {"published": published, "dead_letters": [f"{d.document_id} {d.stage}: {d.error.splitlines()[0]}"
                                                     for d in drained.dead_letters],
            "not_active": {k: v for k, v in missing.items() if v}}


def _docs(reply: Any) -> list[str]:
    return list(dict.fromkeys(ev.document_id for ev in reply.evidence if ev.document_id))


def _metric(reply: Any, name: str) -> dict[str, Any] | None:
    for value in reply.result.values():
        if isinstance(value, dict) and value.get("metric") == name:
            return value
    return None


def _same_totals(got: dict[str, str], want: dict[str, str]) -> bool:
    try:
        return {c: Decimal(v) for c, v in got.items()} == {c: Decimal(v) for c, v in want.items()}
    except InvalidOperation:
        return False


def judge(q: Question, reply: Any, own_tenant: str) -> dict[str, Any]:
    """correct / leak / wrong_number for one reply (see the module docstring)."""
    e = q.expect
    leak = any(ev.tenant_id != own_tenant for ev in reply.evidence)
    wrong = False
    ok = False
    text = reply.answer + " " + json.dumps(reply.result, default=str)
    if q.cls in ("exact", "lexical", "semantic"):
        ok = reply.status in ("answered", "partial") and bool(set(_docs(reply)[:3]) & set(e["documents"]))
    elif q.cls in ("aggregate", "mixed"):
        metric = _metric(reply, "total_spend" if q.cls == "aggregate" else "revenue_at_risk")
        totals = (metric or {}).get("totals") or {}
        ok = bool(totals) and _same_totals(totals, e["totals"])
        wrong = bool(totals) and not ok
        if q.cls == "mixed":
            ok = ok and bool(set(_docs(reply)) & set(e["documents"]))
    elif q.cls == "price":
        metric = _metric(reply, "unit_price_on")
        prices = [info for info in ((metric or {}).get("prices") or {}).values() if isinstance(info, dict)]
        shown = [info.get("catalog_unit_price") if info.get("source") == "catalog" else info.get("invoice_unit_price")
                 for info in prices]
        quote = (reply.result.get("fallback") or {}).get("quote", "")
        want = Decimal(e["price"])
        if shown:
            ok = any(_decimal(v) == want for v in shown if v)
            wrong = not ok
        elif quote:
            found = [_decimal(tok) for tok in _numbers(quote)]
            ok = want in found
            wrong = bool(found) and not ok and reply.status == "answered"
    elif q.cls == "relationship":
        names = next((v["names"] for v in reply.result.values() if isinstance(v, dict) and "names" in v), None)
        # one entity may be displayed in another spelling of the same name (`Beta Inc` / `Beta Inc.`)
        ok = names is not None and {_key(n) for n in names} == {_key(n) for n in e["names"]}
    elif q.cls in ("clarify", "refused"):
        ok = reply.status == e["status"]
    elif q.cls == "other_tenant":
        # what the question itself names may be echoed back; anything else of the other tenant may not
        leaked = [s for s in e["forbidden"] if s and s.casefold() in text.casefold()
                  and s.casefold() not in q.question.casefold()]
        leak = leak or bool(leaked)
        ok = not leaked and not leak
    return {"correct": ok, "leak": leak, "wrong_number": wrong}


def _key(name: str) -> str:
    from manifold.ingest.resolution import canonical_key

    return canonical_key("Supplier", name)


def _numbers(text: str) -> list[str]:
    import re

    return re.findall(r"\d[\d.,'\u00a0]*\d|\d", text)


def _decimal(value: str | None) -> Decimal | None:
    if value is None:
        return None
    from manifold.ingest.tables.values import parse_decimal

    try:
        return parse_decimal(value)
    except ValueError:
        try:
            return Decimal(value)
        except InvalidOperation:
            return None


def run(seeds: list[int], settings: Any, out: Path, label: str) -> dict[str, Any]:
    from manifold.deploy.compose.embedded import warm_up
    from manifold.query.composition import build_answerer
    from manifold.query.types import Principal, QueryRequest

    run_id = uuid.uuid4().hex[:6]
    per_class: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "correct": 0, "leaks": 0, "wrong_numbers": 0})
    failures, worlds = [], []
    answerer = None
    started = time.monotonic()
    try:
        for seed in seeds:
            world = generate(seed)
            tenants = {"main": f"u{run_id}-s{seed}-main", "other": f"u{run_id}-s{seed}-other"}
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory(prefix=f"unseen-{seed}-") as tmp:
                report = ingest(settings, world, tenants, Path(tmp))
            worlds.append({"seed": seed, "files": {k: sorted(v) for k, v in world.files.items()},
                           "style": world.facts["style"], "ingest": report,
                           "ingest_s": round(time.monotonic() - t0, 1)})
            if answerer is None:
                answerer = build_answerer(settings)
                warm_up(answerer)
            as_of = datetime.combine(world.as_of, datetime.min.time(), UTC)
            for q in world.questions:
                tenant = tenants[q.tenant]
                request = QueryRequest(request_id=f"u-{uuid.uuid4().hex[:12]}", reply_topic="manifold.query.replies",
                                       deadline=datetime.now(UTC) + timedelta(seconds=20), question=q.question,
                                       as_of=as_of, session_id=f"unseen-{q.qid}")
                reply = answerer.answer(request, Principal(tenant_id=tenant, subject="unseen-eval"))
                verdict = judge(q, reply, tenant)
                c = per_class[q.cls]
                c["n"] += 1
                c["correct"] += verdict["correct"]
                c["leaks"] += verdict["leak"]
                c["wrong_numbers"] += verdict["wrong_number"]
                if not verdict["correct"] or verdict["leak"] or verdict["wrong_number"]:
                    failures.append({"qid": q.qid, "class": q.cls, "question": q.question, "expect": q.expect,
                                     "status": reply.status, "answer": reply.answer[:400],
                                     "documents": _docs(reply)[:5], **verdict,
                                     "gaps": [g.detail for g in reply.gaps][:4]})
    finally:
        if answerer is not None:
            answerer.close()
    classes = {k: {**v, "accuracy": round(v["correct"] / v["n"], 3) if v["n"] else None}
               for k, v in sorted(per_class.items(), key=lambda kv: CLASSES.index(kv[0]))}
    result = {
        "benchmark": "unseen_worlds",
        "split": label,
        "seeds": seeds,
        "held_out_seeds": list(HELD_OUT),
        "generated_at": datetime.now(UTC).isoformat(),
        "commit": commit(),
        "machine": machine(),
        "profile": settings.profile,
        "elapsed_s": round(time.monotonic() - started, 1),
        "questions": sum(v["n"] for v in per_class.values()),
        "leaks": sum(v["leaks"] for v in per_class.values()),
        "wrong_numbers": sum(v["wrong_numbers"] for v in per_class.values()),
        "min_class_accuracy": min((v["accuracy"] for v in classes.values() if v["accuracy"] is not None), default=None),
        "classes": classes,
        "worlds": worlds,
        "failures": failures,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", help="comma-separated seeds (development: not the held-out ones)")
    parser.add_argument("--held-out", action="store_true", help="measure on the held-out seeds")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    from manifold.deploy.compose.embedded import prepare
    from manifold.shared.config import EmbeddedSettings, IngestSettings, ManifoldSettings

    if args.held_out:
        seeds, label, out = list(HELD_OUT), "held_out", args.out or RESULTS
    else:
        seeds = [int(s) for s in (args.seeds or ",".join(map(str, DEV_SEEDS))).split(",")]
        overlap = set(seeds) & set(HELD_OUT)
        if overlap:
            parser.error(f"seeds {sorted(overlap)} are held out: measure them with --held-out")
        label, out = "development", args.out or ROOT / "results" / "unseen_worlds_dev.json"
    base = ManifoldSettings()
    data = Path(tempfile.mkdtemp(prefix="unseen-embedded-"))
    settings = base.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=data),
                                       "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    prepare(settings, quiet=True)
    result = run(seeds, settings, out, label)
    print(json.dumps({k: result[k] for k in ("split", "seeds", "questions", "leaks", "wrong_numbers",
                                             "min_class_accuracy", "elapsed_s")}))
    for name, c in result["classes"].items():
        print(f"{name:<14} n={c['n']:<3} accuracy={c['accuracy']}  leaks={c['leaks']}  wrong={c['wrong_numbers']}")
    for f in result["failures"]:
        print(f"FAIL {f['class']:<12} {f['question']!r}: {f['status']} {f['answer'][:200]!r} docs={f['documents'][:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
