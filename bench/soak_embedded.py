"""The soak on the embedded profile: `manifold serve --profile embedded` under steady mixed load
over HTTP, sampled every minute, failing on growth after warm-up (issue 30).

`make soak` runs it after the distributed soak (`bench/soak.py`; the thresholds and the verdict
are that module's `judge`). Here the product is driven from outside, as a user's scripts would:

- a fresh data directory (`--data`, default a temporary one) and its own ports
  (PostgreSQL `--pg-port` 15499, HTTP `--http-port` 18099), so the dev stack is never touched;
  one `manifold serve --profile embedded` subprocess answers, ingests in its background
  pipeline thread, and owns its PostgreSQL (started in the data directory);
- two tenants get the sample world (`ingest.sample_world`) through `POST /v1/documents`; then
  for `--minutes`: new documents (`ingest.sample_corpus`) at `--rate` per second into a third
  tenant, an update of one of them (same id, a line appended) every `--update-every-s`, a delete
  every `--delete-every-s`, and questions in a loop on the metric, exact, passage and hybrid
  routes of both world tenants (`POST /v1/ask`; a reply whose evidence names another tenant is
  WRONG);
- every `--sample-s`: RSS and open files of the server process and of PostgreSQL (with their
  children), PostgreSQL's client connections, the documents not active yet (the embedded
  profile's lag) and the interval's question p50/p95.

After the window it waits until every live document is active, checks the deleted ones are gone
(`GET /v1/documents`), and judges the samples as `soak.judge` does (the server process is
judged; PostgreSQL reported). Writes bench/results/soak_embedded.json and soak_embedded.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from soak import common_args, judge, plot, warmup_of  # noqa: E402 - bench/ on sys.path

RESULTS = ROOT / "results"
MANIFOLD = str(Path(sys.executable).with_name("manifold"))


def log(msg: str) -> None:
    print(f"{datetime.now(UTC).strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


class Server:
    """One `manifold serve --profile embedded` subprocess and the HTTP client that drives it."""

    def __init__(self, args: argparse.Namespace, data: Path) -> None:
        self.env = {**os.environ, "MANIFOLD_PROFILE": "embedded", "MANIFOLD_EMBEDDED__DIR": str(data),
                    "MANIFOLD_POSTGRES__PORT": str(args.pg_port), "MANIFOLD_SERVER__PORT": str(args.http_port),
                    "MANIFOLD_QUERY__ALLOW_DEV_KEY": "true", "HF_HUB_OFFLINE": "1"}
        self.base = f"http://127.0.0.1:{args.http_port}"
        self.http_port, self.pg_port = args.http_port, args.pg_port
        self.log_path = data / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.tokens: dict[str, str] = {}
        self.http = httpx.Client(timeout=60)

    def start(self, timeout_s: float = 600, *, check_pg_port: bool = True) -> None:
        """Start the server; refused when either port already answers (another run's server or
        database would otherwise be measured, and its tenants written to). `check_pg_port=False`
        restarts a server whose own PostgreSQL is still running (the embedded fault suite)."""
        import socket

        for port in (self.http_port, self.pg_port) if check_pg_port else (self.http_port,):
            with socket.socket() as probe:
                probe.settimeout(1)
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    raise SystemExit(f"port {port} is already in use: another soak or server runs there; "
                                     "pick --http-port / --pg-port")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([MANIFOLD, "serve", "--profile", "embedded"], env=self.env,
                                     stdout=self.log_path.open("ab"), stderr=subprocess.STDOUT)
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            if self.proc.poll() is not None:
                raise SystemExit(f"manifold serve exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if self.http.get(f"{self.base}/readyz").status_code == 200 and self.proc.poll() is None:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise SystemExit(f"manifold serve not ready after {timeout_s:.0f}s; see {self.log_path}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)

    def token(self, tenant: str) -> str:
        if tenant not in self.tokens:
            done = subprocess.run([MANIFOLD, "token", "--tenant", tenant, "--ttl", "1d", "--subject", "soak"],
                                  env=self.env, capture_output=True, text=True, check=True)
            self.tokens[tenant] = done.stdout.strip().splitlines()[-1]
        return self.tokens[tenant]

    def _auth(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(tenant)}"}

    def publish(self, tenant: str, doc: str, content: bytes) -> int:
        r = self.http.post(f"{self.base}/v1/documents", headers=self._auth(tenant),
                           files={"file": (doc, content)}, data={"document_id": doc})
        if r.status_code not in (200, 202):
            raise RuntimeError(f"upload of {doc}: {r.status_code} {r.text[:300]}")
        return r.status_code

    def delete(self, tenant: str, doc: str) -> bool:
        return self.http.delete(f"{self.base}/v1/documents/{doc}", headers=self._auth(tenant)).status_code == 202

    def states(self, tenant: str) -> dict[str, str]:
        r = self.http.get(f"{self.base}/v1/documents", headers=self._auth(tenant))
        r.raise_for_status()
        return {d["document_id"]: d["state"] for d in r.json()["documents"]}

    def ask(self, tenant: str, question: str, as_of: str) -> dict[str, Any]:
        t = time.perf_counter()
        r = self.http.post(f"{self.base}/v1/ask", headers=self._auth(tenant),
                           json={"question": question, "deadline_ms": 8000, "as_of": as_of})
        ms = round((time.perf_counter() - t) * 1000, 1)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        tenants = {e.get("tenant_id") for e in body.get("evidence", []) if isinstance(e, dict)}
        retry = float(r.headers.get("retry-after", "1")) if r.status_code == 429 else None
        return {"t": time.time(), "tenant": tenant, "question": question[:60], "http": r.status_code,
                "status": body.get("status"), "latency_ms": ms, "wrong": bool(tenants - {tenant, None}),
                "retry_after": retry}


def _family(pid: int) -> list[psutil.Process]:
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def sample(server: Server, t0: float, asked: list[dict[str, Any]], since: float, pending: int | None,
           pg_port: int) -> dict[str, Any]:
    import psycopg

    rss, fds = {}, {}
    pids = {"serve": server.proc.pid if server.proc else None}
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "postgres" in cmd and f"port={pg_port}" in cmd and "-D" in cmd:
            pids["server:postgres"] = p.info["pid"]
    for name, pid in pids.items():
        if pid is None:
            continue
        try:
            family = _family(pid) if name == "server:postgres" else [psutil.Process(pid)]
            rss[name] = round(sum(q.memory_info().rss for q in family) / 2**20, 1)
            fds[name] = sum(q.num_fds() for q in family)
        except (psutil.Error, OSError):
            continue
    conns = None
    try:
        with psycopg.connect(f"host=127.0.0.1 port={pg_port} dbname=manifold user=postgres "
                             "password=manifold-local", connect_timeout=5) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                               "AND pid <> pg_backend_pid()").fetchone()
            conns = int(row[0]) if row else None
    except psycopg.Error:
        pass
    window = sorted(r["latency_ms"] for r in asked if r["t"] >= since and r["http"] == 200)
    pick = (lambda q: window[min(len(window) - 1, int(round(q * (len(window) - 1))))]) if window else None
    return {"minute": round((time.monotonic() - t0) / 60, 2), "rss_mb": rss, "fds": fds, "pg_connections": conns,
            "consumer_lag": pending, "queries": len(window), "query_p50_ms": pick(0.5) if pick else None,
            "query_p95_ms": pick(0.95) if pick else None, "wrong": sum(1 for r in asked if r["t"] >= since
                                                                       and r["wrong"])}


def run(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    from manifold.ingest import sample_world
    from manifold.ingest.sample_corpus import write_corpus

    work = Path(tempfile.mkdtemp(prefix="soak-embedded-"))
    written = sample_world.write_world(work / "world")
    run_id = uuid.uuid4().hex[:6]  # tenants of this run only
    tenants = {name: f"soak-{run_id}-{name}" for name in sample_world.TENANTS}
    for name, files in written.items():
        for path in files:
            server.publish(tenants[name], path.relative_to(work / "world" / name).as_posix(), path.read_bytes())
    give_up = time.monotonic() + 900
    while time.monotonic() < give_up and not all(
            all(s == "active" for s in server.states(t).values()) and server.states(t) for t in tenants.values()):
        time.sleep(3)
    as_of = sample_world.AS_OF.isoformat() + "T00:00:00Z"
    north, south = tenants["northstar"], tenants["southwind"]
    questions = [(north, sample_world.FACTS[0].question), (north, sample_world.FACTS[1].question),
                 (north, "Find invoice INV-2026-0148"),
                 (north, "Explain the differential pressure calibration requirement for PRD-482"),
                 (south, sample_world.FACTS[0].question)]
    load = f"soak-{run_id}-load"
    paths = write_corpus(work / "load", int(args.rate * args.minutes * 60) + 10, seed=args.seed)
    published: list[str] = []
    deleted: set[str] = set()
    asked: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    counts = {"new": 0, "updates": 0, "deletes": 0}
    t0 = time.monotonic()
    next_sample, next_update, next_delete, since, qi = t0, t0 + args.update_every_s, t0 + args.delete_every_s, \
        time.time(), 0
    next_ask = t0
    while (elapsed := time.monotonic() - t0) < args.minutes * 60:
        while counts["new"] < min(int(elapsed * args.rate) + 1, len(paths)):
            path = paths[counts["new"]]
            doc = path.relative_to(work / "load").as_posix()
            server.publish(load, doc, path.read_bytes())
            published.append(doc)
            counts["new"] += 1
        now = time.monotonic()
        live = [d for d in published if d not in deleted]
        editable = [d for d in live if d.endswith((".md", ".txt"))]
        if now >= next_update and editable:
            doc = editable[counts["updates"] % len(editable)]
            path = work / "load" / doc
            with path.open("a", encoding="utf-8") as f:
                f.write(f"\nRevision {counts['updates']}: the pressure check is due every "
                        f"{counts['updates'] % 11 + 1} weeks.\n")
            server.publish(load, doc, path.read_bytes())
            counts["updates"] += 1
            next_update += args.update_every_s
        if now >= next_delete and len(live) > 5:
            doc = live[(counts["deletes"] * 7) % (len(live) - 5)]
            if server.delete(load, doc):
                deleted.add(doc)
                counts["deletes"] += 1
            next_delete += args.delete_every_s
        if now >= next_ask:  # paced under the server's per-principal rate limit, as a polite client is
            tenant, question = questions[qi % len(questions)]
            qi += 1
            asked.append(server.ask(tenant, question, as_of))
            next_ask = now + 1 / args.ask_rate + (asked[-1]["retry_after"] or 0)
        else:
            time.sleep(min(0.05, next_ask - now))
        if now >= next_sample:
            states = server.states(load)
            pending = sum(1 for d in live if states.get(d) != "active")
            samples.append(sample(server, t0, asked, since, pending, args.pg_port))
            since = time.time()
            log(f"soak minute {samples[-1]['minute']}: not active {pending}, p95 {samples[-1]['query_p95_ms']} ms, "
                f"serve RSS {samples[-1]['rss_mb'].get('serve')} MB, pg conns {samples[-1]['pg_connections']}")
            next_sample += args.sample_s
    live = [d for d in published if d not in deleted]
    give_up, states = time.monotonic() + args.timeout_min * 60, {}
    while time.monotonic() < give_up:
        states = server.states(load)
        if all(states.get(d) == "active" for d in live):
            break
        time.sleep(3)
    samples.append(sample(server, t0, asked, since, sum(1 for d in live if states.get(d) != "active"), args.pg_port))
    lost = sorted(d for d in live if states.get(d) != "active")
    still = sorted(d for d in deleted if states.get(d) == "active")
    lat = sorted(r["latency_ms"] for r in asked if r["http"] == 200)
    return {"counts": counts, "documents": len(live), "lost": lost, "deleted": len(deleted),
            "deleted_still_active": still, "samples": samples,
            "queries": {"asked": len(asked), "wrong": sum(1 for r in asked if r["wrong"]),
                        "http_errors": sum(1 for r in asked if r["http"] not in (200, 429)),
                        "rate_limited": sum(1 for r in asked if r["http"] == 429),
                        "by_status": {s: sum(1 for r in asked if r["status"] == s) for s in {r["status"] for r in asked}},
                        "p50_ms": lat[len(lat) // 2] if lat else None,
                        "p95_ms": lat[int(0.95 * (len(lat) - 1))] if lat else None}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap, rate=0.2, timeout_min=20)
    ap.add_argument("--ask-rate", type=float, default=6.0, help="questions per second (the server allows 10 "
                    "per principal by default)")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--pg-port", type=int, default=15499)
    ap.add_argument("--http-port", type=int, default=18099)
    ap.add_argument("--out", type=Path, default=RESULTS / "soak_embedded.json")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    warmup = warmup_of(args)
    data = args.data or Path(tempfile.mkdtemp(prefix="soak-embedded-data-"))
    server = Server(args, data)
    result: dict[str, Any] = {"benchmark": "soak", "profile": "embedded", "warmup_minutes": warmup,
                              "args": vars(args) | {"out": str(args.out), "data": str(data)},
                              "started_at": datetime.now(UTC).isoformat()}
    failures: list[str] = ["did not finish"]
    try:
        server.start()
        out = run(args, server)
        verdict = judge(out["samples"], warmup_min=warmup, rss_slope=args.rss_slope_mb_min, fd_slack=args.fd_slack,
                        conn_slack=args.conn_slack, judged={"serve"})
        growth = list(verdict["failures"])
        failures = [] if args.smoke else list(growth)
        if out["lost"]:
            failures.append(f"{len(out['lost'])} documents never became active")
        if out["deleted_still_active"]:
            failures.append(f"{len(out['deleted_still_active'])} deleted documents are still active")
        if out["queries"]["http_errors"]:
            failures.append(f"{out['queries']['http_errors']} questions answered with an HTTP error")
        if out["queries"]["wrong"]:
            failures.append(f"{out['queries']['wrong']} replies with another tenant's evidence")
        result.update(out | {"verdict": verdict | {"growth": growth, "failures": failures}})
        plot(out["samples"], {"serve", "server:postgres"}, args.out.with_suffix(".png"))
    finally:
        result["serve_exit_code"] = server.stop()
        subprocess.run([MANIFOLD, "embedded", "stop"], env=server.env, capture_output=True, timeout=120)
        from metrics_eval import commit, machine

        result.update({"commit": commit(), "machine": machine(), "finished_at": datetime.now(UTC).isoformat()})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for f in failures:
        log(f"FAILURE: {f}")
    print(f"documents {result.get('documents', '?')}, lost {len(result.get('lost', [])) if 'lost' in result else '?'}, "
          f"deleted still active {len(result.get('deleted_still_active', []))}, "
          f"wrong {result.get('queries', {}).get('wrong', '?')}, "
          f"growth failures {len(result.get('verdict', {}).get('growth', []))}"
          + (" (smoke: not failing)" if args.smoke else ""), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
