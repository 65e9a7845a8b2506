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
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        workers.run(ManifoldSettings(), roles, stop)
    except (ValueError, workers.SchemaNotReady) as err:
        print(f"manifold workers: {err}", file=sys.stderr)
        return 2
    return 0


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
        f"Roles: {', '.join(ROLES)}. Serves Prometheus metrics on MANIFOLD_INGEST__METRICS_PORT.",
    )
    workers.add_argument("--roles", help="comma-separated subset, e.g. parse,chunk")
    workers.set_defaults(run=_workers)

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
