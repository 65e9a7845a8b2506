"""The reliability suite: faults, hostile input and load on the suite's OWN local stack.

`make reliability` (or `.venv/bin/python bench/reliability.py [--docs 1000] [--load-minutes 3]`):

1. Starts its own stack (`manifold stack up` + `manifold migrate`) in `MANIFOLD_STACK__DIR`
   (default /tmp/relstack) on its own ports (PostgreSQL 31433, Kafka 31092/31093, ES 31200,
   Neo4j 31687/31474, overridable with the usual `MANIFOLD_*` variables). It refuses the dev
   stack's and CI stack's ports, because it stops and kills servers. The ports sit below the
   kernel's ephemeral range (32768-60999 by default): a server restarted on a port inside it can
   find the port taken by some client socket's source port ("address already in use"), which is
   how an Elasticsearch restart failed in a run on a busy machine.
2. Runs `manifold workers` as SUBPROCESSES, one per group (parse+chunk, embed, extract+load,
   publish, reconcile, query), restarted when they die, as a process manager would.
3. Hostile input (`reliability_hostile.py`): raw events, bombs, traversal, forged tenants,
   bad tokens, injection, plans over the caps.
4. Fault injection, seeded (`--seed`): publishes `--docs` documents (`ingest.sample_corpus`) plus
   the two-tenant sample world, then, while they flow, kill -9s stage workers, the publisher and
   the reconciler mid-batch, restarts the Kafka broker and stops Elasticsearch, Neo4j and
   PostgreSQL each for `--outage-s` seconds, while a query thread asks questions with known
   answers through a `QueryClient` and records every reply (status, latency, tenant, numbers).
   A reply later than the deadline (+ the client's grace) during a store outage fails the run;
   the broker's outage (where no reply is owed) lasts from its stop until a question asked after
   its restart was answered, so the next store outage starts only then.
5. Load (`--load-minutes`): a sustained mix of new documents and queries; throughput, query p95,
   peak RSS per process, consumer lag.
6. Verifies FROM THE STORES (`reliability_checks.py`) and prints the summary line
   `documents N, published N, duplicates 0, lost 0, leaks 0, drift 0`; exits 1 unless every
   number is as shown and N >= 1000 (`--allow-small` accepts a smaller N for a harness check).
   During the faults `--update-share` of the corpus gets a new version and `--delete-share` is
   deleted (`reliability_churn.py`); every update must serve its version, every delete be gone.
   The results record each fault's recovery (fault over -> publication resumed) and the time
   from the last fault to everything published with consumer lag zero.

Writes bench/results/reliability.json (or `--out`) and load.json beside it.
Ten times the load: `--docs 10000 --kill-rounds 6 --timeout-min 150 --out reliability_10k.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_eval import commit, machine  # noqa: E402 - after the path entry
from reliability_churn import Churn, ProgressSampler, recovery_times, world_questions  # noqa: E402 - as above

OWN_STACK = {
    "MANIFOLD_STACK__DIR": "/tmp/relstack",
    "MANIFOLD_POSTGRES__PORT": "31433",
    "MANIFOLD_KAFKA__PORT": "31092",
    "MANIFOLD_ELASTICSEARCH__PORT": "31200",
    "MANIFOLD_NEO4J__BOLT_PORT": "31687",
    "MANIFOLD_NEO4J__HTTP_PORT": "31474",
}
FORBIDDEN_PORTS = {25432, 29092, 29200, 27687, 15432, 19092, 19200, 17687}  # dev and CI stacks
# Workers of the suite: no metrics servers (ports may be taken), a retry budget (~2.5 min)
# longer than any outage the suite causes, and a reconciler pass every 15 s (so kills land mid-pass).
WORKER_ENV = {
    "MANIFOLD_INGEST__METRICS_PORT": "0",
    "MANIFOLD_QUERY__METRICS_PORT": "0",
    "MANIFOLD_INGEST__MAX_ATTEMPTS": "30",
    "MANIFOLD_INGEST__RETRY_MAX_S": "5",
    "MANIFOLD_INGEST__RECONCILE_INTERVAL_S": "15",
    # The suite's own local stack uses the development token and producer keys (docs/query.md "Keys").
    "MANIFOLD_QUERY__ALLOW_DEV_KEY": "true",
}
RESULTS = Path(__file__).resolve().parent / "results"


def log(msg: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def own_env() -> dict[str, str]:
    env = dict(os.environ)
    for k, v in OWN_STACK.items():
        env.setdefault(k, v)
    ports = {int(env[k]) for k in OWN_STACK if k.endswith("PORT")}
    if ports & FORBIDDEN_PORTS:
        raise SystemExit(f"refusing to run on the dev/CI stack's ports {sorted(ports & FORBIDDEN_PORTS)}")
    env.update(WORKER_ENV)
    env["HF_HUB_OFFLINE"] = "1"
    return env


# --------------------------------------------------------------------------------- query traffic
class QueryTraffic:
    """Asks questions with known answers in a loop; records each reply against what was true.

    A reply is WRONG if it carries evidence of another tenant, or a total that differs from the
    hand-checked one. It is LATE if no reply arrived by the deadline (plus the client's grace)
    while the broker was up."""

    def __init__(self, settings: Any, tenants: dict[str, str], deadline_ms: int, outage: dict[str, str]) -> None:
        self.settings = settings
        self.deadline_ms = deadline_ms
        self.outage = outage  # {"now": name or ""}, shared with the fault driver
        north, south = tenants["northstar"], tenants["southwind"]
        self.questions = world_questions(north, south)
        self.records: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="query-traffic")
        self._clients: dict[str, Any] = {}
        self._minted: dict[str, float] = {}

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="query-traffic")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _client(self, tenant: str) -> Any:
        from manifold.query.request_client import QueryClient, mint_dev_token

        # tokens live `query.token_ttl_s` (15 min by default) and a run under faults lasts longer:
        # re-mint at half-life, as a real long-running client would, or every later query is refused
        now = time.monotonic()
        if tenant not in self._clients:
            self._clients[tenant] = QueryClient(self.settings, token=mint_dev_token(self.settings, tenant, "reliability"))
            self._minted[tenant] = now
        elif now - self._minted[tenant] > self.settings.query.token_ttl_s / 2:
            self._clients[tenant].token = mint_dev_token(self.settings, tenant, "reliability")
            self._minted[tenant] = now
        return self._clients[tenant]

    def _run(self) -> None:
        from manifold.ingest.sample_world import AS_OF
        from manifold.query.request_client import QueryTimeout

        as_of = datetime.combine(AS_OF, datetime.min.time(), UTC)
        i = 0
        while not self._stop.is_set():
            tenant, question, expect = self.questions[i % len(self.questions)]
            i += 1
            before = self.outage.get("now", "")
            stops_before = self.outage.get("kafka_stops", "0")
            rec: dict[str, Any] = {"t": time.time(), "tenant": tenant, "question": question[:60], "outage": before}
            start = time.monotonic()
            try:
                reply = self._client(tenant).ask(question, deadline_ms=self.deadline_ms, as_of=as_of)
                rec.update(self._judge(reply, tenant, expect))
            except QueryTimeout:
                rec.update(status="no_reply", wrong=False)
            except Exception as err:  # noqa: BLE001 - broker down: the request could not be sent
                rec.update(status="not_sent", wrong=False, error=f"{type(err).__name__}: {err}"[:200])
                broken = self._clients.pop(tenant, None)
                if broken is not None:
                    try:
                        broken.close()
                    except Exception:  # noqa: BLE001 - a broken client is dropped anyway
                        pass
                time.sleep(1)
            rec["elapsed_ms"] = round((time.monotonic() - start) * 1000, 1)
            rec["deadline_ms"] = self.deadline_ms
            after = self.outage.get("now", "")
            # a broker outage that began while the question was in flight holds its reply: that
            # question is the broker's (where no reply is expected), not the store outage's
            broker_down = after == "kafka" or self.outage.get("kafka_stops", "0") != stops_before
            rec["outage"] = "kafka" if broker_down else (before or after)
            rec["in_deadline"] = rec["status"] not in {"no_reply"} and rec["elapsed_ms"] <= self.deadline_ms + 2000
            self.records.append(rec)
            self._stop.wait(0.5)
        for c in self._clients.values():
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing at the end: best effort
                pass
        self._clients.clear()

    def answered_since(self, t: float, timeout_s: float) -> bool:
        """Wait until a question asked after `t` (a `time.time()`) got a reply; False on timeout."""
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            if any(r["t"] >= t and r["status"] not in {"no_reply", "not_sent"} for r in list(self.records)):
                return True
            time.sleep(0.5)
        return False

    @staticmethod
    def _judge(reply: Any, tenant: str, expect: dict[str, Any]) -> dict[str, Any]:
        foreign = [e.document_id for e in reply.evidence if e.tenant_id != tenant]
        wrong_numbers = []
        for key, totals in expect.items():
            if key == "forbidden":
                text = (reply.answer or "") + json.dumps(reply.result, default=str)
                wrong_numbers += [n for n in totals if n in text]
            elif key in reply.result:
                got = (reply.result[key] or {}).get("totals")
                if got is not None and got != totals:
                    wrong_numbers.append(f"{key}: {got} != {totals}")
        correct_total = all(key == "forbidden" or (reply.result.get(key) or {}).get("totals") == totals
                            for key, totals in expect.items())
        return {"status": reply.status, "wrong": bool(foreign or wrong_numbers), "foreign": foreign[:3],
                "wrong_numbers": wrong_numbers, "complete_and_correct": reply.status == "answered" and correct_total,
                "gaps": [g.kind for g in reply.gaps][:5]}


def latency_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    lat = sorted(r["elapsed_ms"] for r in records if r["status"] not in {"not_sent", "no_reply"})
    if not lat:
        return {"n": 0}
    p = lambda q: lat[min(len(lat) - 1, int(round(q * (len(lat) - 1))))]  # noqa: E731 - a one-line percentile
    return {"n": len(lat), "p50_ms": p(0.5), "p95_ms": p(0.95), "max_ms": lat[-1],
            "mean_ms": round(statistics.fmean(lat), 1)}


# ------------------------------------------------------------------------------------- the suite
class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.env = own_env()
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("MANIFOLD_") or k == "HF_HUB_OFFLINE"})
        from manifold.shared.config import ManifoldSettings

        self.settings = ManifoldSettings()
        self.stack_dir = Path(self.env["MANIFOLD_STACK__DIR"])
        self.rng = random.Random(args.seed)
        run = uuid.uuid4().hex[:6]
        self.tenants = {name: f"rel{args.seed}-{run}-{name}" for name in
                        ("corpus", "northstar", "southwind", "hostile", "load")}
        self.expected: dict[str, set[str]] = {t: set() for t in self.tenants.values()}
        self.workdir = Path(tempfile.mkdtemp(prefix="reliability-"))
        self.outage: dict[str, str] = {"now": ""}
        self.result: dict[str, Any] = {"seed": args.seed, "tenants": self.tenants, "args": vars(args),
                                       "commit": commit(), "machine": machine(),
                                       "started_at": datetime.now(UTC).isoformat()}
        self.events: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.sup = None
        self.rss = None

    # -- plumbing
    def manifold(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        from reliability_procs import MANIFOLD, ROOT

        return subprocess.run([MANIFOLD, *argv], env=self.env, capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT)

    def event(self, kind: str, **detail: Any) -> None:
        self.events.append({"t": round(time.time(), 1), "kind": kind, **detail})
        log(f"{kind} {detail if detail else ''}")

    def client(self) -> Any:
        from manifold.deploy.compose.distributed import upstream_client

        return upstream_client(self.settings)

    def active(self) -> dict[str, int]:
        from reliability_checks import active_counts

        try:
            return active_counts(self.settings, list(self.tenants.values()))
        except Exception:  # noqa: BLE001 - PostgreSQL may be the one that is down
            return {}

    def expected_total(self) -> int:
        return sum(len(v) for v in self.expected.values())

    def published_total(self) -> int:
        counts = self.active()
        return sum(min(counts.get(t, 0), len(docs)) for t, docs in self.expected.items()) if counts else -1

    def wait_published(self, what: str, timeout_s: float, tick: float = 3.0) -> bool:
        give_up = time.monotonic() + timeout_s
        last = -1
        while time.monotonic() < give_up:
            self.sup.tick()
            done = self.published_total()
            if done != last:
                log(f"{what}: {done}/{self.expected_total()} published")
                last = done
            if done >= self.expected_total():
                return True
            time.sleep(tick)
        return False

    def wait_lag_zero(self, timeout_s: float = 300) -> dict[str, int]:
        from reliability_checks import consumer_lag

        give_up = time.monotonic() + timeout_s
        lag: dict[str, int] = {}
        while time.monotonic() < give_up:
            self.sup.tick()
            lag = consumer_lag(self.settings)
            if all(v == 0 for v in lag.values()):
                return lag
            time.sleep(5)
        return lag

    # -- phases
    def setup(self) -> None:
        if not self.args.no_stack_up:
            if not self.args.keep_data:
                # the suite's own stack starts empty: tenants and indexes of earlier runs (an older
                # index schema, say) are not this run's to judge, and the reconciler sees every tenant
                self.manifold("stack", "down", timeout=300)
                shutil.rmtree(self.stack_dir / "data", ignore_errors=True)
            self.event("stack_up", dir=str(self.stack_dir))
            done = self.manifold("stack", "up", timeout=900)
            if done.returncode != 0:
                raise SystemExit(f"stack up failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        done = self.manifold("migrate")
        if done.returncode != 0:
            raise SystemExit(f"migrate failed:\n{done.stdout}\n{done.stderr}")
        from reliability_procs import RssSampler, Supervisor, stack_pids

        self.sup = Supervisor(self.env, self.stack_dir / "logs")
        self.sup.start_all()
        self.rss = RssSampler()
        self.rss.watch(self.sup.pids)
        self.rss.watch(lambda: {f"server:{k}": v for k, v in stack_pids(self.stack_dir).items()})
        self.rss.watch(lambda: {"suite": os.getpid()})
        self.rss.start()
        self._ticker_stop = threading.Event()

        def ticker() -> None:
            while not self._ticker_stop.wait(2):
                for name in self.sup.tick():
                    self.event("restarted", worker=name)

        threading.Thread(target=ticker, daemon=True, name="supervisor").start()

    def publish_world(self) -> None:
        from manifold.ingest import sample_world

        root = self.workdir / "world"
        written = sample_world.write_world(root)
        client = self.client()
        for name in sample_world.TENANTS:
            tenant = self.tenants[name]
            report = client.publish_paths(tenant, [root / name])
            if report.rejected:
                self.failures.append(f"world rejected: {report.rejected}")
            self.expected[tenant] |= {str(p.relative_to(root / name)) for p in written[name]}
        self.event("published_world", documents=sum(len(v) for v in written.values()))

    def hostile(self) -> None:
        import reliability_hostile as h
        from reliability_checks import active_documents

        north, south, hostile = self.tenants["northstar"], self.tenants["southwind"], self.tenants["hostile"]
        if not self.wait_published("sample world", 900):
            self.failures.append("sample world not published in time")
        rq = h.RawQueries(self.settings)
        self.baseline, statuses = rq.ask_complete(rq.token(north), __import__(
            "manifold.ingest.sample_world", fromlist=["FACTS"]).FACTS[0].question)
        rq.close()
        self.result["baseline_fact_status"] = None if self.baseline is None else self.baseline.status
        self.result["baseline_fact_statuses"] = statuses
        client = self.client()
        client.publish_bytes(north, "notes/system-note.md", h.injection_document(south), "text/markdown")
        self.expected[north].add("notes/system-note.md")
        # a blob staged by northstar (> inline limit), referenced from the hostile tenant
        big = ("Confidential northstar price list. " * 9000).encode()[:300_000]
        client.publish_bytes(north, "confidential/prices.txt", big, "text/plain")
        self.expected[north].add("confidential/prices.txt")
        import hashlib

        self.cases = h.send_ingest_cases(self.settings, client, hostile, north, hashlib.sha256(big).hexdigest(),
                                         self.workdir / "hostile")
        for c in self.cases:
            if c.expect == "published" and c.document_id:
                self.expected[hostile].add(c.document_id)
        self.event("hostile_ingest_sent", cases=len(self.cases))
        world_docs = active_documents(self.settings, north) | active_documents(self.settings, south)
        self.query_hostile = h.query_cases(self.settings, north, south, world_docs)
        bad = [r for r in self.query_hostile if not r["ok"]]
        self.event("hostile_queries", cases=len(self.query_hostile), failed=len(bad))

    def hostile_verify(self) -> None:
        import reliability_hostile as h
        from reliability_checks import active_documents, dead_letters

        north, south, hostile = self.tenants["northstar"], self.tenants["southwind"], self.tenants["hostile"]
        letters = dead_letters(self.settings)
        h.check_ingest_cases(self.cases, letters, active_documents(self.settings, hostile))
        self.result["hostile_ingest"] = [{k: getattr(c, k) for k in ("name", "expect", "outcome", "detail")}
                                         for c in self.cases]
        self.result["hostile_queries"] = self.query_hostile + h.injection_checks(self.settings, north, self.baseline)
        self.result["hostile_erasure"] = h.erasure_case(self.settings, self.client(), hostile)
        if not self.result["hostile_erasure"]["ok"]:
            self.failures.append(f"erasure: canary left after delete + gc: {self.result['hostile_erasure']}")
        sources = {
            "forged_document_in_victim_manifest": int("forged.txt" in active_documents(self.settings, north)),
            "marker_text_under_another_tenant_or_file_content": self._text_leaks(north, south, hostile),
            "hostile_query_replies_with_foreign_evidence": sum(
                1 for r in self.result["hostile_queries"] if r.get("leaked_evidence")),
        }
        self.result["hostile_leaks"] = sources
        leaks = self.hostile_leaks = sum(sources.values())
        bad = [c.name for c in self.cases if c.outcome != "ok"]
        bad += [r["case"] for r in self.result["hostile_queries"] if not r["ok"]]
        if bad:
            self.failures.append(f"hostile cases not as expected: {bad}")
        self.event("hostile_verified", not_ok=bad, leaks=leaks)

    def _text_leaks(self, north: str, south: str, hostile: str) -> int:
        """Hostile text stored only under its own tenant; no file content read from disk."""
        import reliability_hostile as h
        from elasticsearch import Elasticsearch

        es = Elasticsearch(self.settings.elasticsearch.url, request_timeout=60)
        try:
            es.indices.refresh(index="manifold-chunks")
            leaks = 0
            ours = list(self.tenants.values())  # earlier runs on the same stack hold the same texts
            for phrase, allowed in ((h.FORGED_MARK, hostile), (h.INJECTION_MARK, north)):
                res = es.search(index="manifold-chunks", size=100, source=["tenant_id"], query={"bool": {
                    "must": [{"match_phrase": {"text": phrase}}], "filter": [{"terms": {"tenant_id": ours}}]}})
                leaks += sum(1 for hit in res["hits"]["hits"] if hit["_source"]["tenant_id"] != allowed)
            res = es.count(index="manifold-chunks", query={"match_phrase": {"text": "root:x:0:0"}})
            leaks += res["count"]
            return leaks
        finally:
            es.close()

    def fault(self) -> None:
        from reliability_procs import KILLABLE, stack

        from manifold.ingest.sample_corpus import write_corpus

        tenant = self.tenants["corpus"]
        root = self.workdir / "corpus"
        paths = write_corpus(root, self.args.docs, seed=self.args.seed)
        self.expected[tenant] |= {p.relative_to(root).as_posix() for p in paths}
        self.traffic = QueryTraffic(self.settings, self.tenants, self.args.query_deadline_ms, self.outage)
        self.traffic.start()
        t0 = time.monotonic()
        report = self.client().publish_paths(tenant, [root])
        self.event("published_corpus", documents=len(paths), rejected=len(report.rejected),
                   seconds=round(time.monotonic() - t0, 1))
        if report.rejected:
            self.failures.append(f"corpus rejected: {report.rejected[:3]}")
        events = ["kill"] * self.args.kill_rounds + ["kafka", "elasticsearch", "neo4j", "postgres"]
        self.rng.shuffle(events)
        order = list(KILLABLE)
        self.rng.shuffle(order)
        kills = 0
        step = max(5, self.args.docs // (len(events) + 3))
        self.result["fault_schedule"] = events
        docs = sorted(self.expected[tenant] & {p.relative_to(root).as_posix() for p in paths})
        self.churn = Churn(self.rng, docs, self.args.update_share, self.args.delete_share)
        churn_at = {len(events) // 3: 0, (2 * len(events)) // 3: 1}  # two batches, amid the faults
        self.progress = ProgressSampler(self.published_total)
        self.progress.start()
        fault_t0 = time.monotonic()
        for i, ev in enumerate(events):
            self._wait_progress(step, 120)
            if i in churn_at:
                sent = self.churn.apply(self.client(), tenant, root, _media, churn_at[i], 2)
                self.expected[tenant] -= self.churn.deleted
                self.event("churn", **sent, published=self.published_total())
            if ev == "kill":
                for _ in range(2):
                    target = order[kills % len(order)]
                    kills += 1
                    pid = self.sup.kill9(target)
                    self.event("kill9", worker=target, pid=pid, published=self.published_total())
                    time.sleep(self.rng.uniform(0.5, 3.0))
            elif ev == "kafka":
                self.outage["now"] = "kafka"
                self.outage["kafka_stops"] = str(int(self.outage.get("kafka_stops", "0")) + 1)
                self.event("stop", service="kafka")
                stack(self.env, "down", "kafka")
                time.sleep(5)
                stack(self.env, "up", "kafka")
                back = time.time()
                self.event("started", service="kafka")
                # The broker's outage lasts until a question is answered again: a worker still
                # delivering a reply it held through the outage, or a client reconnecting, delays
                # the questions right after the restart, and those are the broker's, not the
                # next store outage's (which used to start at once and count them as late).
                self.traffic.answered_since(back, timeout_s=60)
                self.outage["now"] = ""
                self.event("kafka_recovered", seconds=round(time.time() - back, 1))
            else:
                self.outage["now"] = ev
                self.event("stop", service=ev, published=self.published_total())
                stack(self.env, "down", ev)
                time.sleep(self.args.outage_s)
                self.event("start", service=ev)
                stack(self.env, "up", ev)
                self.outage["now"] = ""
                self.event("started", service=ev, published=self.published_total())
        last_fault = time.monotonic()
        ok = self.wait_published("after faults", self.args.timeout_min * 60)
        self.traffic.stop()
        if not ok:
            self.failures.append("not every document was published before the timeout")
        lag = self.wait_lag_zero(300)
        self.progress.stop()
        self.event("fault_done", published=self.published_total(), expected=self.expected_total(), lag=lag)
        self.result["fault_queries"] = self._traffic_summary(self.traffic.records)
        lag_zero = all(v == 0 for v in lag.values())
        self.result["fault_timing"] = {
            "fault_phase_s": round(time.monotonic() - fault_t0, 1),
            "last_fault_to_all_published_and_lag_zero_s": round(time.monotonic() - last_fault, 1)
            if ok and lag_zero else None,
            "recovery": recovery_times(self.events, self.progress.samples),
            "progress_samples": [(round(t, 1), n) for t, n in self.progress.samples[::6]],
        }

    def _wait_progress(self, step: int, timeout_s: float) -> None:
        start = self.published_total()
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            now = self.published_total()
            if now >= self.expected_total() or (start >= 0 and now - start >= step):
                return
            time.sleep(2)

    @staticmethod
    def _traffic_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
        by_outage: dict[str, Counter] = {}
        for r in records:
            by_outage.setdefault(r["outage"] or "none", Counter())[r["status"]] += 1
        during = [r for r in records if r["outage"] and r["outage"] != "kafka"]
        return {
            "asked": len(records),
            "by_outage_and_status": {k: dict(v) for k, v in by_outage.items()},
            "wrong": sum(1 for r in records if r.get("wrong")),
            "wrong_examples": [r for r in records if r.get("wrong")][:5],
            "during_store_outages": len(during),
            "late_during_store_outages": sum(1 for r in during if not r["in_deadline"]),
            "late_examples": [r for r in during if not r["in_deadline"]][:5],
            "over_deadline_any_time": [r for r in records if r["elapsed_ms"] > r.get("deadline_ms", 0) + 2000
                                       and r["status"] != "not_sent"][:10],
            "answered_complete_outside_outages": sum(1 for r in records if not r["outage"]
                                                     and r.get("complete_and_correct")),
            "latency": latency_summary(records),
        }

    def load(self) -> None:
        from reliability_checks import consumer_lag

        from manifold.ingest.sample_corpus import write_corpus

        minutes = self.args.load_minutes
        if minutes <= 0:
            return
        tenant = self.tenants["load"]
        root = self.workdir / "load"
        paths = write_corpus(root, int(self.args.load_rate * minutes * 60) + 10, seed=self.args.seed + 1)
        traffic = QueryTraffic(self.settings, self.tenants, self.args.query_deadline_ms, {"now": ""})
        client = self.client()
        rss_start = dict(self.rss.peak_mb)
        self.rss.peak_mb.clear()
        lag_samples: list[dict[str, Any]] = []
        published = 0
        t0 = time.monotonic()
        start_active = self.active().get(tenant, 0)
        traffic.start()
        half_peak: dict[str, float] = {}
        next_lag = t0
        while (elapsed := time.monotonic() - t0) < minutes * 60:
            due = int(elapsed * self.args.load_rate) + 1
            while published < min(due, len(paths)):
                path = paths[published]
                doc = path.relative_to(root).as_posix()
                client.publish_bytes(tenant, doc, path.read_bytes(), _media(path))
                self.expected[tenant].add(doc)
                published += 1
            if time.monotonic() >= next_lag:
                lag_samples.append({"t_s": round(elapsed, 1), "lag": consumer_lag(self.settings),
                                    "active": self.active().get(tenant, 0) - start_active})
                next_lag += 15
            if not half_peak and elapsed >= minutes * 30:
                half_peak = dict(self.rss.peak_mb)
            time.sleep(0.2)
        window = time.monotonic() - t0
        traffic.stop()
        active_in_window = self.active().get(tenant, 0) - start_active
        self.event("load_window_done", published=published, active=active_in_window, seconds=round(window, 1))
        drained = self.wait_published("load drain", self.args.timeout_min * 60)
        drain_s = time.monotonic() - t0 - window
        self.rss.sample()
        totals = [sum(v for v in s["lag"].values() if v > 0) for s in lag_samples]
        self.load_result = {
            "minutes": minutes, "target_publish_rate_docs_per_s": self.args.load_rate,
            "published": published, "published_per_s": round(published / window, 2),
            "activated_in_window": active_in_window, "activated_per_s": round(active_in_window / window, 2),
            "drained": drained, "drain_s_after_window": round(drain_s, 1),
            "end_to_end_docs_per_s_incl_drain": round(published / (window + drain_s), 2),
            "queries": {"asked": len(traffic.records),
                        "per_s": round(len(traffic.records) / window, 2),
                        "by_status": dict(Counter(r["status"] for r in traffic.records)),
                        "wrong": sum(1 for r in traffic.records if r.get("wrong")),
                        "latency": latency_summary(traffic.records)},
            "peak_rss_mb": dict(sorted(self.rss.peak_mb.items())),
            "peak_rss_mb_first_half": dict(sorted(half_peak.items())),
            "peak_rss_mb_before_load": dict(sorted(rss_start.items())),
            "consumer_lag": {"samples": lag_samples, "max_total": max(totals) if totals else None,
                             "final": consumer_lag(self.settings)},
        }
        if self.load_result["queries"]["wrong"]:
            self.failures.append("wrong query data under load")

    def verify(self) -> dict[str, Any]:
        from reliability_checks import dead_letters, drift_total, reconcile, store_audit

        self.wait_lag_zero(300)
        rec = reconcile(self.env)
        drift = drift_total(rec)
        self.event("reconcile", drift=rec.get("drift"), exit_code=rec.get("exit_code"))
        kinds = rec.get("drift") if isinstance(rec.get("drift"), dict) else {}
        if drift > 0 and set(k for k, n in kinds.items() if n) == {"stale"}:
            # Artifacts a delete left behind are gc's to collect (the reconcile worker's pass every
            # MANIFOLD_INGEST__RECONCILE_INTERVAL_S); judge the drift after one pass, keep both.
            self.result["reconcile_before_gc"] = {"drift": kinds,
                                                  "findings_examples": (rec.get("findings") or [])[:10]}
            time.sleep(float(WORKER_ENV["MANIFOLD_INGEST__RECONCILE_INTERVAL_S"]) + 5)
            rec = reconcile(self.env)
            drift = drift_total(rec)
            self.event("reconcile_after_gc", drift=rec.get("drift"), exit_code=rec.get("exit_code"))
        if getattr(self, "churn", None) is not None:
            self.result["churn"] = self.churn.verify(self.settings, self.tenants["corpus"])
            self.failures += Churn.failures(self.result["churn"])
        audit = store_audit(self.settings, list(self.tenants.values()))
        letters = dead_letters(self.settings)
        valid_tenants = {t for k, t in self.tenants.items() if k != "hostile"}
        wrong_dlq = [lt for lt in letters if lt.tenant_id in valid_tenants
                     or (lt.tenant_id == self.tenants["hostile"]
                         and lt.document_id in self.expected[self.tenants["hostile"]])]
        documents = self.expected_total()
        published = 0
        for tenant, docs in self.expected.items():
            from reliability_checks import active_documents

            active = active_documents(self.settings, tenant)
            bad_docs = set(audit[tenant].get("mismatched_documents", []))
            published += len((docs & active) - bad_docs)
        duplicates = sum(a["duplicates_total"] for a in audit.values())
        lost = documents - published
        leaks = getattr(self, "hostile_leaks", 0)
        fq = self.result.get("fault_queries", {})
        leaks += sum(1 for r in getattr(getattr(self, "traffic", None), "records", []) if r.get("foreign"))
        self.result.update({
            "reconcile": {k: v for k, v in rec.items() if k != "findings"},
            "reconcile_findings_examples": (rec.get("findings") or [])[:10],
            "store_audit": audit,
            "dlq": {"total": len(letters), "for_valid_documents": len(wrong_dlq),
                    "examples_for_valid_documents": [
                        {"tenant": lt.tenant_id, "doc": lt.document_id, "stage": lt.stage, "kind": lt.error_kind,
                         "error": lt.error.splitlines()[0][:200]} for lt in wrong_dlq[:10]],
                    "by_kind": dict(Counter(lt.error_kind for lt in letters))},
            "workers": self.sup.summary(),
            "events": self.events,
        })
        if wrong_dlq:
            self.failures.append(f"{len(wrong_dlq)} dead letters for valid documents")
        if fq.get("wrong"):
            self.failures.append(f"{fq['wrong']} query replies with wrong data during faults")
        if fq.get("late_during_store_outages"):
            self.failures.append(f"{fq['late_during_store_outages']} query replies late during store outages")
        return {"documents": documents, "published": published, "duplicates": duplicates, "lost": lost,
                "leaks": leaks, "drift": drift}

    def teardown(self) -> None:
        if self.sup is not None:
            self._ticker_stop.set()
            codes = self.sup.stop_all()
            self.result["worker_exit_codes"] = codes
        if self.rss is not None:
            self.rss.stop()
        if not self.args.keep_stack:
            self.manifold("stack", "down", timeout=300)


def _media(path: Path) -> str:
    from manifold.ingest.media import guess_media_type

    return guess_media_type(path, path.read_bytes()[:4096]) or "application/octet-stream"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000, help="corpus documents ingested under faults (default 1000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kill-rounds", type=int, default=3, help="rounds of two kill -9s each (default 3)")
    ap.add_argument("--outage-s", type=float, default=20, help="how long each store stays down (default 20)")
    ap.add_argument("--load-minutes", type=float, default=3, help="sustained load phase (default 3; 0 skips)")
    ap.add_argument("--load-rate", type=float, default=1.0, help="documents published per second under load")
    ap.add_argument("--query-deadline-ms", type=int, default=8000)
    ap.add_argument("--timeout-min", type=float, default=60, help="give up waiting for publication after this")
    ap.add_argument("--phases", default="hostile,fault,load")
    ap.add_argument("--no-stack-up", action="store_true", help="use the already running own stack")
    ap.add_argument("--keep-data", action="store_true",
                    help="start the own stack on the data of earlier runs (default: its data directory is emptied)")
    ap.add_argument("--keep-stack", action="store_true", help="do not stop the own stack at the end")
    ap.add_argument("--allow-small", action="store_true", help="accept N < 1000 (harness check only)")
    ap.add_argument("--update-share", type=float, default=0.05,
                    help="share of the corpus given a new version during the faults (default 0.05)")
    ap.add_argument("--delete-share", type=float, default=0.02,
                    help="share of the corpus deleted during the faults (default 0.02)")
    ap.add_argument("--out", default="reliability.json",
                    help="results file name under bench/results/ (default reliability.json)")
    args = ap.parse_args(argv)
    phases = set(args.phases.split(","))
    suite = Suite(args)
    summary: dict[str, int] = {}
    try:
        suite.setup()
        suite.publish_world()
        if "hostile" in phases:
            suite.hostile()
        if "fault" in phases:
            suite.fault()
        else:
            suite.wait_published("documents", args.timeout_min * 60)
        if "hostile" in phases:
            suite.hostile_verify()
        if "load" in phases:
            suite.load()
        summary = suite.verify()
    finally:
        suite.teardown()
        out = RESULTS / args.out  # an absolute --out (a smoke run under /tmp) keeps both files there
        out.parent.mkdir(parents=True, exist_ok=True)
        suite.result.update({"summary": summary, "failures": suite.failures,
                             "finished_at": datetime.now(UTC).isoformat(),
                             "peak_rss_mb": dict(sorted(suite.rss.peak_mb.items())) if suite.rss else {}})
        out.write_text(json.dumps(suite.result, indent=2, default=str) + "\n")
        if getattr(suite, "load_result", None):
            (out.parent / "load.json").write_text(json.dumps(suite.load_result, indent=2, default=str) + "\n")
    for f in suite.failures:
        log(f"FAILURE: {f}")
    line = ", ".join(f"{k} {summary.get(k, '?')}" for k in ("documents", "published", "duplicates", "lost",
                                                             "leaks", "drift"))
    print(line, flush=True)
    ok = (summary and summary["published"] == summary["documents"]
          and all(summary[k] == 0 for k in ("duplicates", "lost", "leaks", "drift"))
          and (summary["documents"] >= 1000 or args.allow_small) and not suite.failures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
