"""The `manifold` command: a thin translator from the command line to the package's functions.

One module per command group, each with `register(sub)` (its sub-parsers) and its handlers:
`stack` (stack, migrate), `documents` (ingest, delete, sync), `access` (acl, groups: per-document
ACLs and group memberships), `workers`, `ask`, `ops` (status,
trace, reconcile, gc, purge-tenant), `embeddings`, `serve` (serve, mcp, token), `quickstart`,
`embedded` (the embedded profile's query server and PostgreSQL: start, status, stop) and
`evaluate` (eval). Handlers import what they need when they run, so `manifold --help` stays fast
and nothing connects until a command asks for it; the adapters of each profile come from
`deploy.compose`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from manifold.deploy.cli import (
    access,
    ask,
    documents,
    embedded,
    embeddings,
    evaluate,
    ops,
    quickstart,
    serve,
    stack,
    workers,
)

GROUPS = (stack, documents, access, workers, ask, ops, embeddings, serve, quickstart, embedded, evaluate)
"""In the order `manifold --help` lists their commands."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="manifold",
        description="manifold: turn changing documents into trustworthy answers. "
        "Settings come from MANIFOLD_* environment variables (see README).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    tenant = getattr(args, "tenant", None)
    if tenant is not None:
        from manifold.shared.events import is_tenant

        if not is_tenant(tenant):  # one line and exit 2, before any settings, store or broker
            print(f"manifold {args.command}: tenant {tenant!r} is not a tenant slug (1-63 of a-z, 0-9, '-', '_', "
                  "starting with a letter or digit)", file=sys.stderr)
            return 2
    if getattr(args, "profile", None):
        import os

        os.environ["MANIFOLD_PROFILE"] = args.profile  # read by every ManifoldSettings() below
    return int(args.run(args))
