"""Operating the stores: `manifold status` (with `--review`: why items went to review), `trace`,
`reconcile`, `switch-index`, `gc` and `purge-tenant`.

`status` also shows each document's access state (issue 29), read from the ACL applier's state in
PostgreSQL: the applied ACL (readers counted, its seq) or the tenant default that applies. When
that state cannot be read, the rest of the status is still printed and one line on stderr says so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP, add_profile


def _lifecycle_tenants(ports, tenant: str | None) -> list[str]:  # type: ignore[no-untyped-def]
    from manifold.ingest.reconciler import tenants

    return [tenant] if tenant else tenants(ports)


def _trace(args: argparse.Namespace) -> int:
    import json

    from manifold.shared.config import ManifoldSettings
    from manifold.shared.stores.ledger import PostgresVersionLedger

    settings = ManifoldSettings()
    if settings.profile == "embedded":
        from manifold.deploy.compose import embedded

        embedded.prepare(settings, quiet=True)
    timeline = PostgresVersionLedger(settings.postgres.ingest_conninfo()).timeline(
        args.tenant, args.document_id, args.version)
    if timeline is None:
        print(f"manifold trace: {args.document_id!r} is not a document of tenant {args.tenant!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(timeline.to_json(), indent=2))
        return 0
    print(f"{timeline.tenant_id}/{timeline.document_id} version {timeline.version}")
    first = previous = timeline.events[0][1] if timeline.events else None
    for event, at in timeline.events:
        step = (at - previous).total_seconds() if previous else 0.0
        total = (at - first).total_seconds() if first else 0.0
        print(f"  {event:<20}{at.isoformat(timespec='milliseconds'):<34}+{step:>9.3f} s  (at {total:.3f} s)")
        previous = at
    if not timeline.events:
        print("  nothing recorded yet (the event was not acknowledged)")
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from manifold.deploy.compose import profiles
    from manifold.ingest import lifecycle
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = profiles.lifecycle_ports(settings)
    review = bool(args.review)
    result = lifecycle.status(ports, _lifecycle_tenants(ports, args.tenant), review=review)
    _add_access(result, settings)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print_status(result, review=review)
    return 0


def _add_access(result: dict[str, Any], settings: Any) -> None:
    """Each document gets `acl`: {"state": "set", seq, public, users, groups, applied_at} or
    {"state": "default", "default": "tenant"|"none"}. Unreadable state: no `acl`, one line on stderr."""
    from manifold.deploy.cli.access import acl_json, acl_store, tenant_default
    from manifold.shared.errors import Transient

    by_tenant: dict[str, list[dict[str, Any]]] = {}
    for d in result["documents"]:
        by_tenant.setdefault(d["tenant_id"], []).append(d)
    if not by_tenant:
        return
    try:
        store = acl_store(settings)
        rows = {t: store.acls(t, [d["document_id"] for d in docs]) for t, docs in by_tenant.items()}
    except Transient as err:
        print(" ".join(f"manifold status: the ACL state was not read: {err}".split()), file=sys.stderr)
        return
    for tenant, docs in by_tenant.items():
        default = tenant_default(settings, tenant)
        for d in docs:
            row = rows[tenant].get(d["document_id"])
            d["acl"] = {"state": "set", **acl_json(row)} if row is not None else {"state": "default",
                                                                                  "default": default}


def acl_text(acl: dict[str, Any]) -> str:
    """`tenant default (none)` or `users 2, groups 1, public; seq 17`."""
    if acl["state"] != "set":
        return f"tenant default ({acl['default']})"
    parts = [f"users {len(acl['users'])}"] if acl["users"] else []
    parts += [f"groups {len(acl['groups'])}"] if acl["groups"] else []
    parts += ["public"] if acl["public"] else []
    return f"{', '.join(parts) or 'nobody'}; seq {acl['seq']}"


def print_status(result: dict[str, Any], *, review: bool = False, out: Callable[[str], None] = print) -> None:
    """The `status` table; then each document's access state (when it was read); with `review`,
    then per document with review items, each item's kind and reason and its payload's most
    useful fields, one line each (`lifecycle.review_summary`)."""
    out(f"{'tenant':<20}{'document':<40}{'active':>7}  {'state':<9}{'pg':>6}{'es':>6}{'neo4j':>7}{'review':>8}")
    for d in result["documents"]:
        c = d["counts"]
        out(f"{d['tenant_id']:<20}{d['document_id'][:39]:<40}{d['active_version'] or '-'!s:>7}  {d['state']:<9}"
            f"{c['postgres']:>6}{c['elasticsearch']:>6}{c['neo4j']:>7}{d.get('review_items', 0):>8}")
    _print_access([d for d in result["documents"] if "acl" in d], out)
    if review:
        _print_review(result["documents"], out)
    _print_in_flight(result.get("in_flight", []), out)


def _print_access(documents: list[dict[str, Any]], out: Callable[[str], None]) -> None:
    """Each document with an ACL, one line each; then per tenant, how many follow its default (by
    count, so a document's id is listed once in the table above and at most once here)."""
    if not documents:
        return
    listed = [d for d in documents if d["acl"]["state"] == "set"]
    out("")
    out(f"access: {len(listed)} of {len(documents)} document(s) have an ACL")
    out(f"{'tenant':<20}{'document':<40}acl")
    for d in listed:
        out(f"{d['tenant_id']:<20}{d['document_id'][:39]:<40}{acl_text(d['acl'])}")
    defaults: dict[str, tuple[int, str]] = {}
    for d in documents:
        if d["acl"]["state"] != "set":
            n, _ = defaults.get(d["tenant_id"], (0, ""))
            defaults[d["tenant_id"]] = (n + 1, d["acl"]["default"])
    for tenant, (n, default) in defaults.items():
        out(f"{tenant:<20}{f'({n} without an ACL)':<40}tenant default ({default})")


def _print_review(documents: list[dict[str, Any]], out: Callable[[str], None]) -> None:
    listed = [d for d in documents if d.get("review")]
    total = sum(len(d["review"]) for d in listed)
    out("")
    out(f"review items: {total}" + (f" in {len(listed)} document(s)" if listed else ""))
    for d in listed:
        out(f"{d['tenant_id']} {d['document_id']} (version {d['active_version']})")
        for item in d["review"]:
            reason = " ".join(str(item["reason"]).split())
            summary = f"  [{item['summary']}]" if item.get("summary") else ""
            out(f"  {item.get('kind') or 'review'}: {reason}{summary}")


def _print_in_flight(rows: list, out: Callable[[str], None] = print) -> None:  # type: ignore[type-arg]
    """Documents on their way through the pipeline, with the stage each has reached."""
    if rows:
        out("")
        out(f"in flight: {len(rows)}")
        out(f"{'tenant':<20}{'document':<40}{'version':>7}  {'stage':<14}since")
    for f in rows:
        out(f"{f['tenant_id']:<20}{f['document_id'][:39]:<40}{f['version']:>7}  {f['stage']:<14}{f['since']}")


def _reconcile(args: argparse.Namespace) -> int:
    import json

    from manifold.deploy.compose import profiles
    from manifold.ingest import reconciler
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = profiles.lifecycle_ports(settings)
    report = reconciler.reconcile(ports, [args.tenant] if args.tenant else None, repair_drift=args.repair,
                                  grace_s=settings.ingest.gc_grace_s)
    out = report.to_json()
    if args.json:
        print(json.dumps({k: out[k] for k in ("drift", "repaired", "stores", "failed", "in_flight", "findings")},
                         indent=2, default=str))
    else:
        for store, body in out["stores"].items():
            print(f"{store:<14}" + "  ".join(f"{k} {n}" for k, n in body["drift"].items())
                  + f"  repaired {body['repaired']}")
        for f in report.findings:
            print(f"  {f.store} {f.kind}: {f.tenant_id} {f.document_id}@{f.version} {f.detail}".rstrip())
        for problem in report.failed:
            print(f"not repaired: {problem}", file=sys.stderr)
        _print_in_flight(out["in_flight"])  # in flight is not drift: it does not change the exit code
    if report.failed:
        return 1
    return 0 if args.repair or not report.findings else 3


def _switch_index(args: argparse.Namespace) -> int:
    """Step 4 of an analysis rollout (docs/query.md "Rolling out an analysis change"): point the serving
    alias at the index this code writes, only once `reconcile` finds it complete."""
    import json

    from manifold.deploy.compose import profiles
    from manifold.ingest import reconciler
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    if settings.profile == "embedded":
        print("the embedded profile has no Elasticsearch index: its text rows are rewritten in place by "
              "`manifold reconcile --repair`; nothing to switch")
        return 0
    ports = profiles.lifecycle_ports(settings)
    text: Any = ports.text
    text.ensure_index()
    serving = sorted(text.alias_targets())
    out: dict[str, Any] = {"alias": text.alias, "index": text.index, "serving_before": serving}
    if serving == [text.index]:
        out["switched"] = False
    else:
        report = reconciler.reconcile(ports, None, repair_drift=False, grace_s=settings.ingest.gc_grace_s)
        missing = [f for f in report.findings if f.store == "elasticsearch" and f.kind == "missing"]
        if (missing or report.failed) and not args.force:
            out.update(switched=False, missing_versions=len(missing), failed=list(report.failed))
            if args.json:
                print(json.dumps(out, indent=2))
            else:
                failed = f" and {len(report.failed)} store check(s) failed" if report.failed else ""
                print(f"not switched: {len(missing)} active version(s) are missing from {text.index}{failed}; "
                      "run `manifold reconcile --repair` first (or pass --force)", file=sys.stderr)
            return 3
        text.switch_alias()
        out["switched"] = True
    out["serving_after"] = sorted(text.alias_targets())
    if args.json:
        print(json.dumps(out, indent=2))
    elif out["switched"]:
        print(f"{out['alias']} now serves {out['index']} (was: {', '.join(serving) or 'nothing'})")
    else:
        print(f"{out['alias']} already serves {out['index']}")
    return 0


def _gc(args: argparse.Namespace) -> int:
    import json

    from manifold.deploy.compose import profiles
    from manifold.ingest import erasure
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = profiles.lifecycle_ports(settings)
    bus = profiles.gc_bus(settings)
    trimmed = None
    try:
        out = {t: erasure.collect(ports, t, settings.ingest.gc_grace_s, staging=ports.staging, bus=bus)
               for t in _lifecycle_tenants(ports, args.tenant)}
        if isinstance(bus, erasure.BusRetention) and args.tenant is None:  # the bus is every tenant's
            trimmed = bus.trim(settings.embedded.bus_retention_s)
    finally:
        if bus is not None:
            bus.close()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for tenant, removed in out.items():
            print(f"{tenant:<28}" + "  ".join(f"{k} {n}" for k, n in removed.items()))
    if trimmed is not None:
        print(f"bus: {trimmed} message(s) older than the retention "
              f"({settings.embedded.bus_retention_s:.0f} s) and read by every consumer group removed",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def _purge_tenant(args: argparse.Namespace) -> int:
    import re

    from manifold.deploy.compose import distributed
    from manifold.ingest import erasure
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.events import TENANT_PATTERN

    if not re.fullmatch(TENANT_PATTERN.strip("^$"), args.tenant):
        print(f"manifold purge-tenant: {args.tenant!r} is not a tenant slug", file=sys.stderr)
        return 2
    if not args.yes:
        print(f"This erases EVERY document, chunk, record, vector, index entry, graph node, staged payload, "
              f"bus message and dead letter of tenant {args.tenant!r}. It cannot be undone.", file=sys.stderr)
        try:
            typed = input(f"Type the tenant name ({args.tenant}) to confirm: ")
        except EOFError:
            typed = ""
        if typed.strip() != args.tenant:
            print("manifold purge-tenant: not confirmed; nothing was erased", file=sys.stderr)
            return 1
    settings = ManifoldSettings()
    from manifold.shared.stores.tenant_purge_pg import purge_tenant

    admin = settings.postgres.conninfo()
    if settings.profile == "embedded":
        from manifold.deploy.compose import embedded

        embedded.prepare(settings, quiet=True)
        ports = erasure.PurgePorts(postgres=lambda t: purge_tenant(admin, t))
    else:
        ports = distributed.purge_ports(settings, lambda t: purge_tenant(admin, t))
    removed = erasure.purge_tenant(ports, args.tenant)
    for store, counts in removed.items():
        print(f"{store:<14}" + "  ".join(f"{k} {n}" for k, n in counts.items() if n) + (
            "" if any(counts.values()) else "nothing"))
    if settings.profile != "embedded":
        hours = settings.kafka.content_retention_ms / 3_600_000
        print(f"kafka         records cannot be deleted one by one: manifold.documents and manifold.dlq expire "
              f"them after {hours:g} h (kafka.content_retention_ms) plus at most one day (segment.ms)")
    print(f"tenant {args.tenant!r} purged")
    return 0


def register(sub: Any) -> None:
    status = sub.add_parser("status", help="per document: active version, state, artifact counts per store")
    status.add_argument("--tenant", help=TENANT_HELP + "; default all tenants")
    status.add_argument("--review", action="store_true",
                        help="also list each document's review items: why rows or facts were not accepted "
                        "(reason and, in one line, the table header / recognised fields ...); with --json, "
                        "a `review` list per document")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(run=_status)

    trace = sub.add_parser(
        "trace",
        help="where a document's version went and how long each step took (upstream publish .. activated)",
        description="Reads the ledger, the staged stage outputs and the publication manifest (no exporter needed); "
        "with MANIFOLD_TRACING__EXPORTER set, the same steps are also exported as OpenTelemetry spans.",
    )
    trace.add_argument("document_id", metavar="DOC_ID")
    trace.add_argument("--tenant", required=True, help=TENANT_HELP)
    trace.add_argument("--version", type=int, help="default: the newest version handed out")
    trace.add_argument("--json", action="store_true", help="machine-readable output")
    trace.set_defaults(run=_trace)

    reconcile = sub.add_parser(
        "reconcile",
        help="compare the publication manifest with every store; --repair fixes the drift",
        description="Drift kinds: missing (active version incomplete or altered), stale (retired past "
        "the grace period or deleted, still stored), orphaned (unknown to the manifest), wrong_version "
        "(serving marks or state disagree). Exit 3 when drift is found without --repair, 1 when a "
        "repair failed.",
    )
    reconcile.add_argument("--repair", action="store_true", help="re-drive missing versions, delete stale/orphans")
    reconcile.add_argument("--tenant", help=TENANT_HELP + "; default all tenants")
    reconcile.add_argument("--json", action="store_true", help="machine-readable output")
    reconcile.set_defaults(run=_reconcile)

    switch = sub.add_parser(
        "switch-index",
        help="point the Elasticsearch serving alias at the index this version of manifold writes",
        description="Step 4 of rolling out an analysis or index-schema change (docs/query.md): refuses (exit 3) while "
        "`reconcile` finds active versions missing from the new index, unless --force. Idempotent.",
    )
    switch.add_argument("--force", action="store_true", help="switch even if versions are missing from the new index")
    switch.add_argument("--json", action="store_true", help="machine-readable output")
    switch.set_defaults(run=_switch_index)

    gc_cmd = sub.add_parser(
        "gc",
        help="erase what deleted documents left (staging, embedded bus) and purge retired versions past the grace",
        description="One pass of what the `reconcile` worker role does every MANIFOLD_INGEST__RECONCILE_INTERVAL_S: "
        "versions retired more than MANIFOLD_INGEST__GC_GRACE_S ago and deleted versions leave every store; "
        "stage payloads, claim-check blobs and (embedded profile) bus messages and dead letters of deleted "
        "documents are erased. Prints what it removed per tenant.",
    )
    gc_cmd.add_argument("--tenant", help=TENANT_HELP + "; default all tenants")
    gc_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    gc_cmd.set_defaults(run=_gc)

    purge = sub.add_parser(
        "purge-tenant",
        help="erase a whole tenant from every store, table, index, graph, bus table and DLQ (asks to confirm)",
        description="Deletes every row of the tenant in every PostgreSQL tenant table (found from the schema, "
        "so new tables are covered), its Elasticsearch documents in every manifold index, its Neo4j nodes and "
        "relationships, and its embedded-bus messages and dead letters. Kafka records expire with the topics' "
        "retention. Asks you to type the tenant name unless --yes. Needs the PostgreSQL superuser settings.",
    )
    purge.add_argument("tenant", metavar="TENANT")
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation (scripts)")
    purge.set_defaults(run=_purge_tenant)
    for command in (status, trace, reconcile, switch, gc_cmd, purge):
        add_profile(command)
