"""The golden set (`bench/golden/questions.jsonl`) through the real query service, scored layer by layer.

Setup: by default the sample world (`ingest.sample_world`) is ingested for two fresh tenants
(`g<run>-northstar`, `g<run>-southwind`) through the real pipeline, as the e2e `world` fixture
does: the upstream client publishes, every worker role runs in this process, and the script
waits until every document's version is active. `--reuse NORTHSTAR,SOUTHWIND` skips ingestion
and uses two tenants that already hold the sample world.

Every golden question then goes through `build_answerer(settings).answer(...)` as the principal
of the item's tenant with `as_of = sample_world.AS_OF`, and the script measures (see
`metrics_eval` for the formulas):

- router: per-intent precision/recall/F1 (base intents and `mixed`), exact intent-set accuracy,
  multi-intent recall, confidence calibration of the emitted intents (reliability bins, ECE);
- clarification precision/recall (status `clarify` vs `expect_clarify`);
- entity and constraint extraction accuracy (trace `entities` / `constraints` vs the labels);
- plan validity (`validate_plan` on every returned plan) and dependency correctness (expected
  operators present; each expected (a, b) pair has an `a` step depending on a `b` step);
- answer correctness: status, expected numbers (exact Decimal strings), graph names/keys;
- calculation consistency: every metric step of the reply's plan is re-run independently with
  `MetricExecutor` (references resolved from the reply's own result: `$vendors.names`,
  `$group_products.keys`; `$notice.identifiers` is replaced by the orders the reply reports),
  and every decimal in the answer must equal a re-run value or a quoted evidence text;
- citation completeness: cited `[ev_…]` ids exist, every document named in the answer is in the
  evidence, every metric with matched lines has record/metric evidence;
- unauthorised retrieval (evidence of another tenant, another tenant's document id or a
  forbidden string of the other tenant in the reply) and injection resistance (an adversarial
  item not refused): both must be 0;
- retrieval per route (exact, bm25, vector, hybrid executors called directly with the question
  as the query, for items with expected documents): recall@5, recall@10, nDCG@10 per document;
- latency per service route and per executor (p50 / p95).

Writes bench/results/eval_golden.json (summary + per-item failures).
Usage: .venv/bin/python bench/eval_golden.py [--reuse T1,T2]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import (  # noqa: E402 - after bench/ joins sys.path
    calibration,
    commit,
    machine,
    mean,
    ndcg_at_k,
    per_label_prf,
    percentile,
    prf,
    recall_at_k,
    rounded,
)

GOLDEN = ROOT / "golden" / "questions.jsonl"
OUT = ROOT / "results" / "eval_golden.json"
BASE_INTENTS = ("exact_lookup", "lexical", "semantic", "aggregate", "relationship")
_NUMBER = re.compile(r"(?<![\w.-])-?\d+\.\d+(?![\w.-])")
log = logging.getLogger("eval_golden")


# ---- setup -------------------------------------------------------------------------------------------

def ingest_world(settings: Any, timeout_s: float = 900) -> dict[str, str]:
    from manifold.deploy.compose.distributed import upstream_client
    from manifold.ingest import ROLES, lifecycle, sample_world, workers

    run = uuid.uuid4().hex[:8]
    tenants = {name: f"g{run}-{name}" for name in sample_world.TENANTS}
    root = Path(tempfile.mkdtemp(prefix="manifold-golden-"))
    written = sample_world.write_world(root)
    client = upstream_client(settings)
    ports = lifecycle.build_ports(settings)
    stop = threading.Event()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            workers.run(settings, list(ROLES), stop)
        except BaseException as err:  # noqa: BLE001 - reported by the caller
            errors.append(err)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        docs = {}
        for name, tenant in tenants.items():
            report = client.publish_paths(tenant, [root / name])
            if report.rejected:
                raise RuntimeError(f"rejected: {report.rejected}")
            docs[tenant] = {str(p.relative_to(root / name)) for p in written[name]}
        deadline = time.monotonic() + timeout_s
        while True:
            if errors:
                raise RuntimeError(f"workers failed: {errors[0]!r}")
            pending = {t: d - {e.document_id for e in ports.manifest.entries(t) if e.state == "active"}
                       for t, d in docs.items()}
            if not any(pending.values()):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"sample world not active in time: {pending}")
            time.sleep(2)
    finally:
        stop.set()
        thread.join(60)
    return tenants


# ---- per-item scoring ------------------------------------------------------------------------------

def service_route(reply: Any) -> str:
    if reply.status == "refused":
        return "refused"
    if reply.status == "clarify":
        return "clarify"
    ops = {s["operator"] for s in (reply.plan or {}).get("steps", [])}
    names = {"exact_lookup": "exact", "hybrid_search": "hybrid", "bm25_search": "bm25", "vector_search": "vector",
             "metric_query": "metric", "graph_expand": "graph", "resolve_entity": "resolve"}
    if len(ops) == 1:
        return names[next(iter(ops))]
    return "mixed" if ops else "no_plan"


def predicted_entities(trace: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"identifiers": set(trace.entities.get("identifiers", []))}
    for kind, anchors in trace.entities.items():
        if kind == "identifiers":
            continue
        out[kind] = {a["resolved"] for a in anchors if a.get("resolved")}
    return out


def entity_ok(gold: dict[str, list[str]], trace: Any) -> dict[str, bool]:
    pred = predicted_entities(trace)
    return {key: set(names) <= pred.get(key, set()) if key == "identifiers" else set(names) == pred.get(key, set())
            for key, names in gold.items()}


def constraint_ok(gold: dict[str, Any], trace: Any) -> dict[str, bool]:
    got = trace.constraints
    out = {}
    for key, want in gold.items():
        if key == "time_range":
            have = got.get("time_range") or {}
            out[key] = all(have.get(f) == v for f, v in want.items())
        elif key == "statuses":
            out[key] = set(want) == set(got.get("statuses") or [])
        else:
            out[key] = got.get(key) == want
    return out


def plan_checks(item: dict[str, Any], reply: Any) -> dict[str, Any]:
    from manifold.query.plan import PlanError, dependencies, validate_plan

    out: dict[str, Any] = {"has_plan": reply.plan is not None}
    if reply.plan is None:
        return out
    try:
        plan = validate_plan(reply.plan)
        out["valid"] = True
    except PlanError as exc:
        out["valid"] = False
        out["error"] = str(exc)
        return out
    expected = item.get("expected_plan")
    if expected:
        ops = {s.operator for s in plan.steps}
        out["operators_ok"] = set(expected.get("operators", [])) <= ops
        deps = dependencies(plan)
        op_of = {s.id: s.operator for s in plan.steps}
        pairs = expected.get("dependencies") or []
        out["dependencies_ok"] = all(
            any(op_of[s] == a and any(op_of[d] == b for d in deps[s]) for s in deps) for a, b in pairs)
        out["has_dependencies"] = bool(pairs)
    return out


def metric_results(reply: Any) -> list[dict[str, Any]]:
    return [v for v in reply.result.values() if isinstance(v, dict) and "metric" in v]


def graph_results(reply: Any) -> list[dict[str, Any]]:
    return [v for v in reply.result.values() if isinstance(v, dict) and "names" in v and "keys" in v]


def numbers_ok(expected: dict[str, Any], reply: Any) -> bool:
    for res in metric_results(reply):
        if res.get("metric") != expected["metric"]:
            continue
        if expected["metric"] == "unit_price_on":
            prices = res.get("prices") or {}
            if all((prices.get(code) or {}).get("invoice_unit_price") == want
                   for code, want in expected["prices"].items()):
                return True
            continue
        if res.get("totals") != expected["totals"]:
            continue
        if "matched_line_count" in expected and res.get("matched_line_count") != expected["matched_line_count"]:
            continue
        if "orders" in expected and list(res.get("orders") or []) != expected["orders"]:
            continue
        return True
    return False


def _resolve_where(where: dict[str, Any], reply: Any, res: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in where.items():
        if isinstance(value, str) and value.startswith("$"):
            step, field = value[1:].split(".", 1)
            source = reply.result.get(step)
            if isinstance(source, dict) and field in source:
                out[key] = list(source[field])
            elif key == "order_numbers":  # $notice.identifiers: the orders the metric itself reports
                out[key] = list(res.get("orders") or [])
            else:
                raise LookupError(f"cannot resolve {value}")
        else:
            out[key] = value
    return out


def calc_consistency(reply: Any, metric_exec: Any, tenant: str) -> dict[str, Any]:
    """Re-run every metric step independently; compare values; check every answer decimal."""
    from manifold.query.plan import MetricQueryParams

    checked = mismatched = 0
    allowed: set[str] = set()
    problems = []
    for step in (reply.plan or {}).get("steps", []):
        if step["operator"] != "metric_query" or step["id"] not in reply.result:
            continue
        res = reply.result[step["id"]]
        try:
            where = _resolve_where(step["params"].get("where", {}), reply, res)
            rerun = metric_exec.run(MetricQueryParams.model_validate({"metric": step["params"]["metric"], "where": where}),
                                    tenant_id=tenant, timeout_s=10).result
        except Exception as exc:  # noqa: BLE001 - recorded as a failed check
            problems.append(f"{step['id']}: re-run failed: {exc}")
            mismatched += 1
            continue
        checked += 1
        keys = ("totals", "matched_line_count", "orders", "prices")
        if any(rerun.get(k) != res.get(k) for k in keys if k in res or k in rerun):
            mismatched += 1
            problems.append(f"{step['id']}: reply {[(k, res.get(k)) for k in keys]} != re-run {[(k, rerun.get(k)) for k in keys]}")
        allowed |= set(_NUMBER.findall(json.dumps(rerun, default=str)))
    for ev in reply.evidence:
        if ev.text:
            allowed |= set(_NUMBER.findall(ev.text))
    unsupported = [n for n in _NUMBER.findall(reply.answer) if n not in allowed]
    return {"metric_steps": checked, "mismatched": mismatched, "unsupported_numbers": unsupported,
            "problems": problems}


def citation_checks(reply: Any) -> dict[str, Any]:
    known = {ev.evidence_id for ev in reply.evidence}
    cited = re.findall(r"\[(ev_[A-Za-z0-9_]+)\]", reply.answer)
    docs = {ev.document_id for ev in reply.evidence if ev.document_id}
    named = re.findall(r"Most relevant passage \(([^)]+)\)", reply.answer)
    m = re.search(r"Exact matches in \d+ documents: (.*?)\.(?=\s|$)", reply.answer)
    if m:
        named += [d.strip() for d in re.split(r", | and ", m.group(1)) if d.strip()]
    unsupported_metrics = [v.get("metric") for v in metric_results(reply)
                           if int(v.get("matched_line_count") or len(v.get("orders") or []) or 0) > 0
                           and not any(ev.kind in ("record", "metric") for ev in reply.evidence)]
    missing_cited = [c for c in cited if c not in known]
    missing_docs = [d for d in named if d not in docs]
    return {"complete": not (missing_cited or missing_docs or unsupported_metrics),
            "missing_cited": missing_cited, "missing_documents": missing_docs,
            "metrics_without_evidence": unsupported_metrics,
            "duplicate_evidence_ids": len(reply.evidence) - len(known)}


def leaks(item: dict[str, Any], reply: Any, tenant: str, own_docs: set[str], other_docs: set[str]) -> list[str]:
    out = [f"evidence of tenant {ev.tenant_id}" for ev in reply.evidence if ev.tenant_id != tenant]
    out += [f"document {ev.document_id} of the other tenant" for ev in reply.evidence
            if ev.document_id in other_docs - own_docs]
    blob = reply.answer + json.dumps(reply.result, default=str)
    out += [f"forbidden string {s!r}" for s in item.get("forbidden_strings") or [] if s in blob]
    return out


# ---- retrieval per route ------------------------------------------------------------------------------

def retrieval(items: list[dict[str, Any]], tenants: dict[str, str], settings: Any) -> dict[str, Any]:
    from elasticsearch import Elasticsearch

    from manifold.query.executors.bm25 import BM25Executor
    from manifold.query.executors.exact import ExactLookupExecutor
    from manifold.query.executors.hybrid import HybridExecutor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.plan import BM25SearchParams, ExactLookupParams, HybridSearchParams, VectorSearchParams
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    q = settings.query
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    es = Elasticsearch(settings.elasticsearch.url, request_timeout=30)
    exact = ExactLookupExecutor(es, pg, q)
    bm25 = BM25Executor(es, pg, q)
    vector = VectorExecutor(pg, SentenceTransformerEmbedder(), q)
    hybrid = HybridExecutor(exact, bm25, vector, pg, q)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    latency: dict[str, list[float]] = defaultdict(list)
    for item in items:
        rel = set(item["expected_documents"])
        if not rel:
            continue
        tenant = tenants[item["tenant"]]
        ids = item.get("entities", {}).get("identifiers") or []
        question = item["question"]
        calls = {  # called within this iteration: the default arguments only satisfy B023
            "bm25": lambda q=question, t=tenant: bm25.run(BM25SearchParams(query=q, limit=20), tenant_id=t, timeout_s=5),
            "vector": lambda q=question, t=tenant: vector.run(VectorSearchParams(query=q, limit=20), tenant_id=t,
                                                              timeout_s=5),
            "hybrid": lambda q=question, t=tenant, i=ids: hybrid.run(
                HybridSearchParams(query=q, limit=20, identifiers=i or None), tenant_id=t, timeout_s=5),
        }
        if ids:
            calls["exact"] = lambda t=tenant, i=ids: exact.run(ExactLookupParams(identifiers=i, limit=20), tenant_id=t,
                                                               timeout_s=5)
        for route, call in calls.items():
            t = time.monotonic()
            res = call()
            latency[route].append((time.monotonic() - t) * 1000)
            ranking = list(dict.fromkeys(h.document_id for h in res.hits))
            scores[route]["recall@5"].append(recall_at_k(ranking, rel, 5))
            scores[route]["recall@10"].append(recall_at_k(ranking, rel, 10))
            scores[route]["ndcg@10"].append(ndcg_at_k(ranking, rel, 10))
    hybrid.close()
    es.close()
    return {route: {**{m: mean(v) for m, v in s.items()}, "items": len(s["ndcg@10"]),
                    "latency_ms": {"p50": percentile(latency[route], 50), "p95": percentile(latency[route], 95)}}
            for route, s in scores.items()}


# ---- main -------------------------------------------------------------------------------------------------

def evaluate(items: list[dict[str, Any]], tenants: dict[str, str], settings: Any) -> dict[str, Any]:
    from manifold.ingest.sample_world import AS_OF, WORLD
    from manifold.query.composition import build_answerer
    from manifold.query.executors.metric import MetricExecutor
    from manifold.query.types import Principal, QueryRequest

    answerer = build_answerer(settings)
    metric_exec = MetricExecutor.from_settings(settings)
    docs = {name: set(files) for name, files in WORLD.items()}
    as_of = datetime.combine(AS_OF, datetime.min.time(), UTC)
    records = []
    # Warm-up (not scored): the first question loads the embedding model and trains the intent
    # classifier inside its own deadline; measured separately as `cold_start_ms`.
    t = time.monotonic()
    answerer.answer(QueryRequest(request_id=f"eval-warmup-{uuid.uuid4().hex[:6]}", reply_topic="manifold.query.replies",
                                 deadline=datetime.now(UTC) + timedelta(seconds=60), question="warm-up: returns policy",
                                 as_of=as_of), Principal(tenant_id=tenants["northstar"], subject="eval"))
    cold_start_ms = (time.monotonic() - t) * 1000
    for item in items:
        tenant = tenants[item["tenant"]]
        other = "southwind" if item["tenant"] == "northstar" else "northstar"
        request = QueryRequest(request_id=f"eval-{item['id']}-{uuid.uuid4().hex[:6]}", reply_topic="manifold.query.replies",
                               deadline=datetime.now(UTC) + timedelta(seconds=30), question=item["question"],
                               as_of=as_of, session_id=f"eval-{item['id']}")
        t = time.monotonic()
        reply = answerer.answer(request, Principal(tenant_id=tenant, subject="eval"))
        wall_ms = (time.monotonic() - t) * 1000
        rec: dict[str, Any] = {"id": item["id"], "class": item["class"], "status": reply.status,
                               "route": service_route(reply), "latency_ms": wall_ms,
                               "intents": {i.type: i.confidence for i in reply.trace.intents}}
        rec["status_ok"] = reply.status in item["expected_status"]
        if item["entities"]:
            rec["entities"] = entity_ok(item["entities"], reply.trace)
        if item["constraints"]:
            rec["constraints"] = constraint_ok(item["constraints"], reply.trace)
        rec["plan"] = plan_checks(item, reply)
        if item["expected_numbers"]:
            rec["numbers_ok"] = numbers_ok(item["expected_numbers"], reply)
        graphs = graph_results(reply)
        if item.get("expected_names") is not None:
            rec["names_ok"] = any(sorted(g["names"]) == item["expected_names"] for g in graphs)
        if item.get("expected_keys") is not None:
            rec["keys_ok"] = any(sorted(g["keys"]) == item["expected_keys"] for g in graphs)
        if item["expected_documents"] and reply.status in ("answered", "partial"):
            got = {ev.document_id for ev in reply.evidence if ev.document_id}
            rec["evidence_recall"] = recall_at_k(sorted(got), item["expected_documents"], 10_000)
        rec["calc"] = calc_consistency(reply, metric_exec, tenant)
        rec["citations"] = citation_checks(reply)
        rec["leaks"] = leaks(item, reply, tenant, docs[item["tenant"]], docs[other])
        rec["answer"] = reply.answer[:300]
        records.append(rec)
    answerer.close()
    return {"cold_start_ms": cold_start_ms, **summarise(items, records)}


def summarise(items: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    by_id = {i["id"]: i for i in items}
    routed = [r for r in records if by_id[r["id"]]["intents"] and r["status"] != "refused"]
    gold = [set(by_id[r["id"]]["intents"]) | ({"mixed"} if len(by_id[r["id"]]["intents"]) > 1 else set()) for r in routed]
    pred = [set(r["intents"]) for r in routed]
    base_gold = [g - {"mixed"} for g in gold]
    base_pred = [p - {"mixed"} for p in pred]
    per_intent = per_label_prf(gold, pred, (*BASE_INTENTS, "mixed"))
    micro = prf(sum(v["tp"] for k, v in per_intent.items() if k != "mixed"),
                sum(v["fp"] for k, v in per_intent.items() if k != "mixed"),
                sum(v["fn"] for k, v in per_intent.items() if k != "mixed"))
    multi = [(g, p) for g, p in zip(base_gold, base_pred, strict=True) if len(g) > 1]
    confs, correct = [], []
    for r, g in zip(routed, base_gold, strict=True):
        for intent, conf in r["intents"].items():
            if intent != "mixed":
                confs.append(conf)
                correct.append(intent in g)
    clar_gold = [by_id[r["id"]]["expect_clarify"] for r in records]
    clar_pred = [r["status"] == "clarify" for r in records]
    clar = prf(sum(g and p for g, p in zip(clar_gold, clar_pred, strict=True)),
               sum(p and not g for g, p in zip(clar_gold, clar_pred, strict=True)),
               sum(g and not p for g, p in zip(clar_gold, clar_pred, strict=True)))
    ref_gold = [by_id[r["id"]]["expect_refused"] for r in records]
    ref_pred = [r["status"] == "refused" for r in records]
    refusal = prf(sum(g and p for g, p in zip(ref_gold, ref_pred, strict=True)),
                  sum(p and not g for g, p in zip(ref_gold, ref_pred, strict=True)),
                  sum(g and not p for g, p in zip(ref_gold, ref_pred, strict=True)))
    ent = [r["entities"] for r in records if "entities" in r]
    ent_fields: dict[str, list[bool]] = defaultdict(list)
    for e in ent:
        for k, v in e.items():
            ent_fields[k].append(v)
    con = [r["constraints"] for r in records if "constraints" in r]
    con_fields: dict[str, list[bool]] = defaultdict(list)
    for c in con:
        for k, v in c.items():
            con_fields[k].append(v)
    plans = [r["plan"] for r in records if r["plan"].get("has_plan")]
    with_ops = [p for p in plans if "operators_ok" in p]
    with_deps = [p for p in plans if p.get("has_dependencies")]
    numbered = [r for r in records if "numbers_ok" in r]
    named = [r for r in records if "names_ok" in r or "keys_ok" in r]
    calc = [r["calc"] for r in records if r["calc"]["metric_steps"] or r["calc"]["mismatched"] or r["calc"]["unsupported_numbers"]]
    answered = [r for r in records if r["status"] in ("answered", "partial")]
    leaks_all = [(r["id"], r["leaks"]) for r in records if r["leaks"]]
    inj_fail = [r["id"] for r, g in zip(records, ref_gold, strict=True) if g and r["status"] != "refused"]
    routes: dict[str, list[float]] = defaultdict(list)
    for r in records:
        routes[r["route"]].append(r["latency_ms"])
    failures = []
    for r in records:
        why = []
        if not r["status_ok"]:
            why.append(f"status {r['status']} not in {by_id[r['id']]['expected_status']}")
        if r.get("numbers_ok") is False:
            why.append("numbers differ")
        if r.get("names_ok") is False or r.get("keys_ok") is False:
            why.append("graph names/keys differ")
        if "entities" in r and not all(r["entities"].values()):
            why.append(f"entities {r['entities']}")
        if "constraints" in r and not all(r["constraints"].values()):
            why.append(f"constraints {r['constraints']}")
        g = set(by_id[r["id"]]["intents"])
        if g and r["status"] != "refused" and set(r["intents"]) - {"mixed"} != g:
            why.append(f"intents {sorted(set(r['intents']) - {'mixed'})} != {sorted(g)}")
        if r["leaks"]:
            why.append(f"LEAK {r['leaks']}")
        if r["calc"]["mismatched"] or r["calc"]["unsupported_numbers"]:
            why.append(f"calc {r['calc']}")
        if why:
            failures.append({"id": r["id"], "question": by_id[r["id"]]["question"], "why": why, "answer": r["answer"]})
    return {
        "items": len(records),
        "classes": {c: sum(1 for i in items if i["class"] == c) for c in sorted({i["class"] for i in items})},
        "router": {
            "items": len(routed),
            "per_intent": per_intent,
            "micro_base": micro,
            "macro_f1_base": mean(per_intent[i]["f1"] for i in BASE_INTENTS),
            "exact_set_accuracy": mean(g == p for g, p in zip(base_gold, base_pred, strict=True)),
            "multi_intent_items": len(multi),
            "multi_intent_exact": mean(g == p for g, p in multi),
            "multi_intent_all_branches_recalled": mean(g <= p for g, p in multi),
            "calibration": calibration(confs, correct, 10),
        },
        "clarification": clar,
        "refusal": refusal,
        "entities": {"items": len(ent), "item_accuracy": mean(all(e.values()) for e in ent),
                     "per_field": {k: {"n": len(v), "accuracy": mean(v)} for k, v in ent_fields.items()}},
        "constraints": {"items": len(con), "item_accuracy": mean(all(c.values()) for c in con),
                        "per_field": {k: {"n": len(v), "accuracy": mean(v)} for k, v in con_fields.items()}},
        "plans": {"replies_with_plan": len(plans), "valid": mean(p.get("valid", False) for p in plans),
                  "operators_correct": {"n": len(with_ops), "accuracy": mean(p["operators_ok"] for p in with_ops)},
                  "dependencies_correct": {"n": len(with_deps), "accuracy": mean(p["dependencies_ok"] for p in with_deps)}},
        "answers": {"status_accuracy": mean(r["status_ok"] for r in records),
                    "numbers": {"n": len(numbered), "accuracy": mean(r["numbers_ok"] for r in numbered)},
                    "graph_results": {"n": len(named),
                                      "accuracy": mean(r.get("names_ok", True) and r.get("keys_ok", True) for r in named)},
                    "evidence_document_recall": mean(r["evidence_recall"] for r in records if "evidence_recall" in r)},
        "calculation_consistency": {"replies_with_metrics": len(calc),
                                    "metric_steps_rerun": sum(c["metric_steps"] for c in calc),
                                    "mismatched": sum(c["mismatched"] for c in calc),
                                    "unsupported_answer_numbers": sum(len(c["unsupported_numbers"]) for c in calc)},
        "citations": {"answered_or_partial": len(answered),
                      "complete": mean(r["citations"]["complete"] for r in answered),
                      "replies_with_duplicate_evidence_ids": sum(1 for r in answered
                                                                 if r["citations"]["duplicate_evidence_ids"])},
        "security": {"unauthorised_retrieval_leaks": len(leaks_all), "leak_items": leaks_all,
                     "injection_resistance_failures": len(inj_fail), "injection_failure_items": inj_fail,
                     "adversarial_items": sum(ref_gold)},
        "latency_by_route": {route: {"n": len(v), "p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
                             for route, v in sorted(routes.items())},
        "failures": failures,
        "per_item": [{"id": r["id"], "status": r["status"], "route": r["route"], "intents": r["intents"],
                      "latency_ms": r["latency_ms"], "citations_complete": r["citations"]["complete"],
                      **({"evidence_recall": r["evidence_recall"]} if "evidence_recall" in r else {}),
                      **({"citation_problems": r["citations"]} if not r["citations"]["complete"] else {})}
                     for r in records],
    }


def main() -> None:
    from manifold.shared import access

    access.allow_tool_reads()  # executors are called directly, outside a query turn
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reuse", help="NORTHSTAR_TENANT,SOUTHWIND_TENANT that already hold the sample world")
    ap.add_argument("--golden", type=Path, default=GOLDEN)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("elastic_transport", "neo4j", "httpx", "sentence_transformers", "manifold"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from manifold.shared.config import ManifoldSettings

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0})})
    items = [json.loads(line) for line in args.golden.read_text().splitlines() if line.strip()]
    t0 = time.monotonic()
    if args.reuse:
        ns, sw = args.reuse.split(",")
        tenants = {"northstar": ns, "southwind": sw}
        ingest_s = None
    else:
        tenants = ingest_world(settings)
        ingest_s = round(time.monotonic() - t0, 1)
    log.info("tenants %s; %d golden items", tenants, len(items))
    summary = evaluate(items, tenants, settings)
    summary["retrieval_by_route"] = retrieval(items, tenants, settings)
    out = {"benchmark": "golden set over ingest.sample_world", "machine": machine(), "commit": commit(),
           "tenants": tenants, "ingest_s": ingest_s, "as_of": "2026-05-10", **summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rounded(out), indent=2, default=str) + "\n")
    r = summary["router"]
    log.info("router micro F1 %.3f, exact-set %.3f, ECE %.3f; leaks %d; injection failures %d; failures %d",
             r["micro_base"]["f1"], r["exact_set_accuracy"], r["calibration"]["ece"],
             summary["security"]["unauthorised_retrieval_leaks"], summary["security"]["injection_resistance_failures"],
             len(summary["failures"]))


if __name__ == "__main__":
    main()
