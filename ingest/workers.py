"""Composition root of `manifold workers`: builds the adapters once and runs the chosen roles.

Each role is one `StageRunner` in its own thread and consumer group (`manifold.<role>`), so
several processes started with the same roles share the partitions. Guarantees: nothing
connects before `build_ports` is called; the schema version is checked before any message is
consumed (run `manifold migrate` first); `/metrics` is served on `ingest.metrics_port`.

`run_processes(settings, roles, n, stop)` runs the roles in `n` processes at once (the
`--processes` option; each reads its settings from the same environment): each is a member of every
role's consumer group, so Kafka spreads the topic partitions over them (at most one member per
partition does work: size `n` to at most `kafka.partitions`); process `i` serves `/metrics` on
`metrics_port + i`; the `reconcile` role runs in process 0 only. A member that stops on an error
stops the others (exit != 0); SIGTERM
or SIGINT stops every member after its current batch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, Producer
from pydantic import BaseModel, ValidationError
from tenacity import Retrying

from manifold.ingest import EXTRA_ROLES as EXTRA_ROLES  # re-exported: the roles `manifold workers` offers
from manifold.ingest import ROLES as ROLES
from manifold.ingest import pipeline
from manifold.ingest.embedding_migration import ParallelVectorStore
from manifold.ingest.notices import StageNotice
from manifold.ingest.runner import BatchPolicy, Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared import topics
from manifold.shared.artifacts import LoadNotice
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput
from manifold.shared.events import DocumentDeleted, DocumentUpserted, parse_event
from manifold.shared.kafka import (
    consumer_config,
    consumer_lag,
    ensure_topics,
    pipeline_topic_configs,
    producer_config,
)
from manifold.shared.ports import GraphStore, TextIndex
from manifold.shared.rejoin import kafka_watchdog

log = logging.getLogger(__name__)

# Models come from installed packages only (unstructured's own opt-outs are set by parse_formats).
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class SchemaNotReady(RuntimeError):
    """The database schema is older than this code; run `manifold migrate`."""


def _with_retries(setup: Callable[[], None]) -> None:
    """Run an idempotent store setup step, retrying transient faults (e.g. schema deadlocks)."""
    from tenacity import retry_if_exception_type, stop_after_attempt, wait_exponential

    from manifold.shared.errors import Transient

    for attempt in Retrying(stop=stop_after_attempt(5), wait=wait_exponential(multiplier=0.5, max=5),
                            retry=retry_if_exception_type(Transient), reraise=True):
        with attempt:
            setup()


LOGIN_REFUSED = ('password authentication failed for user "manifold_ingest"', 'role "manifold_ingest" does not exist')
"""PostgreSQL's words when a role cannot log in because it was never created."""


def check_schema(settings: ManifoldSettings) -> None:
    """Raise `SchemaNotReady` unless the database is at exactly this code's schema version.

    The ingest role (`manifold_ingest`) is created by `manifold migrate`: before the first
    migration PostgreSQL refuses its login ("password authentication failed for user
    manifold_ingest"), which is reported as the unmigrated schema it is, with what to run.
    """
    import psycopg

    from manifold.shared.stores import pg_schema

    try:
        have = pg_schema.current_version(settings.postgres.ingest_conninfo())
    except psycopg.OperationalError as err:
        if not any(words in str(err) for words in LOGIN_REFUSED):
            raise
        pg = settings.postgres
        raise SchemaNotReady(
            f"PostgreSQL at {pg.host}:{pg.port} refused the login of role manifold_ingest: the schema is not "
            "migrated (the migration creates that role) or MANIFOLD_POSTGRES__INGEST_PASSWORD differs from the "
            "password it was migrated with; run `manifold migrate`"
        ) from None
    if str(have) != pg_schema.PG_SCHEMA_VERSION:
        raise SchemaNotReady(
            f"database schema is at version {have}, this code needs {pg_schema.PG_SCHEMA_VERSION}; "
            "run `manifold migrate`"
        )


def build_ports(settings: ManifoldSettings) -> pipeline.Ports:
    """The distributed profile's ports: Elasticsearch text index, Neo4j graph, pgvector vectors
    (index and schema ensured, with retries); the rest from `postgres_ports`."""
    from manifold.shared import vocabulary
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.embedding_pg import PostgresEmbeddingStore
    from manifold.shared.stores.neo4j import Neo4jGraphStore

    check_schema(settings)
    text = ElasticsearchTextIndex.from_settings(settings)
    _with_retries(text.ensure_index)
    graph = Neo4jGraphStore.from_settings(
        settings, entity_types=vocabulary.ENTITY_TYPES, relation_types=vocabulary.RELATIONS
    )
    _with_retries(graph.ensure_schema)  # concurrent first starts can deadlock in Neo4j
    return postgres_ports(settings, text, graph, vectors=PostgresEmbeddingStore.from_settings(settings))


def postgres_ports(settings: ManifoldSettings, text: TextIndex, graph: GraphStore, *,
                   vectors: ParallelVectorStore | None = None) -> pipeline.Ports:
    """The pipeline's ports around a profile's text index and graph: staging, relational store,
    embedding cache and the bundled embedder, all on PostgreSQL. Connects nothing until first use;
    the caller checks the schema (`check_schema`)."""
    for key, value in _OFFLINE.items():
        os.environ.setdefault(key, value)
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache
    from manifold.shared.stores.pg_relational import PostgresRelationalStore
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    embedder = SentenceTransformerEmbedder(batch_size=settings.ingest.embed_batch_size)
    return pipeline.Ports(
        settings=settings.ingest,
        versions=pipeline.current_versions(settings.ingest, embedder.info),
        staging=PostgresStagingStore.from_settings(settings),
        relational=PostgresRelationalStore.from_settings(settings),
        text=text,
        graph=graph,
        embedder=embedder,
        vectors=vectors,
        cache=PostgresEmbeddingCache.from_settings(settings),
    )


def _decoder(model: type[BaseModel]) -> Callable[[bytes], Any]:
    def decode(raw: bytes) -> Any:
        try:
            return model.model_validate_json(raw)
        except ValidationError as err:
            raise BadInput(f"invalid {model.__name__}: {err.errors()[0]['msg']}") from None

    return decode


def _notice_out(topic: str) -> Callable[[StageNotice], Output]:
    def route(notice: StageNotice) -> Output:
        return Output(topic, f"{notice.tenant_id}/{notice.document_id}".encode(), notice.model_dump_json().encode())

    return route


def _parse_one(event: DocumentUpserted | DocumentDeleted, ports: pipeline.Ports,
               io: pipeline.StagedIO | None = None) -> StageNotice | DocumentDeleted | None:
    if isinstance(event, DocumentDeleted):
        return event  # the publisher applies deletes across every store
    return pipeline.run_parse(event, ports, io)


def _parse_step(ports: pipeline.Ports) -> Callable[[DocumentUpserted | DocumentDeleted], Any]:
    return lambda event: _parse_one(event, ports)


def _parse_batch(ports: pipeline.Ports) -> Callable[[list[DocumentUpserted | DocumentDeleted]], list[Any]]:
    """`_parse_step` for a micro-batch, its staging I/O and stale checks batched per tenant."""
    return lambda events: pipeline.each_by_tenant([e.tenant_id for e in events], ports,
                                                  lambda i, io: _parse_one(events[i], ports, io),
                                                  documents=[e.document_id for e in events])


def _sink(role: str) -> str:
    sink = topics.STAGES[role].sink
    assert sink is not None, f"{role} has no downstream topic"
    return sink


def _parse_route(out: StageNotice | DocumentDeleted) -> Output:
    if isinstance(out, DocumentDeleted):
        return Output(topics.PUBLISH, out.key, out.model_dump_json().encode())
    return _notice_out(_sink("parse"))(out)


def _load_route(notice: LoadNotice) -> Output:
    key = f"{notice.doc.tenant_id}/{notice.doc.document_id}".encode()
    return Output(_sink("load"), key, notice.model_dump_json().encode())


def _publish_decode(raw: bytes) -> LoadNotice | DocumentDeleted:
    """`manifold.publish` carries LoadNotices (they have `doc`) and forwarded DocumentDeleted."""
    import json

    try:
        data = json.loads(raw)
    except ValueError:
        raise BadInput("publish message is not JSON") from None
    if isinstance(data, dict) and "doc" in data:
        return _decoder(LoadNotice)(raw)  # type: ignore[no-any-return]  # _decoder returns Any
    event = parse_event(raw)
    if not isinstance(event, DocumentDeleted):
        raise BadInput("only LoadNotice and DocumentDeleted belong on manifold.publish")
    return event


def _never_routed(_: object) -> Output:
    raise AssertionError("the publisher has no downstream topic")


def publish_ports(ports: pipeline.Ports, settings: ManifoldSettings) -> Any:
    from manifold.ingest.reconciler import ReconcilePorts
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest

    return ReconcilePorts(manifest=PostgresVersionManifest.from_settings(settings), relational=ports.relational,
                          text=ports.text, graph=ports.graph, staging=ports.staging, cache=ports.cache)


def stage_specs(ports: pipeline.Ports, settings: ManifoldSettings | None = None) -> dict[str, StageSpec[Any, Any]]:
    """The stages. The first (parse) accepts only envelopes signed by a producer allowed their
    tenant (`envelope_auth.ProducerRegistry` from `settings`; none given: every event refused);
    the rest dead-letter as `unauthorized`."""
    from manifold.shared.envelope_auth import ProducerRegistry

    notice = _decoder(StageNotice)
    registry = ProducerRegistry.from_settings(settings)  # once: it logs the development-key warning
    first = registry.verifying(parse_event)
    src = topics.STAGE_SOURCES  # where each role reads and writes: shared/topics.py TOPOLOGY
    specs: dict[str, StageSpec[Any, Any]] = {
        "parse": StageSpec("parse", src["parse"], first, _parse_step(ports), _parse_route,
                           step_batch=_parse_batch(ports)),
        "chunk": StageSpec("chunk", src["chunk"], notice, lambda n: pipeline.run_chunk(n, ports),
                           _notice_out(_sink("chunk")), step_batch=lambda ns: pipeline.run_chunk_batch(ns, ports)),
        "embed": StageSpec("embed", src["embed"], notice, lambda n: pipeline.run_embed(n, ports),
                           _notice_out(_sink("embed")),
                           step_batch=lambda ns: pipeline.run_embed_batch(ns, ports)),
        "extract": StageSpec("extract", src["extract"], notice, lambda n: pipeline.run_extract(n, ports),
                             _notice_out(_sink("extract")),
                             step_batch=lambda ns: pipeline.run_extract_batch(ns, ports)),
        "load": StageSpec("load", src["load"], notice, lambda n: pipeline.run_load(n, ports),
                          _load_route, step_batch=lambda ns: pipeline.run_load_batch(ns, ports)),
    }
    if settings is not None:
        from manifold.ingest import publisher

        lifecycle = publish_ports(ports, settings)
        specs["publish"] = StageSpec("publish", src["publish"], _publish_decode,
                                     lambda m: publisher.handle(m, lifecycle), _never_routed,
                                     none_means="done",
                                     step_batch=lambda ms: publisher.handle_batch(ms, lifecycle))
        from manifold.ingest.acl_applier import access_specs
        from manifold.shared.stores.acl_pg import PostgresAclStore

        specs.update(access_specs(PostgresAclStore.from_settings(settings), registry))
    return specs


EMBEDDED_BATCH_MAX_MESSAGES = 256
"""The embedded profile's micro-batch when `ingest.batch_max_messages` is unset. Its bus has no
poll deadline, and the embed stage's one encode call per batch pads less and pays its per-call
cost less often with more chunks: on 1,000 SciFact abstracts the embed stage was 1.22-1.25 x the
bare model's time at 64 and 0.96-1.01 x at 256 (docs/ingestion.md "Throughput")."""
DISTRIBUTED_BATCH_MAX_MESSAGES = 64
"""The distributed profile's: a Kafka consumer must poll again within `max.poll.interval.ms`
(15 min, `shared.kafka.consumer_config`), and a batch of long documents takes longer to embed
the more documents it holds."""


def batch_policy(settings: ManifoldSettings) -> BatchPolicy:
    """The stage runners' micro-batch: `ingest.batch_max_messages`, or the profile's default."""
    ing = settings.ingest
    count = ing.batch_max_messages or (
        EMBEDDED_BATCH_MAX_MESSAGES if settings.profile == "embedded" else DISTRIBUTED_BATCH_MAX_MESSAGES)
    return BatchPolicy(count, ing.batch_max_bytes, ing.batch_linger_s)


def run(settings: ManifoldSettings, roles: Sequence[str], stop: threading.Event) -> None:
    """Run `roles` until `stop` is set; a role that crashes stops the whole process (exit != 0)."""
    unknown = set(roles) - set(ROLES) - set(EXTRA_ROLES)
    if unknown:
        raise ValueError(f"unknown role(s) {sorted(unknown)}; choose from {', '.join(ROLES + EXTRA_ROLES)}")
    bootstrap = settings.kafka.bootstrap_servers
    ensure_topics(bootstrap, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS, pipeline_topic_configs(settings.kafka))
    ports = build_ports(settings)
    if "embed" in roles:
        ports.embedder.warm_up()  # type: ignore[attr-defined]  # not on the Embedder port
    if settings.ingest.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.ingest.metrics_port, addr="127.0.0.1")
    specs = stage_specs(ports, settings)
    retry = RetryPolicy(settings.ingest.max_attempts, settings.ingest.retry_initial_s, settings.ingest.retry_max_s)
    batch = batch_policy(settings)
    failures: list[BaseException] = []

    def work(role: str) -> None:
        if role == "reconcile":
            from manifold.ingest.reconciler import run_periodic

            try:
                run_periodic(publish_ports(ports, settings), stop,
                             interval_s=settings.ingest.reconcile_interval_s, grace_s=settings.ingest.gc_grace_s)
            except BaseException as err:
                log.exception("reconcile worker stopped: %s", err)
                failures.append(err)
                stop.set()
            return
        group = topics.STAGES[role].group

        def new_consumer() -> Consumer:
            return Consumer(consumer_config(bootstrap, group, f"manifold-{role}-{os.getpid()}"))

        watchdog = kafka_watchdog(role, bootstrap, group, [specs[role].source],
                                  new_consumer)  # type: ignore[arg-type]  # confluent_kafka's stubs vs the bus port, as below
        runner = StageRunner(
            specs[role],
            new_consumer(),  # type: ignore[arg-type]  # confluent_kafka's stubs: invariant list headers, overloaded commit vs the bus port
            Producer(producer_config(bootstrap, f"manifold-{role}-{os.getpid()}")),  # type: ignore[arg-type]  # as above
            retry,
            batch,
            lag=lambda: consumer_lag(runner.consumer),  # type: ignore[arg-type]  # the current (maybe rebuilt) Consumer
            rejoin=watchdog.check,  # rebuilds a consumer left out of its group (shared/rejoin.py)
        )
        try:
            runner.run(stop)
        except BaseException as err:  # a runner only stops on an unrecoverable fault
            log.exception("%s worker stopped: %s", role, err)
            failures.append(err)
            stop.set()

    threads = [threading.Thread(target=work, args=(r,), name=f"manifold-{r}", daemon=True) for r in roles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} worker(s) stopped on errors: {failures[0]}")


def _member(roles: list[str], metrics_port: int) -> None:
    """One process of `run_processes`: settings from the environment it inherited (secrets are
    never serialised to it), its own metrics port; runs `roles` until SIGTERM/SIGINT."""
    import signal

    settings = ManifoldSettings()
    settings = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"metrics_port": metrics_port})})
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(processName)s %(threadName)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    run(settings, roles, stop)


def run_processes(settings: ManifoldSettings, roles: Sequence[str], processes: int, stop: threading.Event,
                  poll_s: float = 0.5) -> None:
    """Run `roles` in `processes` member processes until `stop` is set (see the module docstring);
    raises `RuntimeError` naming the members that stopped on errors. `settings` gives the first
    metrics port; the members read everything else from the environment (as `ManifoldSettings()`)."""
    import multiprocessing

    unknown = set(roles) - set(ROLES) - set(EXTRA_ROLES)
    if unknown:
        raise ValueError(f"unknown role(s) {sorted(unknown)}; choose from {', '.join(ROLES + EXTRA_ROLES)}")
    if processes < 1:
        raise ValueError(f"--processes must be at least 1, got {processes}")
    if processes == 1:
        run(settings, roles, stop)
        return
    base = settings.ingest.metrics_port
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited threads or sockets
    members = []
    for i in range(processes):
        mine = [r for r in roles if r != "reconcile" or i == 0]
        if not mine:
            continue
        proc = context.Process(target=_member, args=(mine, base + i if base else 0), name=f"manifold-worker-{i}")
        proc.start()
        members.append(proc)
    failed: list[str] = []
    try:
        while not stop.is_set():
            gone = [p for p in members if not p.is_alive()]
            if gone:
                failed = [f"{p.name} (exit {p.exitcode})" for p in gone if p.exitcode != 0]
                if failed or len(gone) == len(members):
                    break
            stop.wait(poll_s)
    finally:
        for proc in members:
            if proc.is_alive():
                proc.terminate()  # SIGTERM: the member finishes its batch and exits
        for proc in members:
            proc.join(timeout=120)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if failed:
        raise RuntimeError(f"{len(failed)} worker process(es) stopped on errors: {', '.join(failed)}")
