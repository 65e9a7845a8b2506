"""The `manifold` command: a thin translator from the command line to the package's functions.

Subcommands import what they need when they run, so `manifold --help` stays fast and nothing
connects until a command asks for it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _stack(args: argparse.Namespace) -> int:
    from manifold.deploy.local import supervisor
    from manifold.deploy.local.stack import build_services, stack_paths
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    try:
        services = build_services(settings, only=args.services or None)
    except ValueError as err:
        print(f"manifold stack: {err}", file=sys.stderr)
        return 2
    paths = stack_paths(settings)
    if args.action == "up":
        try:
            supervisor.up(services, paths, timeout=settings.stack.start_timeout_s)
        except supervisor.StackError as err:
            print(f"manifold stack up failed: {err}", file=sys.stderr)
            return 1
        args.action = "status"
    if args.action == "down":
        supervisor.down(services, paths)
        return 0
    rows = supervisor.status(services, paths)
    print(f"stack directory: {paths.root}")
    print(f"{'service':<14}{'state':<10}{'pid':<9}{'version':<34}address")
    for row in rows:
        state = "healthy" if row.healthy else ("starting" if row.running else "down")
        print(f"{row.name:<14}{state:<10}{row.pid or '-'!s:<9}{row.version:<34}{row.address}")
    return 0 if all(r.healthy for r in rows) else 3


def _migrate(args: argparse.Namespace) -> int:
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.stores import pg_schema

    pg = ManifoldSettings().postgres
    applied = pg_schema.migrate(
        pg.conninfo(),
        ingest_password=pg.ingest_password.get_secret_value(),
        query_password=pg.query_password.get_secret_value(),
    )
    print(f"schema at version {pg_schema.PG_SCHEMA_VERSION}; applied now: {applied or 'nothing'}")
    return 0


def _upstream_client(settings):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    from manifold.ingest.client import UpstreamClient
    from manifold.shared import topics
    from manifold.shared.kafka import ensure_topics, producer_config
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.postgres import PostgresStagingStore

    ensure_topics(settings.kafka.bootstrap_servers, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS)
    return UpstreamClient(
        producer=Producer(producer_config(settings.kafka.bootstrap_servers, "manifold-ingest-cli")),
        ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
        staging=PostgresStagingStore.from_settings(settings),
        max_document_bytes=settings.ingest.max_document_bytes,
    )


def _ingest(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from manifold.ingest.client import count_files
    from manifold.shared.config import ManifoldSettings

    paths = [Path(p) for p in args.paths]
    client = _upstream_client(ManifoldSettings())
    with tqdm(total=count_files(paths), unit="file", desc="publishing", file=sys.stderr,
              disable=args.quiet) as bar:
        report = client.publish_paths(args.tenant, paths, progress=lambda _: bar.update(1))
    print(f"published {len(report.published)}, unchanged {len(report.unchanged)}, "
          f"rejected {len(report.rejected)}")
    for path, reason in report.rejected:
        print(f"rejected {path}: {reason}", file=sys.stderr)
    return 1 if report.rejected else 0


def _delete(args: argparse.Namespace) -> int:
    from manifold.shared.config import ManifoldSettings

    version = _upstream_client(ManifoldSettings()).delete(args.tenant, args.document_id)
    if version is None:
        print(f"{args.document_id!r} is not a published document of tenant {args.tenant!r}", file=sys.stderr)
        return 1
    print(f"delete of {args.document_id!r} published as version {version}")
    return 0


def _workers(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from manifold.ingest import workers
    from manifold.shared.config import ManifoldSettings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    for noisy in ("elastic_transport", "neo4j", "httpx", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    roles = [r for r in args.roles.split(",") if r] if args.roles else list(workers.ROLES)
    serve_query = "query" in roles
    ingest_roles = [r for r in roles if r != "query"]
    unknown = sorted(set(ingest_roles) - set(workers.ROLES) - set(workers.EXTRA_ROLES))
    if unknown:
        print(f"manifold workers: unknown role(s) {unknown}; choose from "
              f"{', '.join(workers.ROLES + workers.EXTRA_ROLES + ('query',))}", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if not serve_query:
        try:
            workers.run(settings, ingest_roles, stop)
        except (ValueError, workers.SchemaNotReady) as err:
            print(f"manifold workers: {err}", file=sys.stderr)
            return 2
        return 0
    return _run_with_query(settings, ingest_roles, stop, threads=args.query_threads)


def _run_with_query(settings, ingest_roles: list[str], stop, *, threads: int) -> int:  # type: ignore[no-untyped-def]
    """`--roles` includes `query`: the query worker in this thread, ingest roles (if any) beside it."""
    import logging
    import threading

    from manifold.ingest import workers
    from manifold.query import worker as query_worker
    from manifold.query.auth import InsecureKey, TokenVerifier
    from manifold.query.composition import build_answerer

    try:
        TokenVerifier.from_settings(settings)  # fail fast, before any store or worker starts
    except InsecureKey as err:
        print(f"manifold workers: {err}", file=sys.stderr)
        return 2
    failures: list[BaseException] = []
    ingest = None
    if ingest_roles:
        def run_ingest() -> None:
            try:
                workers.run(settings, ingest_roles, stop)
            except BaseException as err:  # noqa: BLE001 - reported below, stops the query worker too
                failures.append(err)
                stop.set()

        ingest = threading.Thread(target=run_ingest, name="manifold-ingest", daemon=True)
        ingest.start()
    answerer = None
    code = 0
    try:
        answerer = build_answerer(settings)
        query_worker.start_metrics(settings)
        query_worker.serve(settings, stop, answerer, threads=threads)
    except (InsecureKey, ValueError) as err:
        print(f"manifold workers: {err}", file=sys.stderr)
        code = 2
    except Exception as err:  # noqa: BLE001 - the process exits non-zero with the reason
        logging.getLogger(__name__).exception("query worker stopped: %s", err)
        code = 1
    finally:
        stop.set()
        if answerer is not None:
            answerer.close()
        if ingest is not None:
            ingest.join()
    for err in failures:
        print(f"manifold workers: {err}", file=sys.stderr)
        code = code or (2 if isinstance(err, (ValueError, workers.SchemaNotReady)) else 1)
    return code


_ASK_EXIT = {"answered": 0, "partial": 0, "clarify": 0, "no_answer": 0, "refused": 2, "error": 1}


def _session_path(tenant: str, session: str):  # type: ignore[no-untyped-def]
    import os
    import re
    from pathlib import Path

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", session):
        raise ValueError(f"session {session!r} must be 1-128 of letters, digits, '.', '_' or '-'")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "manifold" / "sessions" / tenant / f"{session}.json"


def _save_session(path, continuation: str, question: str | None) -> None:  # type: ignore[no-untyped-def]
    import json
    import os

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"continuation": continuation, "question": question}, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _ask(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from manifold.query.auth import TENANT_RE
    from manifold.query.client import QueryClient, QueryTimeout, mint_dev_token
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.errors import Transient

    if not TENANT_RE.match(args.tenant):
        print(f"manifold ask: tenant {args.tenant!r} is not a slug", file=sys.stderr)
        return 2
    plan = None
    if args.plan:
        try:
            plan = json.loads(Path(args.plan).read_text())
        except (OSError, ValueError) as err:
            print(f"manifold ask: cannot read plan {args.plan}: {err}", file=sys.stderr)
            return 2
        if not isinstance(plan, dict):
            print("manifold ask: a plan file holds one JSON object", file=sys.stderr)
            return 2
    continuation = None
    session_file = None
    if args.session:
        try:
            session_file = _session_path(args.tenant, args.session)
        except ValueError as err:
            print(f"manifold ask: {err}", file=sys.stderr)
            return 2
    if args.choice:
        if session_file is None or not session_file.exists():
            print("manifold ask: --choice answers a clarification; give the --session that received it",
                  file=sys.stderr)
            return 2
        continuation = json.loads(session_file.read_text()).get("continuation")
    if not args.question and plan is None and continuation is None:
        print("manifold ask: give a QUESTION, --plan FILE, or --session S --choice C", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    try:
        with QueryClient(settings, token=mint_dev_token(settings, args.tenant)) as client:
            reply = client.ask(args.question or None, plan, deadline_ms=args.deadline_ms, session_id=args.session,
                               continuation=continuation, choice=args.choice)
    except QueryTimeout as err:
        print(f"manifold ask: timeout: {err}", file=sys.stderr)
        return 1
    except (Transient, ValueError) as err:
        print(f"manifold ask: {err}", file=sys.stderr)
        return 1
    if session_file is not None:
        if reply.status == "clarify" and reply.clarification and reply.clarification.continuation:
            _save_session(session_file, reply.clarification.continuation, args.question)
        elif continuation is not None and reply.status in ("answered", "partial", "no_answer"):
            session_file.unlink(missing_ok=True)  # the clarification was consumed
    if args.json:
        print(reply.model_dump_json(indent=2))
    else:
        print(_render_reply(reply, session=args.session))
    return _ASK_EXIT.get(reply.status, 1)


def _render_reply(reply, *, session: str | None) -> str:  # type: ignore[no-untyped-def]
    """Human-readable reply: status, answer, gaps, clarification, citations, compact trace."""
    lines = [f"status: {reply.status}  (request {reply.request_id})"]
    if reply.error:
        lines.append(f"error: {reply.error}")
    if reply.answer:
        lines += ["", reply.answer]
    if reply.result:
        lines += ["", "result:"] + [f"  {k}: {v}" for k, v in reply.result.items()]
    if reply.gaps:
        lines += ["", "gaps:"] + [f"  - [{g.kind}]{f' {g.step}:' if g.step else ''} {g.detail}" for g in reply.gaps]
    c = reply.clarification
    if c is not None:
        lines += ["", f"clarify: {c.question}  (about {c.anchor!r})"]
        lines += [f"  - {e.entity_id}  {e.name}  [{e.kind}, {e.key}]" for e in c.candidates]
        if c.continuation:
            lines.append(f"  answer with: manifold ask --session {session} --choice <entity id or name>" if session
                         else "  (re-ask with --session NAME to answer it with --choice)")
    if reply.evidence:
        lines += ["", "citations:"]
        for ev in reply.evidence:
            where = ev.chunk_id or ev.record_id or ev.edge_id or "-"
            doc = f"{ev.document_id}@v{ev.version}" if ev.document_id else "-"
            lines.append(f"  [{ev.evidence_id}] {ev.store}/{ev.kind} {doc} {where}")
    t = reply.trace
    lines += ["", f"trace: {t.elapsed_ms:.0f} ms"]
    if t.intents:
        lines.append("  intents: " + ", ".join(f"{i.type} {i.confidence:.2f}" for i in t.intents))
    for st in t.steps:
        lines.append(f"  step {st.step_id} {st.operator}: {st.status} {st.elapsed_ms:.0f} ms, {st.hits} hits"
                     + (f" ({st.detail})" if st.detail else ""))
    if t.policy:
        lines.append("  policy: " + "; ".join(t.policy))
    return "\n".join(lines)


def _lifecycle_tenants(ports, tenant: str | None) -> list[str]:  # type: ignore[no-untyped-def]
    from manifold.ingest.reconciler import tenants

    return [tenant] if tenant else tenants(ports)


def _status(args: argparse.Namespace) -> int:
    import json

    from manifold.ingest import lifecycle
    from manifold.shared.config import ManifoldSettings

    ports = lifecycle.build_ports(ManifoldSettings())
    result = lifecycle.status(ports, _lifecycle_tenants(ports, args.tenant))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(f"{'tenant':<20}{'document':<40}{'active':>7}  {'state':<9}{'pg':>6}{'es':>6}{'neo4j':>7}")
    for d in result["documents"]:
        c = d["counts"]
        print(f"{d['tenant_id']:<20}{d['document_id'][:39]:<40}{d['active_version'] or '-'!s:>7}  {d['state']:<9}"
              f"{c['postgres']:>6}{c['elasticsearch']:>6}{c['neo4j']:>7}")
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    import json

    from manifold.ingest import lifecycle, reconciler
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = lifecycle.build_ports(settings)
    report = reconciler.reconcile(ports, [args.tenant] if args.tenant else None, repair_drift=args.repair,
                                  grace_s=settings.ingest.gc_grace_s)
    out = report.to_json()
    if args.json:
        print(json.dumps({k: out[k] for k in ("drift", "repaired", "stores", "failed")}, indent=2))
    else:
        for store, body in out["stores"].items():
            print(f"{store:<14}" + "  ".join(f"{k} {n}" for k, n in body["drift"].items())
                  + f"  repaired {body['repaired']}")
        for f in report.findings:
            print(f"  {f.store} {f.kind}: {f.tenant_id} {f.document_id}@{f.version} {f.detail}".rstrip())
        for problem in report.failed:
            print(f"not repaired: {problem}", file=sys.stderr)
    if report.failed:
        return 1
    return 0 if args.repair or not report.findings else 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="manifold",
        description="manifold: turn changing documents into trustworthy answers. "
        "Settings come from MANIFOLD_* environment variables (see README).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    stack = sub.add_parser(
        "stack",
        help="install, start, stop and inspect the local real-service stack",
        description="Kafka (KRaft), Elasticsearch, Neo4j and PostgreSQL+pgvector on loopback. "
        "'status' exits 3 when any service is not healthy.",
    )
    stack.add_argument("action", choices=["up", "down", "status"])
    stack.add_argument(
        "services", nargs="*", metavar="SERVICE",
        help="restrict to these services (postgres, kafka, elasticsearch, neo4j); default all",
    )
    stack.set_defaults(run=_stack)

    migrate = sub.add_parser("migrate", help="create or upgrade the PostgreSQL schema and roles (superuser)")
    migrate.set_defaults(run=_migrate)

    tenant_help = "tenant slug (lower-case letters, digits, '-' and '_')"
    ingest = sub.add_parser(
        "ingest",
        help="publish files and folders as document versions (unchanged files publish nothing)",
        description="Walks PATHs, hashes each file, assigns a version when the content changed and "
        "publishes it to manifold.documents. A document id is the path relative to the folder given.",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--tenant", required=True, help=tenant_help)
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.set_defaults(run=_ingest)

    delete = sub.add_parser("delete", help="publish the deletion of a document")
    delete.add_argument("document_id", metavar="DOC_ID")
    delete.add_argument("--tenant", required=True, help=tenant_help)
    delete.set_defaults(run=_delete)

    from manifold.ingest import ROLES

    workers = sub.add_parser(
        "workers",
        help="run pipeline workers (all roles by default)",
        description="Runs stage workers in Kafka consumer groups until SIGINT/SIGTERM. "
        f"Roles: {', '.join(ROLES)} (default), reconcile, query. Serves Prometheus metrics on MANIFOLD_INGEST__METRICS_PORT.",
    )
    workers.add_argument("--roles", help="comma-separated subset, e.g. parse,chunk; add 'query' to serve "
                         "query requests (metrics on MANIFOLD_QUERY__METRICS_PORT)")
    workers.add_argument("--query-threads", type=int, default=1, metavar="N",
                         help="query consumers in this process (role 'query'); default 1")
    workers.set_defaults(run=_workers)

    ask = sub.add_parser(
        "ask",
        help="ask the query workers a question (or send a plan) and print the reply",
        description="Mints a token for --tenant from MANIFOLD_QUERY__TOKEN_KEY (the local development key by "
        "default), sends the request on the query request topic and waits for the reply. A clarify reply "
        "with --session stores its continuation in ~/.cache/manifold/sessions/<tenant>/<session>.json; "
        "answer it with --session S --choice C. Exit 0 answered/partial/clarify/no_answer, 2 refused, "
        "1 error or timeout.",
    )
    ask.add_argument("question", nargs="?", metavar="QUESTION")
    ask.add_argument("--tenant", required=True, help=tenant_help)
    ask.add_argument("--json", action="store_true", help="print the full reply envelope")
    ask.add_argument("--deadline-ms", type=int, metavar="N", help="default MANIFOLD_QUERY__DEFAULT_DEADLINE_MS")
    ask.add_argument("--session", metavar="S", help="session name for clarify turns")
    ask.add_argument("--choice", metavar="C", help="the candidate chosen for the session's pending clarification")
    ask.add_argument("--plan", metavar="FILE.json", help="send this explicit plan instead of a question")
    ask.set_defaults(run=_ask)

    status = sub.add_parser("status", help="per document: active version, state, artifact counts per store")
    status.add_argument("--tenant", help=tenant_help + "; default all tenants")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(run=_status)

    reconcile = sub.add_parser(
        "reconcile",
        help="compare the publication manifest with every store; --repair fixes the drift",
        description="Drift kinds: missing (active version incomplete or altered), stale (retired past "
        "the grace period or deleted, still stored), orphaned (unknown to the manifest), wrong_version "
        "(serving marks or state disagree). Exit 3 when drift is found without --repair, 1 when a "
        "repair failed.",
    )
    reconcile.add_argument("--repair", action="store_true", help="re-drive missing versions, delete stale/orphans")
    reconcile.add_argument("--tenant", help=tenant_help + "; default all tenants")
    reconcile.add_argument("--json", action="store_true", help="machine-readable output")
    reconcile.set_defaults(run=_reconcile)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
