"""The soak: steady mixed load for a long time on the distributed profile, sampled every minute,
failing on growth after warm-up (issue 30).

`make soak` (or `.venv/bin/python bench/soak.py [--minutes 30]`) runs on the reliability suite's
OWN stack (`bench/reliability.py`: /tmp/relstack, ports 31433/31092/31200/31687, never the dev or
CI stack) with every worker role as a supervised subprocess, and for `--minutes`:

- publishes new documents (`ingest.sample_corpus`, mixed formats) at `--rate` per second, an
  update of an already published document every `--update-every-s` and a delete every
  `--delete-every-s`, through the same `UpstreamClient` as `manifold ingest`;
- asks questions in a loop on the metric, exact-lookup, passage and hybrid routes over Kafka
  request/reply (`reliability.QueryTraffic`: each reply checked against hand-checked facts and
  for another tenant's evidence);
- every `--sample-s` records, per process (each worker subprocess with its children, each server,
  this script): RSS and open file descriptors; PostgreSQL connections (`pg_stat_activity`); the
  total consumer lag; the p50/p95 of the questions answered in that interval.

Afterwards it waits for the pipeline to drain and verifies from the stores as the reliability
suite does (lost, duplicated, leaked, drift; deleted documents are checked gone), then judges the
samples taken after `--warmup-minutes` (default: a fifth of the run, at most 5):

- RSS: least-squares slope of each manifold process (workers, this script) ≤ `--rss-slope-mb-min`
  (default 2 MB/min, i.e. ≤ 60 MB over 30 minutes). Servers (JVMs filling their fixed heaps,
  PostgreSQL touching its shared buffers) are reported, not judged;
- open file descriptors of each manifold process and PostgreSQL connections: the median of the
  last third ≤ the first post-warm-up sample + `--fd-slack` / `--conn-slack` (defaults 5 and 3,
  room for sockets that come and go);
- query p95: the last third's ≤ 1.5 × the first post-warm-up third's + 100 ms.

Writes bench/results/soak_distributed.json and soak_distributed.png; prints the verdict line and
exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402 - after sys.path
from reliability import QueryTraffic, Suite, _media, latency_summary, log  # noqa: E402 - bench/ on sys.path

RESULTS = ROOT / "results"


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, value) points (0.0 with fewer than two)."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def judge(samples: list[dict[str, Any]], *, warmup_min: float, rss_slope: float, fd_slack: int,
          conn_slack: int, judged: set[str]) -> dict[str, Any]:
    """The growth verdict over the samples after warm-up (see the module docstring)."""
    after = [s for s in samples if s["minute"] >= warmup_min]
    failures: list[str] = []
    out: dict[str, Any] = {"samples_after_warmup": len(after)}
    if len(after) < 3:
        return out | {"failures": ["fewer than 3 samples after warm-up: nothing to judge"]}
    third = max(1, len(after) // 3)
    rss: dict[str, float] = {}
    for name in sorted({n for s in after for n in s["rss_mb"]}):
        pts = [(s["minute"], s["rss_mb"][name]) for s in after if name in s["rss_mb"]]
        rss[name] = round(slope_per_min(pts), 3)
        if name in judged and rss[name] > rss_slope:
            failures.append(f"RSS of {name} grows {rss[name]:.2f} MB/min (limit {rss_slope})")
    fds: dict[str, list[float]] = {}
    for name in sorted({n for s in after for n in s["fds"]}):
        series = [s["fds"][name] for s in after if name in s["fds"]]
        first, last = series[0], statistics.median(series[-third:])
        fds[name] = [first, last]
        if name in judged and last > first + fd_slack:
            failures.append(f"open files of {name}: {first} -> {last} (slack {fd_slack})")
    conns = [s["pg_connections"] for s in after if s["pg_connections"] is not None]
    if conns and statistics.median(conns[-third:]) > conns[0] + conn_slack:
        failures.append(f"PostgreSQL connections: {conns[0]} -> {statistics.median(conns[-third:])}")
    early = [s["query_p95_ms"] for s in after[:third] if s["query_p95_ms"] is not None]
    late = [s["query_p95_ms"] for s in after[-third:] if s["query_p95_ms"] is not None]
    p95 = {"first_third": max(early) if early else None, "last_third": max(late) if late else None}
    if early and late and max(late) > 1.5 * max(early) + 100:
        failures.append(f"query p95 drifted: {max(early)} -> {max(late)} ms")
    return out | {"rss_slope_mb_per_min": rss, "fds_first_vs_last_third": fds,
                  "pg_connections_first_vs_last_third": [conns[0], statistics.median(conns[-third:])] if conns
                  else None, "query_p95_ms": p95, "failures": failures}


class Sampler:
    """One sample of every watched process, PostgreSQL's connections, lag and query latency."""

    def __init__(self, suite: Suite, traffic: QueryTraffic) -> None:
        self.suite = suite
        self.traffic = traffic
        self.t0 = time.monotonic()
        self.last = time.time()

    def _processes(self) -> dict[str, int]:
        from reliability_procs import stack_pids

        names: dict[str, int] = dict(self.suite.sup.pids())
        names.update({f"server:{k}": v for k, v in stack_pids(self.suite.stack_dir).items()})
        names["suite"] = os.getpid()
        return names

    def take(self) -> dict[str, Any]:
        from reliability_checks import consumer_lag

        rss, fds = {}, {}
        for name, pid in self._processes().items():
            try:
                proc = psutil.Process(pid)
                family = [proc] if name == "suite" else [proc, *proc.children(recursive=True)]
                rss[name] = round(sum(p.memory_info().rss for p in family) / 2**20, 1)
                fds[name] = sum(p.num_fds() for p in family)
            except (psutil.Error, OSError):
                continue
        now = time.time()
        window = [r for r in self.traffic.records if self.last <= r["t"] < now]
        self.last = now
        try:
            lag = sum(v for v in consumer_lag(self.suite.settings).values() if v > 0)
        except Exception:  # noqa: BLE001 - reported as unknown
            lag = None
        lat = latency_summary(window)
        return {"minute": round((time.monotonic() - self.t0) / 60, 2), "rss_mb": rss, "fds": fds,
                "pg_connections": self._connections(), "consumer_lag": lag, "queries": len(window),
                "query_p50_ms": lat.get("p50_ms"), "query_p95_ms": lat.get("p95_ms"),
                "wrong": sum(1 for r in window if r.get("wrong"))}

    def _connections(self) -> int | None:
        import psycopg

        try:
            with psycopg.connect(self.suite.settings.postgres.conninfo(), connect_timeout=5) as conn:
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                   "AND pid <> pg_backend_pid()").fetchone()
                return int(row[0]) if row else None
        except psycopg.Error:
            return None


def soak(suite: Suite, args: argparse.Namespace) -> dict[str, Any]:
    """Steady mixed load for `args.minutes`, sampled every `args.sample_s`."""
    from manifold.ingest.sample_corpus import write_corpus

    tenant = suite.tenants["load"]
    root = suite.workdir / "soak"
    paths = write_corpus(root, int(args.rate * args.minutes * 60) + 10, seed=args.seed + 1)
    traffic = QueryTraffic(suite.settings, suite.tenants, args.query_deadline_ms, {"now": ""})
    suite.traffic = traffic
    client = suite.client()
    sampler = Sampler(suite, traffic)
    samples: list[dict[str, Any]] = []
    published: list[str] = []
    deleted: set[str] = set()
    counts = {"new": 0, "updates": 0, "deletes": 0}
    t0 = time.monotonic()
    next_sample, next_update, next_delete = t0, t0 + args.update_every_s, t0 + args.delete_every_s
    traffic.start()
    while (elapsed := time.monotonic() - t0) < args.minutes * 60:
        while counts["new"] < min(int(elapsed * args.rate) + 1, len(paths)):
            path = paths[counts["new"]]
            doc = path.relative_to(root).as_posix()
            client.publish_bytes(tenant, doc, path.read_bytes(), _media(path))
            suite.expected[tenant].add(doc)
            published.append(doc)
            counts["new"] += 1
        now = time.monotonic()
        live = [d for d in published if d not in deleted]
        editable = [d for d in live if d.endswith((".md", ".txt"))]
        if now >= next_update and editable:  # a new version of the same document: its text grows a line
            doc = suite.rng.choice(editable)
            path = root / doc
            with path.open("a", encoding="utf-8") as f:
                f.write(f"\nRevision {counts['updates']}: the pressure check is due every "
                        f"{counts['updates'] % 11 + 1} weeks.\n")
            client.publish_bytes(tenant, doc, path.read_bytes(), _media(path))
            counts["updates"] += 1
            next_update += args.update_every_s
        if now >= next_delete and len(live) > 5:
            doc = suite.rng.choice(live[:-5])  # not the newest: they may still be in flight
            if client.delete(tenant, doc) is not None:
                deleted.add(doc)
                suite.expected[tenant].discard(doc)
                counts["deletes"] += 1
            next_delete += args.delete_every_s
        if now >= next_sample:
            samples.append(sampler.take())
            log(f"soak minute {samples[-1]['minute']}: lag {samples[-1]['consumer_lag']}, "
                f"p95 {samples[-1]['query_p95_ms']} ms, pg conns {samples[-1]['pg_connections']}")
            next_sample += args.sample_s
        time.sleep(0.2)
    traffic.stop()
    samples.append(sampler.take())
    return {"samples": samples, "counts": counts, "deleted": sorted(deleted),
            "queries": {"asked": len(traffic.records), "wrong": sum(1 for r in traffic.records if r.get("wrong")),
                        "latency": latency_summary(traffic.records)}}


def plot(samples: list[dict[str, Any]], judged: set[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    minutes = [s["minute"] for s in samples]
    for ax, key, title in ((axes[0][0], "rss_mb", "RSS (MB)"),
                           (axes[0][1], "fds", "open file descriptors")):
        for name in sorted(judged):
            ys = [s[key].get(name) for s in samples]
            ax.plot(minutes, ys, label=name)
        ax.set_title(title)
        ax.legend(fontsize=7)
    axes[1][0].plot(minutes, [s["pg_connections"] for s in samples], label="PostgreSQL connections")
    axes[1][0].plot(minutes, [s["consumer_lag"] for s in samples], label="consumer lag (messages)")
    axes[1][0].legend(fontsize=7)
    axes[1][1].plot(minutes, [s["query_p95_ms"] for s in samples], label="query p95 ms")
    axes[1][1].plot(minutes, [s["query_p50_ms"] for s in samples], label="query p50 ms")
    axes[1][1].legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("minute")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def common_args(ap: argparse.ArgumentParser, *, rate: float, timeout_min: float) -> None:
    """The load and threshold options both soaks share (see the module docstring)."""
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup-minutes", type=float, default=None, help="default: a fifth of the run, at most 5")
    ap.add_argument("--sample-s", type=float, default=60)
    ap.add_argument("--rate", type=float, default=rate, help="new documents per second")
    ap.add_argument("--update-every-s", type=float, default=10)
    ap.add_argument("--delete-every-s", type=float, default=20)
    ap.add_argument("--rss-slope-mb-min", type=float, default=2.0)
    ap.add_argument("--fd-slack", type=int, default=5)
    ap.add_argument("--conn-slack", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="a short harness check: growth is judged and reported but does not fail the run "
                         "(lost, wrong, resurrected and the zeros still do)")
    ap.add_argument("--timeout-min", type=float, default=timeout_min, help="give up waiting for the drain after this")
    ap.add_argument("--seed", type=int, default=30)


def warmup_of(args: argparse.Namespace) -> float:
    return float(args.warmup_minutes) if args.warmup_minutes is not None else min(5.0, args.minutes / 5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap, rate=0.5, timeout_min=30)
    ap.add_argument("--query-deadline-ms", type=int, default=8000)
    ap.add_argument("--no-stack-up", action="store_true", help="use the already running own stack")
    ap.add_argument("--keep-data", action="store_true",
                    help="start the own stack on the data of earlier runs (default: its data directory is emptied)")
    ap.add_argument("--keep-stack", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "soak_distributed.json")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    warmup = warmup_of(args)
    suite = Suite(argparse.Namespace(**vars(args), phases="soak", load_minutes=0, load_rate=args.rate))
    result: dict[str, Any] = {"benchmark": "soak", "profile": "distributed", "args": vars(args) | {"out": str(args.out)},
                              "warmup_minutes": warmup, "started_at": datetime.now(UTC).isoformat()}
    summary: dict[str, Any] = {}
    verdict: dict[str, Any] = {"failures": ["did not finish"]}
    try:
        suite.setup()
        suite.publish_world()
        suite.wait_published("sample world", 900)
        run = soak(suite, args)
        drained = suite.wait_published("soak drain", args.timeout_min * 60)
        summary = suite.verify()
        from reliability_checks import active_documents

        resurrected = sorted(set(run["deleted"]) & active_documents(suite.settings, suite.tenants["load"]))
        judged = {n for n in run["samples"][-1]["rss_mb"] if not n.startswith("server:")}
        verdict = judge(run["samples"], warmup_min=warmup, rss_slope=args.rss_slope_mb_min, fd_slack=args.fd_slack,
                        conn_slack=args.conn_slack, judged=judged)
        verdict["growth"] = list(verdict["failures"])
        if not drained:
            verdict["failures"].append("the pipeline did not drain in time")
        if resurrected:
            verdict["failures"].append(f"{len(resurrected)} deleted documents are still active")
        if run["queries"]["wrong"]:
            verdict["failures"].append(f"{run['queries']['wrong']} wrong query replies")
        result.update({"counts": run["counts"], "deleted": len(run["deleted"]), "deleted_still_active": resurrected,
                       "queries": run["queries"], "samples": run["samples"], "verdict": verdict})
        plot(run["samples"], judged, args.out.with_suffix(".png"))
    finally:
        suite.teardown()
        result.update({k: suite.result[k] for k in ("reconcile", "reconcile_findings_examples", "reconcile_before_gc")
                       if k in suite.result})
        result.update({"summary": summary, "suite_failures": suite.failures, "commit": _commit(),
                       "machine": _machine(), "finished_at": datetime.now(UTC).isoformat()})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    growth = [f for f in verdict.get("growth", [])]
    failures = [f for f in verdict["failures"] if f not in growth or not args.smoke] + suite.failures
    for f in failures:
        log(f"FAILURE: {f}")
    zeros = all(summary.get(k) == 0 for k in ("duplicates", "lost", "leaks", "drift"))
    print(", ".join(f"{k} {summary.get(k, '?')}" for k in ("documents", "published", "duplicates", "lost", "leaks",
                                                           "drift")) + f", growth failures {len(verdict.get('growth', []))}"
          + (" (smoke: not failing)" if args.smoke else ""),
          flush=True)
    return 0 if zeros and summary and not failures else 1


def _commit() -> str:
    from metrics_eval import commit

    return str(commit())


def _machine() -> Any:
    from metrics_eval import machine

    return machine()


if __name__ == "__main__":
    sys.exit(main())
