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
    from manifold.ingest.client import kafka_upstream_client

    return kafka_upstream_client(settings, "manifold-ingest-cli")


def _no_producer_key(command: str, settings) -> bool:  # type: ignore[no-untyped-def]
    """Print one line and return True when there is no producer key to sign events with."""
    from manifold.shared.envelope_auth import NoProducerKey, signer_from_settings

    try:
        signer_from_settings(settings)
    except NoProducerKey as err:
        print(f"manifold {command}: {err}", file=sys.stderr)
        return True
    return False


def _ingest(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from manifold.ingest.client import count_files
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    if _no_producer_key("ingest", settings):
        return 2
    if settings.profile == "embedded":
        from manifold.shared import cli_embedded

        return cli_embedded.ingest(args, settings)
    paths = [Path(p) for p in args.paths]
    client = _upstream_client(settings)
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

    settings = ManifoldSettings()
    if _no_producer_key("delete", settings):
        return 2
    if settings.profile == "embedded":
        from manifold.shared import cli_embedded

        return cli_embedded.delete(args, settings)
    version = _upstream_client(settings).delete(args.tenant, args.document_id)
    if version is None:
        print(f"{args.document_id!r} is not a published document of tenant {args.tenant!r}", file=sys.stderr)
        return 1
    print(f"delete of {args.document_id!r} published as version {version}")
    return 0


def _sync(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    from pathlib import Path

    from manifold.ingest import sync
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    folder = Path(args.path)
    if not folder.is_dir():
        print(f"manifold sync: {folder} is not a folder", file=sys.stderr)
        return 2
    if settings.profile == "embedded":
        from manifold.shared import cli_embedded

        sync_round, close = cli_embedded.sync_round(settings, args.tenant, folder)
    else:
        from manifold.shared.stores.ledger import PostgresVersionLedger

        client = _upstream_client(settings)
        ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())

        def sync_round() -> sync.SyncReport:
            return sync.sync_once(client, ledger, args.tenant, folder)

        def close() -> None:
            return None

    def show(report: sync.SyncReport) -> None:
        if report.changed or report.rejected or not args.watch:
            print(report.summary(), flush=True)
        for path, reason in report.rejected:
            print(f"rejected {path}: {reason}", file=sys.stderr)

    try:
        if not args.watch:
            report = sync_round()
            show(report)
            return 1 if report.rejected else 0
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        print(f"watching {folder} for tenant {args.tenant} (Ctrl-C stops)", file=sys.stderr, flush=True)
        sync.watch(sync_round, folder, stop, debounce_ms=args.debounce_ms, rescan_s=args.rescan_s,
                   on_report=show)
        return 0
    finally:
        close()


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
    if args.processes != 1 and serve_query:
        print("manifold workers: --processes runs ingest roles only; start query workers separately", file=sys.stderr)
        return 2
    if not serve_query:
        try:
            workers.run_processes(settings, ingest_roles, args.processes, stop)
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


MAX_PLAN_DEPTH = 32
"""Deeper than any valid plan (steps -> step -> params -> value); refused before it is sent."""


def _depth(value: object) -> int:
    """Nesting depth of JSON-like data, without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


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

    from manifold.query.client import QueryClient, QueryTimeout, mint_dev_token
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.errors import Transient

    plan = None
    if args.plan:
        try:
            plan = json.loads(Path(args.plan).read_text())
        except (OSError, ValueError) as err:
            print(f"manifold ask: cannot read plan {args.plan}: {err}", file=sys.stderr)
            return 2
        except RecursionError:
            print(f"manifold ask: cannot read plan {args.plan}: JSON nested too deeply", file=sys.stderr)
            return 2
        if not isinstance(plan, dict):
            print("manifold ask: a plan file holds one JSON object", file=sys.stderr)
            return 2
        if _depth(plan) > MAX_PLAN_DEPTH:
            print(f"manifold ask: plan {args.plan} is nested deeper than {MAX_PLAN_DEPTH} levels", file=sys.stderr)
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
        as_of = _as_of(args.as_of)
    except ValueError:
        print(f"manifold ask: --as-of {args.as_of!r} is not a date (YYYY-MM-DD)", file=sys.stderr)
        return 2
    try:
        if settings.profile == "embedded":  # answered in this process: no Kafka, no query worker
            from manifold.shared import cli_embedded

            reply = cli_embedded.answer(settings, args.tenant, args.question or None, plan,
                                        deadline_ms=args.deadline_ms, session_id=args.session,
                                        continuation=continuation, choice=args.choice, as_of=as_of)
        else:
            with QueryClient(settings, token=mint_dev_token(settings, args.tenant)) as client:
                reply = client.ask(args.question or None, plan, deadline_ms=args.deadline_ms,
                                   session_id=args.session, continuation=continuation, choice=args.choice,
                                   as_of=as_of)
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


def _as_of(text: str | None):  # type: ignore[no-untyped-def]
    """`--as-of YYYY-MM-DD`: the date relative phrases ("last quarter") are read against."""
    from datetime import UTC, date, datetime

    return None if not text else datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)


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


def _lifecycle_ports(settings):  # type: ignore[no-untyped-def]
    """Manifest and store ports of the settings' profile (embedded: started and migrated if needed)."""
    if settings.profile == "embedded":
        from manifold.shared import cli_embedded

        return cli_embedded.lifecycle_ports(settings)
    from manifold.ingest import lifecycle

    return lifecycle.build_ports(settings)


def _quickstart(args: argparse.Namespace) -> int:
    from manifold.shared import cli_embedded
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings(profile="embedded")
    if not settings.query.allow_dev_key:  # the quickstart is local by definition: opt in, and say so
        settings = settings.model_copy(update={"query": settings.query.model_copy(update={"allow_dev_key": True})})
    print("manifold quickstart: development keys enabled (query.allow_dev_key=true): events are signed and "
          "continuations sealed with the built-in development keys. Local use only; to run `manifold ingest/ask "
          "--profile embedded` by hand afterwards, export MANIFOLD_QUERY__ALLOW_DEV_KEY=true.", file=sys.stderr)
    return cli_embedded.quickstart(args, settings)


def _lifecycle_tenants(ports, tenant: str | None) -> list[str]:  # type: ignore[no-untyped-def]
    from manifold.ingest.reconciler import tenants

    return [tenant] if tenant else tenants(ports)


def _trace(args: argparse.Namespace) -> int:
    import json

    from manifold.shared.config import ManifoldSettings
    from manifold.shared.stores.ledger import PostgresVersionLedger

    settings = ManifoldSettings()
    if settings.profile == "embedded":
        from manifold.shared import cli_embedded

        cli_embedded.prepare(settings, quiet=True)
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

    from manifold.ingest import lifecycle
    from manifold.shared.config import ManifoldSettings

    ports = _lifecycle_ports(ManifoldSettings())
    result = lifecycle.status(ports, _lifecycle_tenants(ports, args.tenant))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(f"{'tenant':<20}{'document':<40}{'active':>7}  {'state':<9}{'pg':>6}{'es':>6}{'neo4j':>7}{'review':>8}")
    for d in result["documents"]:
        c = d["counts"]
        print(f"{d['tenant_id']:<20}{d['document_id'][:39]:<40}{d['active_version'] or '-'!s:>7}  {d['state']:<9}"
              f"{c['postgres']:>6}{c['elasticsearch']:>6}{c['neo4j']:>7}{d.get('review_items', 0):>8}")
    _print_in_flight(result.get("in_flight", []))
    return 0


def _print_in_flight(rows: list) -> None:  # type: ignore[type-arg]
    """Documents on their way through the pipeline, with the stage each has reached."""
    if rows:
        print(f"\nin flight: {len(rows)}")
        print(f"{'tenant':<20}{'document':<40}{'version':>7}  {'stage':<14}since")
    for f in rows:
        print(f"{f['tenant_id']:<20}{f['document_id'][:39]:<40}{f['version']:>7}  {f['stage']:<14}{f['since']}")


def _reconcile(args: argparse.Namespace) -> int:
    import json

    from manifold.ingest import reconciler
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = _lifecycle_ports(settings)
    report = reconciler.reconcile(ports, [args.tenant] if args.tenant else None, repair_drift=args.repair,
                                  grace_s=settings.ingest.gc_grace_s)
    out = report.to_json()
    if args.json:
        print(json.dumps({k: out[k] for k in ("drift", "repaired", "stores", "failed", "in_flight")}, indent=2))
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


def _gc_bus(settings):  # type: ignore[no-untyped-def]
    """The embedded profile's bus (its messages are erased too); None on Kafka (bounded by retention)."""
    if settings.profile != "embedded":
        return None
    from manifold.ingest.embedded import open_bus

    return open_bus(settings)


def _gc(args: argparse.Namespace) -> int:
    import json

    from manifold.ingest import erasure
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    ports = _lifecycle_ports(settings)
    bus = _gc_bus(settings)
    try:
        out = {t: erasure.collect(ports, t, settings.ingest.gc_grace_s, staging=ports.staging, bus=bus)
               for t in _lifecycle_tenants(ports, args.tenant)}
    finally:
        if bus is not None:
            bus.close()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for tenant, removed in out.items():
            print(f"{tenant:<28}" + "  ".join(f"{k} {n}" for k, n in removed.items()))
    return 0


def _purge_tenant(args: argparse.Namespace) -> int:
    import re

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
        from manifold.shared import cli_embedded

        cli_embedded.prepare(settings, quiet=True)
        ports = erasure.PurgePorts(postgres=lambda t: purge_tenant(admin, t))
    else:
        ports = _purge_ports(settings, lambda t: purge_tenant(admin, t))
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


def _purge_ports(settings, postgres):  # type: ignore[no-untyped-def]
    from manifold.ingest import erasure, vocabulary
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.neo4j import Neo4jGraphStore

    return erasure.PurgePorts(postgres=postgres, text=ElasticsearchTextIndex.from_settings(settings),
                              graph=Neo4jGraphStore.from_settings(settings, entity_types=vocabulary.ENTITY_TYPES,
                                                                  relation_types=vocabulary.RELATIONS))


def _embeddings(args: argparse.Namespace) -> int:
    import json

    from tqdm import tqdm

    from manifold.ingest import embedding_migration as em
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.embedding_configs import (ConfigEmbedders, EmbeddingConfigMismatch, UnknownEmbeddingConfig,
                                                   registry)
    from manifold.shared.stores.embedding_pg import ActivationRefused, PostgresEmbeddingStore
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest

    if args.action != "status" and not args.config:
        print(f"manifold embeddings {args.action}: name a CONFIG", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    store = PostgresEmbeddingStore.from_settings(settings)
    embedders = ConfigEmbedders(SentenceTransformerEmbedder(batch_size=settings.ingest.embed_batch_size))
    tenants = [args.tenant] if args.tenant else PostgresVersionManifest.from_settings(settings).tenants()
    out: dict[str, object] = {}
    code = 0
    try:
        if args.action == "status":
            out = {"configs": {n: {**c.definition(), "description": c.description} for n, c in registry().items()},
                   "tenants": {t: store.states(t) for t in tenants}}
            if not args.json:
                for t, states in out["tenants"].items():  # type: ignore[attr-defined]
                    for name, body in sorted(states.items()):
                        print(f"{t:<28}{name:<20}{body['state']:<12}vectors {body.get('stored_vectors', '-')}")
        elif args.action == "backfill":
            embedded = {}
            for t in tenants:
                with tqdm(unit="chunk", desc=f"{args.config} {t}", file=sys.stderr, disable=args.json) as bar:
                    embedded[t] = em.backfill(store, embedders, args.config, t, batch_size=args.batch_size,
                                              progress=bar.update, on_total=lambda n, b=bar: b.reset(total=n))
            out = {"config": args.config, "embedded": embedded}
            if not args.json:
                print(f"{args.config}: embedded {sum(embedded.values())} chunk(s) over {len(embedded)} tenant(s)")
        elif args.action == "verify":
            ok, reports = em.verify(store, embedders, args.config, tenants)
            out = {"config": args.config, "verified": ok, "tenants": {r.tenant_id: r.to_json() for r in reports}}
            code = 0 if ok else 3
            if not args.json:
                for r in reports:
                    print(f"{r.tenant_id:<28}{'ok' if r.ok else 'FAIL':<6}chunks {r.chunks} vectors {r.vectors} "
                          f"missing {r.missing} stale {r.stale} bad_dim {r.bad_dim} bad_norm {r.bad_norm} "
                          f"orphaned {r.orphaned} checksum {r.checksum}")
                print(f"{args.config}: {'verified' if ok else 'NOT verified'}")
        elif args.action == "activate":
            reports = em.activate(store, embedders, args.config, tenants)
            out = {"config": args.config, "activated": sorted(reports),
                   "tenants": {t: r.to_json() for t, r in reports.items()}}
            if not args.json:
                print(f"{args.config}: active for {len(reports)} tenant(s)")
        else:
            deleted = em.retire(store, args.config, tenants)
            out = {"config": args.config, "deleted": deleted}
            if not args.json:
                print(f"{args.config}: retired, {sum(deleted.values())} vector(s) deleted")
    except (ActivationRefused, UnknownEmbeddingConfig, EmbeddingConfigMismatch) as err:
        print(f"manifold embeddings {args.action}: {err}", file=sys.stderr)
        out, code = {"error": str(err)}, 1
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    return code


def _eval(args: argparse.Namespace) -> int:
    """Runs the evaluation scripts of a source checkout's `bench/` (they are not part of the wheel)."""
    import subprocess
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench"
    if not (bench / "report.py").exists():
        print(f"manifold eval: no bench/ scripts next to this package ({bench}); run it from a source checkout",
              file=sys.stderr)
        return 2
    steps = {"golden": ["eval_golden.py", *(["--reuse", args.reuse] if args.reuse else [])],
             "scifact": ["eval_scifact.py", "all"], "unseen": ["eval_unseen.py", "--held-out"],
             "report": ["report.py"]}
    # SciFact first: its ingestion drains any SciFact backlog on the topics, which the golden set's
    # fresh ingestion would otherwise queue behind.
    chosen = ["scifact", "golden", "unseen", "report"] if args.what == "all" else [args.what]
    for name in chosen:
        code = subprocess.call([sys.executable, str(bench / steps[name][0]), *steps[name][1:]])
        if code != 0:
            print(f"manifold eval: {name} failed with exit code {code}", file=sys.stderr)
            return code
    return 0


def _serve(args: argparse.Namespace) -> int:
    from manifold.deploy.serve import run
    from manifold.query.auth import InsecureKey
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    try:
        run.serve(settings, args.host or settings.server.host, args.port or settings.server.port)
    except (InsecureKey, ValueError) as err:
        print(f"manifold serve: {err}", file=sys.stderr)
        return 2
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from manifold.deploy.serve import run
    from manifold.query.auth import InsecureKey
    from manifold.shared.config import ManifoldSettings

    try:
        run.stdio(ManifoldSettings())
    except (InsecureKey, ValueError) as err:
        print(f"manifold mcp: {err}", file=sys.stderr)
        return 2
    return 0


def _duration_s(text: str) -> int:
    """`90`, `90s`, `15m`, `1h`, `2d` -> seconds."""
    import re

    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like 900, 15m, 1h or 1d")
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _token(args: argparse.Namespace) -> int:
    from manifold.query.auth import InsecureKey, TokenVerifier, mint_token, signing_key
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    try:
        TokenVerifier.from_settings(settings)  # the same key checks as every verifier
        ttl = _duration_s(args.ttl)
        q = settings.query
        algorithm, key = signing_key(settings)  # private key file, HS256 key, or the dev key when allowed
        token = mint_token(key, tenant_id=args.tenant, subject=args.subject, scopes=args.scope.split(),
                           issuer=q.token_issuer, audience=q.token_audience, ttl_s=ttl, algorithm=algorithm)
    except (InsecureKey, ValueError) as err:
        print(f"manifold token: {err}", file=sys.stderr)
        return 2
    print(token)
    return 0


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
        "publishes it to manifold.documents, signed with the producer key (MANIFOLD_INGEST__PRODUCER_ID/"
        "PRODUCER_KEY). A document id is the path relative to the folder given. Symbolic links are never "
        "followed: they are listed as rejected.",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--tenant", required=True, help=tenant_help)
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.set_defaults(run=_ingest)

    delete = sub.add_parser("delete", help="publish the deletion of a document")
    delete.add_argument("document_id", metavar="DOC_ID")
    delete.add_argument("--tenant", required=True, help=tenant_help)
    delete.set_defaults(run=_delete)

    sync_cmd = sub.add_parser(
        "sync",
        help="make the tenant's documents follow a folder: publish new/changed files, delete gone ones",
        description="Publishes upserts for new or changed files and deletes for documents whose file is "
        "gone (a rename is a delete plus an upsert); unchanged files publish nothing. The tenant mirrors "
        "the folder: sync one folder per tenant. --watch keeps doing so on file events.",
    )
    sync_cmd.add_argument("path", metavar="PATH")
    sync_cmd.add_argument("--tenant", required=True, help=tenant_help)
    sync_cmd.add_argument("--watch", action="store_true", help="keep syncing on file events until stopped")
    sync_cmd.add_argument("--debounce-ms", type=int, default=500, help="wait for quiet before a round (watch)")
    sync_cmd.add_argument("--rescan-s", type=float, default=300.0, help="a full round at least this often (watch)")
    sync_cmd.set_defaults(run=_sync)

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
    workers.add_argument("--processes", type=int, default=1, metavar="N",
                         help="run the roles in N processes, each a member of every role's consumer group "
                         "(metrics on MANIFOLD_INGEST__METRICS_PORT + i); default 1")
    workers.set_defaults(run=_workers)

    ask = sub.add_parser(
        "ask",
        help="ask the query workers a question (or send a plan) and print the reply",
        description="Mints a token for --tenant with MANIFOLD_QUERY__TOKEN_SIGNING_KEY_FILE or "
        "MANIFOLD_QUERY__TOKEN_KEY (the development key only with MANIFOLD_QUERY__ALLOW_DEV_KEY=true), sends the request on the query request topic and waits for the reply. A clarify reply "
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
    ask.add_argument("--as-of", metavar="YYYY-MM-DD", help="read relative dates against this day (default today)")
    ask.set_defaults(run=_ask)

    status = sub.add_parser("status", help="per document: active version, state, artifact counts per store")
    status.add_argument("--tenant", help=tenant_help + "; default all tenants")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(run=_status)

    trace = sub.add_parser(
        "trace",
        help="where a document's version went and how long each step took (upstream publish .. activated)",
        description="Reads the ledger, the staged stage outputs and the publication manifest (no exporter needed); "
        "with MANIFOLD_TRACING__EXPORTER set, the same steps are also exported as OpenTelemetry spans.",
    )
    trace.add_argument("document_id", metavar="DOC_ID")
    trace.add_argument("--tenant", required=True, help=tenant_help)
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
    reconcile.add_argument("--tenant", help=tenant_help + "; default all tenants")
    reconcile.add_argument("--json", action="store_true", help="machine-readable output")
    reconcile.set_defaults(run=_reconcile)

    gc_cmd = sub.add_parser(
        "gc",
        help="erase what deleted documents left (staging, embedded bus) and purge retired versions past the grace",
        description="One pass of what the `reconcile` worker role does every MANIFOLD_INGEST__RECONCILE_INTERVAL_S: "
        "versions retired more than MANIFOLD_INGEST__GC_GRACE_S ago and deleted versions leave every store; "
        "stage payloads, claim-check blobs and (embedded profile) bus messages and dead letters of deleted "
        "documents are erased. Prints what it removed per tenant.",
    )
    gc_cmd.add_argument("--tenant", help=tenant_help + "; default all tenants")
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

    embeddings = sub.add_parser(
        "embeddings",
        help="embedding migration: status, backfill, verify, activate, retire a configuration",
        description="A configuration (model, revision, dimension, normalisation, template) other than "
        "'primary' is backfilled into a parallel table, verified (every chunk has one current vector; "
        "counts and checksum) and activated per tenant in one transaction; queries use the active one. "
        "Exit 3 when verify fails, 1 when a step is refused.",
    )
    embeddings.add_argument("action", choices=["status", "backfill", "verify", "activate", "retire"])
    embeddings.add_argument("config", nargs="?", metavar="CONFIG", help="configuration name (not for status)")
    embeddings.add_argument("--tenant", help=tenant_help + "; default all tenants")
    embeddings.add_argument("--batch-size", type=int, default=64, metavar="N", help="backfill batch (default 64)")
    embeddings.add_argument("--json", action="store_true", help="machine-readable output")
    embeddings.set_defaults(run=_embeddings)
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) and MCP at /mcp",
        description="distributed profile: a thin gateway over the query request/reply topics (run query workers "
        "beside it); embedded profile: answers in this process on one PostgreSQL. Callers send "
        "'Authorization: Bearer <token>' (manifold token). Settings MANIFOLD_SERVER__* (see README).",
    )
    serve.add_argument("--host", help="default MANIFOLD_SERVER__HOST (127.0.0.1)")
    serve.add_argument("--port", type=int, help="default MANIFOLD_SERVER__PORT (8080)")
    serve.set_defaults(run=_serve)

    mcp = sub.add_parser(
        "mcp",
        help="serve MCP over stdio (for desktop agents) as the principal of MANIFOLD_SERVER__MCP_TOKEN",
        description="Tools: ask, search_passages, lookup, metric, graph_neighbours, document_status.",
    )
    mcp.set_defaults(run=_mcp)

    token = sub.add_parser(
        "token",
        help="mint a principal token from MANIFOLD_QUERY__TOKEN_KEY (for curl, the client, MCP configs)",
        description="Prints a signed token for --tenant. Refused when the key is the development key and "
        "MANIFOLD_QUERY__ALLOW_DEV_KEY is false, or shorter than 32 bytes.",
    )
    token.add_argument("--tenant", required=True, help=tenant_help)
    token.add_argument("--ttl", default="1h", help="lifetime: 900, 15m, 1h, 1d (default 1h)")
    token.add_argument("--subject", default="manifold-token", help="who the token speaks for (default manifold-token)")
    token.add_argument("--scope", default="query:read documents:write",
                       help="space-separated scopes (default 'query:read documents:write')")
    token.set_defaults(run=_token)
    for command in (ingest, delete, sync_cmd, ask, status, trace, reconcile, gc_cmd, purge, serve, mcp):
        command.add_argument("--profile", choices=["embedded", "distributed"],
                             help="overrides MANIFOLD_PROFILE; embedded runs everything in this process")

    quickstart = sub.add_parser(
        "quickstart",
        help="embedded profile: ingest the sample world and answer one question of every class, checked",
        description="Starts PostgreSQL in MANIFOLD_EMBEDDED__DIR (default .manifold/) unless one answers on "
        "MANIFOLD_POSTGRES__PORT, ingests the two-tenant sample world in-process, asks one question per class "
        "and checks each answer. Exit 1 if any answer is wrong. Idempotent; --reset starts clean.",
    )
    quickstart.add_argument("--reset", action="store_true", help="stop and delete the embedded data directory first")
    quickstart.add_argument("--quiet", action="store_true", help="no progress bars")
    quickstart.set_defaults(run=_quickstart)

    evaluate = sub.add_parser(
        "eval",
        help="run the evaluations under bench/ (golden set, BEIR SciFact, unseen worlds) and regenerate BENCHMARKS.md",
        description="golden: the labelled golden set through the real query service (bench/eval_golden.py); "
        "scifact: ingest BEIR SciFact through the pipeline and score it (bench/eval_scifact.py); unseen: "
        "generated procurement worlds of the held-out seeds, embedded profile (bench/eval_unseen.py); report: "
        "BENCHMARKS.md from bench/results/*.json. Needs the stack up and migrated.",
    )
    evaluate.add_argument("what", nargs="?", default="all", choices=["all", "golden", "scifact", "unseen", "report"])
    evaluate.add_argument("--reuse", metavar="NORTHSTAR,SOUTHWIND",
                          help="golden: tenants that already hold the sample world (default: ingest fresh ones)")
    evaluate.set_defaults(run=_eval)
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


if __name__ == "__main__":
    raise SystemExit(main())
