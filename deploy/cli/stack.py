"""`manifold stack` (the local real-service stack) and `manifold migrate` (the PostgreSQL schema)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


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


def register(sub: Any) -> None:
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
