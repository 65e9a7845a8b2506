"""Composition root of `manifold stack`: builds the four services from `ManifoldSettings`."""

from __future__ import annotations

from manifold.shared.config import ManifoldSettings

from .elasticsearch import Elasticsearch
from .kafka import Kafka
from .neo4j import Neo4j
from .postgres import Postgres
from .service import Service, StackPaths

SERVICE_NAMES = ("postgres", "kafka", "elasticsearch", "neo4j")


def stack_paths(settings: ManifoldSettings) -> StackPaths:
    return StackPaths(settings.stack.dir.resolve())


def build_services(settings: ManifoldSettings, only: list[str] | None = None) -> list[Service]:
    """The services in start order, optionally restricted to the names in `only`."""
    paths = stack_paths(settings)
    java = settings.stack.java_home
    pg, kf, es, neo = settings.postgres, settings.kafka, settings.elasticsearch, settings.neo4j
    services: list[Service] = [
        Postgres(
            paths, host=pg.host, port=pg.port, superuser=pg.user,
            password=pg.password.get_secret_value(), database=pg.database,
            shared_buffers_mb=pg.shared_buffers_mb,
        ),
        Kafka(paths, host=kf.host, port=kf.port, heap_mb=kf.heap_mb, java_home=java),
        Elasticsearch(paths, host=es.host, port=es.port, heap_mb=es.heap_mb, java_home=java),
        Neo4j(
            paths, host=neo.host, bolt_port=neo.bolt_port, http_port=neo.http_port,
            heap_mb=neo.heap_mb, pagecache_mb=neo.pagecache_mb, java_home=java,
            password=neo.password.get_secret_value(),
        ),
    ]
    if only:
        unknown = set(only) - set(SERVICE_NAMES)
        if unknown:
            raise ValueError(f"unknown service(s) {sorted(unknown)}; choose from {list(SERVICE_NAMES)}")
        services = [s for s in services if s.name in only]
    return services
