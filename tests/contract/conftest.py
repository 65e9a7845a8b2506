"""Fixtures of the contract suites: every port's adapters, real and embedded, behind one name.

`text_index` is parametrised over `elasticsearch` (the real server) and `postgres`
(`PostgresTextIndex`); `graph_store` over `neo4j` and `postgres` (`PostgresGraphStore`). The
PostgreSQL adapters run on the configured PostgreSQL (migrated here), the real ones on the
configured servers. A missing server skips on a developer machine and FAILS under CI=true
(tests/conftest.py). Every test writes under fresh tenants and deletes what it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract_adapters import GRAPH_ADAPTERS, TEXT_ADAPTERS, make_graph_store, make_text_index

from manifold.shared.stores import pg_schema


@pytest.fixture(scope="session")
def pg_roles(settings, pg_conninfo: str) -> dict[str, str]:
    ingest = settings.postgres.ingest_password.get_secret_value()
    query = settings.postgres.query_password.get_secret_value()
    pg_schema.migrate(pg_conninfo, ingest_password=ingest, query_password=query)
    return {
        "admin": pg_conninfo,
        "ingest": settings.postgres.conninfo(user=pg_schema.INGEST_ROLE, password=ingest),
        "query": settings.postgres.conninfo(user=pg_schema.QUERY_ROLE, password=query),
    }


class Cleanup:
    """Remembers (store, tenant, document, version) written by a test and deletes them after."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, str, str, int]] = []

    def wrote(self, store: Any, tenant: str, document_id: str, version: int) -> None:
        self.items.append((store, tenant, document_id, version))

    def run(self) -> None:
        for store, tenant, document_id, version in reversed(self.items):
            store.delete_version(tenant, document_id, version)


@pytest.fixture
def cleanup() -> Iterator[Cleanup]:
    c = Cleanup()
    yield c
    c.run()


@pytest.fixture(params=TEXT_ADAPTERS)
def text_index(request: pytest.FixtureRequest) -> Any:
    return make_text_index(request.param, request)


@pytest.fixture(params=GRAPH_ADAPTERS)
def graph_store(request: pytest.FixtureRequest) -> Any:
    return make_graph_store(request.param, request)


@pytest.fixture
def tenants(unique: Callable[[str], str]) -> tuple[str, str]:
    return unique("ca"), unique("cb")
