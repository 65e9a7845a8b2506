"""Builds each port's adapters by name for the contract suites (real server or PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

TEXT_ADAPTERS = ("elasticsearch", "postgres")
GRAPH_ADAPTERS = ("neo4j", "postgres")


def make_text_index(kind: str, request: pytest.FixtureRequest) -> Any:
    if kind == "elasticsearch":
        from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex

        return ElasticsearchTextIndex(request.getfixturevalue("es_client"))
    from manifold.shared.stores.pg_text import PostgresTextIndex

    return PostgresTextIndex(request.getfixturevalue("pg_roles")["ingest"])


def make_graph_store(kind: str, request: pytest.FixtureRequest, **kwargs: Any) -> Any:
    if kind == "neo4j":
        from manifold.shared.stores.neo4j import Neo4jGraphStore

        return Neo4jGraphStore(request.getfixturevalue("neo4j_driver"), **kwargs)
    from manifold.shared.stores.pg_graph import PostgresGraphStore

    return PostgresGraphStore(request.getfixturevalue("pg_roles")["ingest"], **kwargs)
