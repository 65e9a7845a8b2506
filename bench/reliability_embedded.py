"""The fault suite on the embedded profile (issue 30): one `manifold serve --profile embedded`
ingesting `--docs` documents while its process is killed (`kill -9`, then restarted) and its
PostgreSQL is restarted, with updates and deletes amid the faults and questions asked throughout.

Driven from outside over HTTP, as a user's scripts would (`soak_embedded.Server`), on its own data
directory and ports (PostgreSQL `--pg-port` 15498, HTTP `--http-port` 18098), never the dev stack:

1. The sample world in two tenants (questions with hand-checked totals); then a thread uploads
   `--docs` documents of `ingest.sample_corpus` to a third, while the faults run. An upload that
   fails because the server is down is retried, as a client would (uploads are idempotent: the
   same content gets the same version).
2. Meanwhile: `--kill-rounds` kill -9 of the server process (restarted at once; its PostgreSQL
   keeps running) and `--pg-restarts` fast shutdowns of PostgreSQL (started again after
   `--outage-s`), in a seeded order, each after another `step` documents became active;
   `reliability_churn.Churn` updates 5 % and deletes 2 % of the corpus (drawn from what was
   uploaded by then) in two batches amid them. A thread asks the world's questions the whole time
   and records status, latency, the tenants of the evidence and every total (a total that differs
   from the hand-checked one is WRONG).
3. At the end, from the database (superuser) and the product's own tools: every live document
   active (else `lost`), every update serving its new version, every delete inactive with no chunk
   left, no document with two active versions and no chunk position held twice, no dead letter
   for a valid document (`dlq list`), and `manifold reconcile` without drift.

Ends with `documents N, published N, duplicates 0, lost 0, leaks 0, drift 0` and exits 1 unless every
number is as shown and no check failed. Results: bench/results/reliability_embedded.json (or
`--out`), with the wall time and each fault's recovery time (fault over → next document active).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from reliability_churn import Churn, ProgressSampler, recovery_times, world_questions  # noqa: E402 - bench/ on sys.path
from soak_embedded import MANIFOLD, Server, log  # noqa: E402 - as above

RESULTS = ROOT / "results"


class Embedded(Server):
    """`soak_embedded.Server` that may be restarted while its PostgreSQL keeps running. Its
    pipeline gets the distributed suite's retry budget (30 attempts, at most 5 s apart: longer
    than the outages the suite causes; SECURITY.md 'retry budget')."""

    def __init__(self, args: argparse.Namespace, data: Path) -> None:
        super().__init__(args, data)
        self.env.update({"MANIFOLD_INGEST__MAX_ATTEMPTS": "30", "MANIFOLD_INGEST__RETRY_MAX_S": "5"})

    def restart(self) -> None:
        self.proc = None
        self.http_port_free()
        super().start(timeout_s=600, check_pg_port=False)

    def http_port_free(self, timeout_s: float = 30) -> None:
        import socket

        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            with socket.socket() as probe:
                probe.settimeout(1)
                if probe.connect_ex(("127.0.0.1", self.http_port)) != 0:
                    return
            time.sleep(0.5)

    def upload(self, tenant: str, doc: str, content: bytes, give_up_s: float = 900,
               http: httpx.Client | None = None) -> dict[str, Any]:
        """POST the document until the server takes it (retried while the server is down); `http`:
        the calling thread's own client."""
        give_up = time.monotonic() + give_up_s
        while True:
            try:
                r = (http or self.http).post(f"{self.base}/v1/documents", headers=self._auth(tenant),
                                   files={"file": (doc, content)}, data={"document_id": doc})
                if r.status_code in (200, 202):
                    return r.json()  # type: ignore[no-any-return]
                if r.status_code < 500 and r.status_code != 429:
                    raise RuntimeError(f"upload of {doc}: {r.status_code} {r.text[:300]}")
            except Exception as err:  # noqa: BLE001 - the server is down or restarting: retry
                if isinstance(err, RuntimeError) or time.monotonic() > give_up:
                    raise
            time.sleep(1)

    def remove(self, tenant: str, doc: str, give_up_s: float = 900) -> None:
        give_up = time.monotonic() + give_up_s
        while True:
            try:
                r = self.http.delete(f"{self.base}/v1/documents/{doc}", headers=self._auth(tenant))
                if r.status_code in (200, 202):
                    return
            except Exception:  # noqa: BLE001 - the server is down or restarting: retry
                if time.monotonic() > give_up:
                    raise
            time.sleep(1)


class HttpClient:
    """The `Churn.apply` client over HTTP: `publish_bytes` returns the version, `delete` deletes."""

    def __init__(self, server: Embedded) -> None:
        self.server = server

    def publish_bytes(self, tenant: str, doc: str, body: bytes, _media: str) -> int | None:
        reply = self.server.upload(tenant, doc, body)
        return reply.get("version") if reply.get("outcome") == "published" else None

    def delete(self, tenant: str, doc: str) -> None:
        self.server.remove(tenant, doc)


class Database:
    """Superuser reads of the embedded PostgreSQL (no RLS): the suite's view of the truth."""

    def __init__(self, port: int) -> None:
        self.conninfo = (f"host=127.0.0.1 port={port} dbname=manifold user=postgres password=manifold-local "
                         "connect_timeout=5")

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def active(self, tenant: str) -> dict[str, int]:
        return dict(self.rows("SELECT document_id, version FROM manifold.version_manifest WHERE tenant_id = %s "
                              "AND state = 'active'", (tenant,)))  # type: ignore[arg-type]

    def active_count(self, tenants: list[str]) -> int:
        try:
            return int(self.rows("SELECT count(*) FROM manifold.version_manifest WHERE tenant_id = ANY(%s) "
                                 "AND state = 'active'", (tenants,))[0][0])
        except Exception:  # noqa: BLE001 - PostgreSQL is down: unknown
            return -1

    def duplicates(self, tenant: str) -> dict[str, int]:
        one = lambda sql: int(self.rows(sql, (tenant,))[0][0])  # noqa: E731 - a one-line reader
        return {
            "double_active": one("SELECT count(*) FROM (SELECT document_id FROM manifold.version_manifest "
                                 "WHERE tenant_id = %s AND state = 'active' GROUP BY 1 HAVING count(*) > 1) d"),
            "chunks_same_position": one("SELECT count(*) - count(DISTINCT (document_id, version, ordinal)) "
                                        "FROM manifold.chunks WHERE tenant_id = %s"),
            "text_chunks_same_position": one("SELECT count(*) - count(DISTINCT (document_id, version, ordinal)) "
                                             "FROM manifold.text_chunks WHERE tenant_id = %s"),
        }

    def chunks_of(self, tenant: str, docs: list[str]) -> dict[str, int]:
        return {table: int(self.rows(f"SELECT count(*) FROM manifold.{table} WHERE tenant_id = %s "  # noqa: S608
                                     "AND document_id = ANY(%s)", (tenant, docs))[0][0])
                for table in ("chunks", "text_chunks")}


def _judge(body: dict[str, Any], tenant: str, expect: dict[str, Any]) -> dict[str, Any]:
    """The distributed suite's verdict on one reply, over the HTTP reply's JSON."""
    foreign = sorted({e.get("tenant_id") for e in body.get("evidence", []) if isinstance(e, dict)} - {tenant, None})
    result, wrong = body.get("result") or {}, []
    for key, totals in expect.items():
        if key == "forbidden":
            text = str(body.get("answer") or "") + json.dumps(result, default=str)
            wrong += [n for n in totals if n in text]
        elif isinstance(result.get(key), dict) and result[key].get("totals") not in (None, totals):
            wrong.append(f"{key}: {result[key]['totals']} != {totals}")
    return {"status": body.get("status"), "wrong": bool(foreign or wrong), "foreign": foreign, "wrong_numbers": wrong}


class Questions:
    """A daemon thread asking the sample world's questions over HTTP until stopped."""

    def __init__(self, server: Embedded, north: str, south: str, outage: dict[str, str]) -> None:
        from manifold.ingest.sample_world import AS_OF

        self.server, self.outage, self.as_of = server, outage, AS_OF.isoformat() + "T00:00:00Z"
        self.questions = world_questions(north, south)
        self.records: list[dict[str, Any]] = []
        self._http = httpx.Client(timeout=30)  # its own: the main thread uploads meanwhile
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="questions")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            tenant, question, expect = self.questions[i % len(self.questions)]
            i += 1
            fault = self.outage.get("now", "")
            rec: dict[str, Any] = {"t": time.time(), "tenant": tenant, "question": question[:60]}
            t = time.perf_counter()
            try:
                r = self._http.post(f"{self.server.base}/v1/ask", headers=self.server._auth(tenant),  # noqa: SLF001
                                    json={"question": question, "deadline_ms": 8000, "as_of": self.as_of})
                rec["http"] = r.status_code
                body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
                rec.update(_judge(body, tenant, expect) if r.status_code == 200 else {"status": f"http {r.status_code}"})
            except Exception as err:  # noqa: BLE001 - the server is down: recorded, not judged
                rec.update({"http": None, "status": f"no reply ({type(err).__name__})"})
            rec["elapsed_ms"] = round((time.perf_counter() - t) * 1000, 1)
            rec["fault"] = fault or self.outage.get("now", "") or "none"
            self.records.append(rec)
            self._stop.wait(0.5)

    def summary(self) -> dict[str, Any]:
        by: dict[str, dict[str, int]] = {}
        for r in self.records:
            by.setdefault(r["fault"], {}).setdefault(str(r["status"]), 0)
            by[r["fault"]][str(r["status"])] += 1
        ok = sorted(r["elapsed_ms"] for r in self.records if r.get("http") == 200)
        wrong = [r for r in self.records if r.get("wrong")]
        return {"asked": len(self.records), "by_fault_and_status": by, "wrong": len(wrong), "wrong_examples": wrong[:5],
                "answered_outside_faults": sum(1 for r in self.records if r["fault"] == "none"
                                               and r.get("status") == "answered"),
                "latency_ok": {"n": len(ok), "p50_ms": ok[len(ok) // 2] if ok else None,
                               "p95_ms": ok[int(0.95 * (len(ok) - 1))] if ok else None}}


class Suite:
    """One run: the server, its database, the expected documents, the events and the verdict."""

    def __init__(self, args: argparse.Namespace, server: Embedded) -> None:
        import uuid

        self.args, self.server, self.db = args, server, Database(args.pg_port)
        self.rng = random.Random(args.seed)
        self.work = Path(tempfile.mkdtemp(prefix="reliability-embedded-"))
        run_id = uuid.uuid4().hex[:6]
        self.tenants = {name: f"rele-{run_id}-{name}" for name in ("northstar", "southwind", "corpus")}
        self.expected: dict[str, set[str]] = {t: set() for t in self.tenants.values()}
        self._lock = threading.Lock()  # the uploader thread adds to `expected` while faults run
        self.events: list[dict[str, Any]] = []
        self.outage: dict[str, str] = {"now": ""}
        self.failures: list[str] = []
        self.result: dict[str, Any] = {}

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append({"t": time.time(), "kind": kind, **fields})
        log(f"{kind} {fields}")

    def expected_now(self) -> dict[str, set[str]]:
        with self._lock:
            return {t: set(docs) for t, docs in self.expected.items()}

    def published(self) -> int:
        """Expected documents that are active now; -1 while PostgreSQL is down."""
        try:
            return sum(len(docs & set(self.db.active(t))) for t, docs in self.expected_now().items())
        except Exception:  # noqa: BLE001 - PostgreSQL down or restarting
            return -1

    def wait_published(self, what: str, timeout_s: float) -> bool:
        give_up, last = time.monotonic() + timeout_s, 0.0
        while time.monotonic() < give_up:
            done, want = self.published(), sum(len(d) for d in self.expected_now().values())
            if done >= want:
                return True
            if time.monotonic() - last > 60:
                log(f"{what}: {done}/{want} active")
                last = time.monotonic()
            time.sleep(3)
        return False

    def _wait_progress(self, step: int, timeout_s: float) -> None:
        start, give_up = self.published(), time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            now = self.published()
            if now >= sum(len(d) for d in self.expected_now().values()) or (start >= 0 and now - start >= step):
                return
            time.sleep(2)

    def publish_world(self) -> None:
        from manifold.ingest import sample_world

        for name, files in sample_world.write_world(self.work / "world").items():
            tenant = self.tenants[name]
            for path in files:
                doc = path.relative_to(self.work / "world" / name).as_posix()
                self.server.upload(tenant, doc, path.read_bytes())
                self.expected[tenant].add(doc)
        if not self.wait_published("sample world", 900):
            self.failures.append("the sample world was not active within 15 minutes")
        self.event("published_world", documents=sum(len(d) for d in self.expected.values()))

    def upload_corpus(self) -> None:
        """The uploader thread: every corpus document over HTTP, faults or not (a refused upload
        is retried); a document is expected once the server accepted it."""

        started, corpus = time.monotonic(), self.tenants["corpus"]
        try:
            for i, path in enumerate(self.paths, 1):
                doc = path.relative_to(self.work / "corpus").as_posix()
                self.server.upload(corpus, doc, path.read_bytes(), http=self._upload_http)
                with self._lock:
                    self.expected[corpus].add(doc)
                if i % 1000 == 0:
                    log(f"uploaded {i}/{len(self.paths)}")
            self.event("published_corpus", documents=len(self.paths), seconds=round(time.monotonic() - started, 1))
        except Exception as err:  # noqa: BLE001 - judged: the run fails
            self.failures.append(f"upload failed: {type(err).__name__}: {err}")

    def faults(self, uploader: threading.Thread) -> None:
        """The faults, in a seeded order, while the uploader thread is still sending the corpus;
        each after another `step` documents became active. Churn (updates, deletes) of what was
        uploaded by then at one third and two thirds of them."""
        from manifold.deploy.compose.embedded import ensure_database, stop_database
        from manifold.shared.config import ManifoldSettings

        os.environ.update({k: v for k, v in self.server.env.items() if k.startswith("MANIFOLD_")})
        settings = ManifoldSettings()
        events = ["kill"] * self.args.kill_rounds + ["postgres"] * self.args.pg_restarts
        self.rng.shuffle(events)
        self.result["fault_schedule"] = events
        step = max(5, self.args.docs // (len(events) + 3))
        corpus = self.tenants["corpus"]
        self.churn = Churn(self.rng, [], 0, 0)
        churn_at = {len(events) // 3: 0, (2 * len(events)) // 3: 1}
        progress = ProgressSampler(self.published)
        progress.start()
        t0 = time.monotonic()
        for i, ev in enumerate(events):
            self._wait_progress(step, 600)
            if i in churn_at:
                if churn_at[i] == 0:  # the share of the whole corpus, drawn from what was uploaded by now
                    docs = sorted(self.expected_now()[corpus])
                    scale = self.args.docs / max(len(docs), 1)
                    self.churn = Churn(self.rng, docs, min(0.5, self.args.update_share * scale),
                                       min(0.25, self.args.delete_share * scale))
                sent = self.churn.apply(HttpClient(self.server), corpus, self.work / "corpus", lambda _: "",
                                        churn_at[i], 2)
                with self._lock:
                    self.expected[corpus] -= self.churn.deleted
                self.event("churn", **sent, published=self.published())
            if ev == "kill":
                assert self.server.proc is not None
                pid = self.server.proc.pid
                self.outage["now"] = "serve"
                self.event("stop", service="serve (kill -9)", pid=pid, published=self.published())
                os.kill(pid, signal.SIGKILL)
                self.server.proc.wait(60)
                self.server.restart()
            else:
                self.outage["now"] = "postgres"
                self.event("stop", service="postgres", published=self.published())
                stop_database(settings)
                time.sleep(self.args.outage_s)
                ensure_database(settings)
            self.outage["now"] = ""
            self.event("started", service="serve (kill -9)" if ev == "kill" else "postgres",
                       published=self.published())
        last = time.monotonic()
        uploader.join(self.args.timeout_min * 60)
        self.result["uploads_done_after_last_fault_s"] = round(time.monotonic() - last, 1)
        ok = self.wait_published("after faults", self.args.timeout_min * 60)
        lag = self.wait_settled(settings, 300) if ok else -1
        progress.stop()
        if not ok:
            self.failures.append("not every document was active before the timeout")
        self.result["fault_timing"] = {
            "fault_phase_s": round(time.monotonic() - t0, 1),
            "lag_at_end": lag,
            "last_fault_to_all_active_and_lag_zero_s": round(time.monotonic() - last, 1) if ok and lag == 0 else None,
            "recovery": recovery_times(self.events, progress.samples),
            "progress_samples": [(round(t, 1), n) for t, n in progress.samples[::6]],
        }

    def wait_settled(self, settings: Any, timeout_s: float) -> int:
        """After every document is active: wait until each update serves its version, each delete
        is inactive and no stage has anything left on the bus (the distributed suite's "lag
        zero"). Returns the bus lag at the end (0 when settled); what is still wrong is judged by
        `verify`."""
        from manifold.deploy.compose.embedded import open_bus, pending

        corpus, give_up, lag = self.tenants["corpus"], time.monotonic() + timeout_s, -1
        while time.monotonic() < give_up:
            try:
                active, bus = self.db.active(corpus), open_bus(settings)
                try:
                    lag = pending(settings, bus)
                finally:
                    bus.close()
            except Exception as err:  # noqa: BLE001 - PostgreSQL still restarting: try again
                log(f"settle: {type(err).__name__}: {err}")
                time.sleep(3)
                continue
            updated = all(active.get(d) == v for d, v in self.churn.updated.items())
            if lag == 0 and updated and not any(d in active for d in self.churn.deleted):
                break
            time.sleep(3)
        return lag

    def verify(self) -> dict[str, Any]:
        corpus = self.tenants["corpus"]
        active = self.db.active(corpus)
        not_latest = sorted(d for d, v in self.churn.updated.items() if active.get(d) != v)
        deleted = sorted(self.churn.deleted)
        churn = {"updates_published": len(self.churn.updated), "updates_unchanged": len(self.churn.unchanged_updates),
                 "deletes_published": len(deleted), "updated_not_serving_latest": len(not_latest),
                 "examples_not_latest": [{"doc": d, "want": self.churn.updated[d], "active": active.get(d)}
                                         for d in not_latest[:5]],
                 "deleted_still_active": sum(1 for d in deleted if d in active),
                 **{f"deleted_{k}": n for k, n in self.db.chunks_of(corpus, deleted).items()}}
        self.failures += [f"churn: {k} {churn[k]}" for k in ("updated_not_serving_latest", "deleted_still_active",
                                                             "deleted_chunks", "deleted_text_chunks") if churn[k]]
        duplicates = {t: self.db.duplicates(t) for t in self.tenants.values()}
        dupes = sum(sum(d.values()) for d in duplicates.values())
        env = {**self.server.env, "MANIFOLD_PROFILE": "embedded"}
        listed = subprocess.run([str(Path(MANIFOLD).with_name("dlq")), "list", "--all", "--json"], env=env,
                                capture_output=True, text=True, timeout=600)
        try:
            letters = json.loads(listed.stdout or "[]")
        except json.JSONDecodeError:
            letters = []
            self.failures.append(f"dlq list failed: {listed.stderr[-300:]}")
        valid = [lt for lt in letters if lt.get("tenant_id") in self.expected]
        if valid:
            self.failures.append(f"{len(valid)} dead letters for valid documents")
        rec = subprocess.run([MANIFOLD, "reconcile", "--json", "--profile", "embedded"], env=env, capture_output=True,
                             text=True, timeout=1800)
        try:
            drift_kinds = json.loads(rec.stdout).get("drift") or {}
        except json.JSONDecodeError:
            drift_kinds = {"unparsed": 1}
            self.failures.append(f"reconcile output not JSON (exit {rec.returncode}): {rec.stderr[-300:]}")
        drift = sum(int(v) for v in drift_kinds.values() if isinstance(v, int))
        if drift:  # name them: CI prints only this log, not the results file
            for finding in (json.loads(rec.stdout).get("findings") or [])[:10]:
                self.failures.append(f"drift: {finding}")
        questions = self.questions.summary()
        if questions["wrong"]:
            self.failures.append(f"{questions['wrong']} replies with wrong data")
        documents = sum(len(d) for d in self.expected.values())
        published = self.published()
        self.result.update({"churn": churn, "duplicates": duplicates, "queries": questions,
                            "dlq": {"total": len(letters), "for_valid_documents": len(valid),
                                    "examples": [{k: lt.get(k) for k in ("tenant_id", "document_id", "stage",
                                                                         "error_kind", "error")} for lt in valid[:10]]},
                            "reconcile": {"exit_code": rec.returncode, "drift": drift_kinds}, "events": self.events})
        leaks = sum(1 for r in self.questions.records if r.get("foreign"))
        return {"documents": documents, "published": published, "duplicates": dupes,
                "lost": documents - published, "leaks": leaks, "drift": drift}

    def run(self) -> dict[str, Any]:
        from manifold.ingest.sample_corpus import write_corpus

        self.publish_world()
        self.paths = write_corpus(self.work / "corpus", self.args.docs, seed=self.args.seed)
        self._upload_http = httpx.Client(timeout=60)  # the uploader's own client (one per thread)
        uploader = threading.Thread(target=self.upload_corpus, daemon=True, name="uploader")
        self.questions = Questions(self.server, self.tenants["northstar"], self.tenants["southwind"], self.outage)
        uploader.start()
        self.questions.start()
        try:
            self.faults(uploader)
        finally:
            self.questions.stop()
        return self.verify()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kill-rounds", type=int, default=3, help="kill -9 of the server process (default 3)")
    ap.add_argument("--pg-restarts", type=int, default=2, help="PostgreSQL restarts (default 2)")
    ap.add_argument("--outage-s", type=float, default=20.0, help="how long PostgreSQL stays down")
    ap.add_argument("--update-share", type=float, default=0.05)
    ap.add_argument("--delete-share", type=float, default=0.02)
    ap.add_argument("--timeout-min", type=float, default=120.0)
    ap.add_argument("--allow-small", action="store_true", help="a harness check under 1,000 documents")
    ap.add_argument("--pg-port", type=int, default=15498)
    ap.add_argument("--http-port", type=int, default=18098)
    ap.add_argument("--out", default="reliability_embedded.json", help="file name under bench/results")
    args = ap.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="reliability-embedded-data-"))
    server = Embedded(argparse.Namespace(http_port=args.http_port, pg_port=args.pg_port), data)
    suite = Suite(args, server)
    started = time.monotonic()
    summary: dict[str, Any] = {}
    suite.result.update({"benchmark": "reliability", "profile": "embedded", "args": vars(args),
                         "started_at": datetime.now(UTC).isoformat()})
    try:
        server.start()
        summary = suite.run()
    except Exception as err:  # noqa: BLE001 - recorded as a failure with the partial results
        suite.failures.append(f"suite error: {type(err).__name__}: {err}")
    finally:
        suite.result["serve_exit_code"] = server.stop()
        subprocess.run([MANIFOLD, "embedded", "stop"], env=server.env, capture_output=True, timeout=120)
        from metrics_eval import commit, machine

        suite.result.update({"summary": summary, "failures": suite.failures, "wall_s": round(time.monotonic() - started, 1),
                             "commit": commit(), "machine": machine(), "finished_at": datetime.now(UTC).isoformat()})
        out = RESULTS / args.out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(suite.result, indent=2, default=str) + "\n")
    if args.docs < 1000 and not args.allow_small:
        suite.failures.append(f"--docs {args.docs} is under 1,000 (use --allow-small for a harness check)")
    for f in suite.failures:
        log(f"FAILURE: {f}")
    print(", ".join(f"{k} {summary.get(k, '?')}" for k in ("documents", "published", "duplicates", "lost", "leaks",
                                                           "drift")), flush=True)
    zeros = all(summary.get(k) == 0 for k in ("duplicates", "lost", "leaks", "drift"))
    return 0 if zeros and summary.get("published") == summary.get("documents") and not suite.failures else 1


if __name__ == "__main__":
    sys.exit(main())
