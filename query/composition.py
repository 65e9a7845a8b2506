"""Composition root of a query worker process: builds the `Answerer` from settings.

Guarantees:
- Nothing connects at import time or in `build_answerer`: the clients and drivers it creates
  connect on first use, so a worker starts (and reports) even while a store is down.
- Query code gets read-only access only: PostgreSQL through the `manifold_query` role (serving
  views, read-only transactions, row-level security), Neo4j through READ transactions, and
  Elasticsearch searches that always carry the tenant and serving filters.
- One answerer is shared by all consumer threads: every part is thread-safe (per-thread
  PostgreSQL connections, thread-safe ES client and Neo4j driver, a locked catalog cache).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from manifold.query.auth import continuation_secret
from manifold.query.routing.terms import known_word
from manifold.query.types import Principal, QueryReply, QueryRequest, StepResult
from manifold.shared.config import ManifoldSettings


class Answerer(Protocol):
    """Answers one verified request for one authenticated principal. Never raises for bad
    questions or store failures: those become `refused`, `partial` or `error` replies."""

    def answer(self, request: QueryRequest, principal: Principal) -> QueryReply: ...

    def close(self) -> None: ...


class _Sourced:
    """An executor labelled with the store it depends on (the engine's breakers count per source)."""

    def __init__(self, executor: Any, source: str) -> None:
        self._executor = executor
        self.source = source

    def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult:
        result: StepResult = self._executor.run(params, tenant_id=tenant_id, timeout_s=timeout_s)
        return result


class _ManifestActive:
    """`service.ActiveVersions` over the manifest, read through the query role."""

    def __init__(self, connections: Any) -> None:
        self._db = connections

    def active(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, int]:
        from manifold.shared.stores.serving import active_versions

        with self._db.transaction(tenant_id) as conn:
            return active_versions(conn, tenant_id, list(document_ids))


class _AclReaders:
    """`service.Readers` over the ACL state in PostgreSQL, read through the query role."""

    def __init__(self, connections: Any, settings: ManifoldSettings) -> None:
        self._db = connections
        self._query = settings.query

    def scope(self, principal: Principal) -> Any:
        from manifold.shared.stores.acl_pg import resolve_scope

        return resolve_scope(self._db, principal.tenant_id, principal.subject,
                             self._query.acl_default_for(principal.tenant_id))


class _SignedContinuations:
    """`service.Continuations` over `sessions.seal/open_` with the token key."""

    def __init__(self, key: str) -> None:
        self._key = key

    def seal(self, state: dict[str, Any], *, tenant_id: str, session_id: str) -> str:
        from manifold.query import sessions

        return sessions.seal(state, key=self._key, tenant_id=tenant_id, session_id=session_id)

    def open(self, blob: str, *, tenant_id: str, session_id: str) -> dict[str, Any]:
        from manifold.query import sessions

        return sessions.open_(blob, key=self._key, tenant_id=tenant_id, session_id=session_id)


class _CachedEncoder:
    """Vectors of one exact list of texts, cached on disk per model: a later process (each
    `manifold ask --profile embedded` is one) skips re-embedding the router's training set.
    The key is a sha256 of the model identity and the texts, so other texts or another model
    miss; files are written atomically (temp file, then rename)."""

    def __init__(self, live: Any, cache_dir: Path) -> None:
        self._live = live
        self._dir = cache_dir

    def encode(self, texts: list[str]) -> list[list[float]]:
        key = hashlib.sha256(json.dumps([str(getattr(self._live, "info", "")), texts]).encode()).hexdigest()
        path = self._dir / f"vectors-{key[:32]}.json"
        if path.is_file():
            return [[float(x) for x in row] for row in json.loads(path.read_text())]
        vectors = [[float(x) for x in row] for row in self._live.encode(texts)]
        self._dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(vectors))
        tmp.replace(path)
        return vectors


def build_answerer(settings: ManifoldSettings) -> Any:
    """The real `QueryService` over the stores named in `settings` (its `profile` decides which)."""
    if settings.profile == "embedded":
        return build_embedded_answerer(settings)
    import neo4j
    from elasticsearch import Elasticsearch

    from manifold.query import guard, router
    from manifold.query.breaker import Breakers
    from manifold.query.catalog import CatalogReader
    from manifold.query.classifier import train_default
    from manifold.query.engine import Engine
    from manifold.query.executors.bm25 import BM25Executor
    from manifold.query.executors.exact import ExactLookupExecutor
    from manifold.query.executors.graph import GraphExpandExecutor
    from manifold.query.executors.hybrid import HybridExecutor
    from manifold.query.executors.metric import MetricExecutor
    from manifold.query.executors.resolve import ResolveEntityExecutor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.service import QueryService
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    q = settings.query
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    es = Elasticsearch(settings.elasticsearch.url, request_timeout=max(q.statement_timeout_ms / 1000, 1.0))
    # The driver retries a failed managed transaction for `max_transaction_retry_time` (30 s by
    # default, with growing sleeps) whatever the transaction timeout, and the catalog read runs
    # before the deadline-aware engine: during a Neo4j outage a reply arrived after its deadline.
    # No driver retries on the query path: a failure is a gap at once (breakers, partial replies).
    driver = neo4j.GraphDatabase.driver(settings.neo4j.uri, auth=(settings.neo4j.user,
                                                                  settings.neo4j.password.get_secret_value()),
                                        max_transaction_retry_time=0,
                                        connection_timeout=max(q.statement_timeout_ms / 1000, 1.0))
    embedder = SentenceTransformerEmbedder()
    # Warm up before the first request, not inside its deadline: load the model and train the
    # intent classifier (a few seconds, local only, nothing connects).
    classifier = train_default(embedder)
    catalog = CatalogReader(driver, pg, settings)
    exact = ExactLookupExecutor(es, pg, q)
    bm25 = BM25Executor(es, pg, q)
    vector = VectorExecutor(pg, embedder, q)
    executors = {
        "resolve_entity": _Sourced(ResolveEntityExecutor(catalog), "neo4j"),
        "exact_lookup": _Sourced(exact, "elasticsearch"),
        "bm25_search": _Sourced(bm25, "elasticsearch"),
        "vector_search": _Sourced(vector, "postgres"),
        "hybrid_search": _Sourced(HybridExecutor(exact, bm25, vector, pg, q), "hybrid"),
        "metric_query": _Sourced(MetricExecutor(pg, settings), "postgres"),
        "graph_expand": _Sourced(GraphExpandExecutor(driver, pg, settings), "neo4j"),
    }
    engine = Engine(executors, Breakers(failures=q.breaker_failures, reset_s=q.breaker_reset_s))
    service = QueryService(engine=engine, catalog=catalog, active=_ManifestActive(pg),
                           readers=_AclReaders(pg, settings),
                           continuations=_SignedContinuations(continuation_secret(settings)),
                           screen=guard.screen, route=router.route, apply_choice=router.apply_choice,
                           classifier=classifier, closers=(es.close, driver.close), common_word=common_word)
    return service


@functools.cache
def _vocabulary_stems() -> frozenset[str]:
    from manifold.shared import analysis
    from manifold.shared.embedding import bundled_vocabulary

    return frozenset(s for w in bundled_vocabulary() for s in analysis.terms(w))


def common_word(word: str) -> bool:
    """Whether `word` (lower case) is an ordinary English word (`routing.terms.known_word` over
    the whole words of the bundled model's vocabulary, their inflections and prefixed forms):
    the abstention check treats other words of a question as rare (`query.abstain`)."""
    from manifold.shared.embedding import bundled_vocabulary

    return known_word(word, bundled_vocabulary(), _vocabulary_stems())


def build_embedded_answerer(settings: ManifoldSettings) -> Any:
    """The same `QueryService` (guard, router, planner, engine, fusion, checks) for the embedded
    profile: every executor reads the one PostgreSQL through the query role — BM25 and exact
    lookups over the text-index tables, graph expansion over the edges table, the catalog from
    the graph tables — beside the unchanged pgvector and metric executors."""
    from manifold.query import guard, router
    from manifold.query.breaker import Breakers
    from manifold.query.classifier import train_default
    from manifold.query.engine import Engine
    from manifold.query.executors.hybrid import HybridExecutor
    from manifold.query.executors.metric import MetricExecutor
    from manifold.query.executors.pg_graph import PgGraphExpandExecutor
    from manifold.query.executors.pg_lexical import PgBM25Executor, PgExactLookupExecutor
    from manifold.query.executors.resolve import ResolveEntityExecutor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.pg_catalog import PostgresCatalogReader
    from manifold.query.service import QueryService
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.pg_connections import TenantConnections

    q = settings.query
    pg = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    embedder = SentenceTransformerEmbedder()
    # Warm up before the first request, not inside its deadline: load the model and train the
    # intent classifier (a few seconds, local only, nothing connects).
    classifier = train_default(embedder,
                               fit_encoder=_CachedEncoder(embedder, settings.embedded.dir.resolve() / "cache"))
    catalog = PostgresCatalogReader.from_settings(settings)
    exact = PgExactLookupExecutor.from_settings(settings)
    bm25 = PgBM25Executor.from_settings(settings)
    vector = VectorExecutor(pg, embedder, q)
    executors = {
        "resolve_entity": _Sourced(ResolveEntityExecutor(catalog), "postgres-graph"),
        "exact_lookup": _Sourced(exact, "postgres-text"),
        "bm25_search": _Sourced(bm25, "postgres-text"),
        "vector_search": _Sourced(vector, "postgres"),
        "hybrid_search": _Sourced(HybridExecutor(exact, bm25, vector, pg, q), "hybrid"),
        "metric_query": _Sourced(MetricExecutor(pg, settings), "postgres"),
        "graph_expand": _Sourced(PgGraphExpandExecutor.from_settings(settings), "postgres-graph"),
    }
    engine = Engine(executors, Breakers(failures=q.breaker_failures, reset_s=q.breaker_reset_s))
    closers = [close for c in (catalog, exact, bm25, executors["graph_expand"]._executor)  # noqa: SLF001 - own wrapper
               if callable(close := getattr(c, "close", None))]
    return QueryService(engine=engine, catalog=catalog, active=_ManifestActive(pg), readers=_AclReaders(pg, settings),
                        continuations=_SignedContinuations(continuation_secret(settings)),
                        screen=guard.screen, route=router.route, apply_choice=router.apply_choice,
                        classifier=classifier,
                        closers=tuple(closers), common_word=common_word)
