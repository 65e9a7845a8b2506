"""The `manifold` commands under `profile=embedded`: everything in this process, nothing else started.

`shared/cli.py` calls into here when `MANIFOLD_PROFILE=embedded` (or `--profile embedded`):
- `ingest` publishes the files onto the embedded bus with the same `UpstreamClient`, then drives
  every stage and the publisher in-process (`ingest.embedded.EmbeddedPipeline`) until nothing is
  left, with a progress bar per stage, so the documents are published when it returns.
- `delete` publishes the delete, drives it through the publisher the same way, then runs one gc
  pass for the tenant (`erasure.collect`), so the document's content is erased when it returns.
- `status`, `reconcile` and `ask` get their ports / answerer from the embedded composition.
The embedded PostgreSQL is started in `embedded.dir` on first use when none is reachable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def prepare(settings: ManifoldSettings, quiet: bool = False) -> None:
    """Reach (or start) the embedded PostgreSQL and migrate it. A server this process started is
    stopped again when the process exits: an embedded command leaves nothing running."""
    import atexit

    from manifold.ingest.embedded import ensure_database, stop_database

    if ensure_database(settings, say=(lambda _: None) if quiet else _err):
        atexit.register(stop_database, settings)


def pending(settings: ManifoldSettings, bus: Any) -> int:
    """Messages some stage (or the publisher) has not committed yet."""
    from manifold.ingest.embedded import SOURCES
    from manifold.shared.bus import lag

    return sum(lag(bus, f"manifold.{role}", topic) for role, topic in SOURCES.items())


def drive(settings: ManifoldSettings, bus: Any, *, quiet: bool = False, expected: int = 0) -> Any:
    """Run the pipeline in-process until nothing is pending; one progress bar per stage."""
    from tqdm import tqdm

    from manifold.ingest import ROLES
    from manifold.ingest.embedded import DrainReport, EmbeddedPipeline, build_ports

    total = max(expected, pending(settings, bus))
    if total == 0:
        return DrainReport(processed=dict.fromkeys(ROLES, 0))
    ports = build_ports(settings)
    ports.embedder.warm_up()  # type: ignore[attr-defined]  # not on the Embedder port
    pipeline = EmbeddedPipeline(settings, bus, ports)
    bars = {role: tqdm(total=expected or None, desc=f"{role:<8}", unit="doc", file=sys.stderr, disable=quiet,
                       position=i, leave=True) for i, role in enumerate(ROLES)}

    def progress(role: str, n: int) -> None:
        bar = bars[role]
        bar.update(n)
        if bar.total is not None and bar.n > bar.total:
            bar.total = bar.n
            bar.refresh()

    try:
        return pipeline.drain(progress)
    finally:
        for bar in bars.values():
            bar.close()
        pipeline.close()


def ingest(args: Any, settings: ManifoldSettings) -> int:
    from tqdm import tqdm

    from manifold.ingest.client import count_files
    from manifold.ingest.embedded import open_bus, upstream_client

    prepare(settings, args.quiet)
    paths = [Path(p) for p in args.paths]
    bus = open_bus(settings)
    try:
        client = upstream_client(settings, bus)
        with tqdm(total=count_files(paths), unit="file", desc="publishing", file=sys.stderr,
                  disable=args.quiet) as bar:
            report = client.publish_paths(args.tenant, paths, progress=lambda _: bar.update(1))
        try:
            drained = drive(settings, bus, quiet=args.quiet, expected=len(report.published))
        except Transient as err:  # nothing uncommitted is lost: the next `ingest` resumes from the offsets
            _err(f"manifold ingest: the pipeline stopped: {err}; run it again to resume")
            return 1
    finally:
        bus.close()
    print(f"published {len(report.published)}, unchanged {len(report.unchanged)}, "
          f"rejected {len(report.rejected)}; dead-lettered {len(drained.dead_letters)}")
    for path, reason in report.rejected:
        _err(f"rejected {path}: {reason}")
    for letter in drained.dead_letters:
        _err(f"dead letter: {letter.tenant_id}/{letter.document_id}@{letter.version} {letter.stage} "
             f"{letter.error_kind}: {letter.error.splitlines()[0] if letter.error else ''}")
    return 1 if report.rejected or drained.dead_letters else 0


def delete(args: Any, settings: ManifoldSettings) -> int:
    from manifold.ingest.embedded import open_bus, upstream_client

    prepare(settings, quiet=True)
    bus = open_bus(settings)
    try:
        version = upstream_client(settings, bus).delete(args.tenant, args.document_id)
        drained = drive(settings, bus, quiet=True)
        if version is not None:  # erase at once what the delete left in staging and on the bus
            from manifold.ingest import erasure

            ports = lifecycle_ports(settings)
            erasure.collect(ports, args.tenant, settings.ingest.gc_grace_s, staging=ports.staging, bus=bus)
    finally:
        bus.close()
    if version is None:
        _err(f"{args.document_id!r} is not a published document of tenant {args.tenant!r}")
        return 1
    print(f"delete of {args.document_id!r} applied as version {version}")
    return 1 if drained.dead_letters else 0


def sync_round(settings: ManifoldSettings, tenant: str, folder: Path) -> tuple[Any, Any]:
    """(round, close) for `manifold sync` on the embedded bus: each round publishes and deletes
    (`ingest.sync.sync_once`), then drives the pipeline until the changes are published."""
    from manifold.ingest import sync
    from manifold.ingest.embedded import open_bus, upstream_client
    from manifold.shared.stores.ledger import PostgresVersionLedger

    prepare(settings, quiet=True)
    bus = open_bus(settings)
    client = upstream_client(settings, bus)
    ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())

    def run() -> Any:
        report = sync.sync_once(client, ledger, tenant, folder)
        if report.changed or pending(settings, bus):
            drained = drive(settings, bus, quiet=True, expected=len(report.published) + len(report.deleted))
            for letter in drained.dead_letters:
                report.rejected.append((letter.document_id, f"dead-lettered at {letter.stage}: {letter.error_kind}"))
        return report

    return run, bus.close


def lifecycle_ports(settings: ManifoldSettings) -> Any:
    from manifold.ingest.embedded import lifecycle_ports as build

    prepare(settings, quiet=True)
    return build(settings)


def warm_up(answerer: Any) -> None:
    """Train the router's intent classifier and load the embedding model now, so the first
    question's deadline is not spent on them (a query worker pays this once per process, a CLI
    command once per command)."""
    classifier = getattr(answerer, "_classifier", None)
    if classifier is not None:
        classifier.predict("warm up")  # trains it (cached in embedded.dir) and loads the embedding model


def local_continuation_key(settings: ManifoldSettings) -> ManifoldSettings:
    """`settings` with a continuation key for this data directory when none is configured.

    The embedded CLI answers in its own process, so the secret that seals its clarification
    continuations never leaves the machine: a random 32-byte key kept in
    `embedded.dir/continuation.key` (created once, mode 0600) instead of the public development
    key. A configured `continuation_key` or `token_key`, or the development-key opt-in, wins."""
    import secrets

    from pydantic import SecretStr

    q = settings.query
    if q.continuation_key is not None or q.token_key is not None or q.allow_dev_key:
        return settings
    path = settings.embedded.dir / "continuation.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    key = SecretStr(path.read_text().strip())
    return settings.model_copy(update={"query": q.model_copy(update={"continuation_key": key})})


def answer(settings: ManifoldSettings, tenant: str, question: str | None, plan: dict[str, Any] | None, *,
           deadline_ms: int | None = None, session_id: str | None = None, continuation: str | None = None,
           choice: str | None = None, as_of: Any = None, answerer: Any = None) -> Any:
    """Answer one question in-process as `tenant` (the CLI's caller is the principal)."""
    import uuid
    from datetime import UTC, datetime, timedelta

    from manifold.query.composition import build_answerer
    from manifold.query.types import Principal, QueryRequest

    own = answerer is None
    if own:
        prepare(settings, quiet=True)
        settings = local_continuation_key(settings)
        answerer = build_answerer(settings)
        warm_up(answerer)
    q = settings.query  # the deadline starts now, after start-up, as it does for a warm query worker
    ms = min(deadline_ms or q.default_deadline_ms, q.max_deadline_ms)
    request = QueryRequest(request_id=f"q-{uuid.uuid4().hex}", reply_topic=q.reply_topic,
                           deadline=datetime.now(UTC) + timedelta(milliseconds=ms), question=question, plan=plan,
                           session_id=session_id, continuation=continuation, choice=choice, as_of=as_of)
    try:
        return answerer.answer(request, Principal(tenant_id=tenant, subject="manifold-cli"))
    finally:
        if own:
            answerer.close()


def quickstart(args: Any, settings: ManifoldSettings) -> int:
    from manifold.shared.quickstart import run

    return run(settings, reset=args.reset, quiet=args.quiet, out=print)

