"""Shared fixtures and the rule for missing services.

Integration and e2e tests need the real services that `manifold stack up` starts. When one is
unreachable the test is skipped on a developer machine, but under `CI=true` it FAILS: CI must
never report a green run that silently skipped the real stack.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from manifold.deploy.local.service import port_open
from manifold.shared import access
from manifold.shared.config import ManifoldSettings

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# The test configuration opts in to the built-in development keys (token signing key and upstream
# producer key; both refused by default, see docs/query.md "Keys"), so the suite and the worker
# subprocesses it starts (they inherit this environment) can mint tokens and sign events. Tests
# of the refusal build their settings with `allow_dev_key=False` explicitly.
os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")

# Tests that call executors directly (no query turn, so no reader) read as the tool principal
# (`shared.access.allow_tool_reads`); every turn through `QueryService` enters its own reader, and
# tests/unit/test_access.py checks that a read without one is refused when this is off.
access.allow_tool_reads()


@pytest.fixture(scope="session")
def settings() -> ManifoldSettings:
    return ManifoldSettings()


def _require(name: str, host: str, port: int) -> None:
    if port_open(host, port, timeout=2.0):
        return
    message = f"{name} is not reachable on {host}:{port}; start it with `manifold stack up`"
    if IN_CI:
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def kafka_bootstrap(settings: ManifoldSettings) -> str:
    _require("kafka", settings.kafka.host, settings.kafka.port)
    return settings.kafka.bootstrap_servers


@pytest.fixture(scope="session")
def pg_conninfo(settings: ManifoldSettings) -> str:
    _require("postgres", settings.postgres.host, settings.postgres.port)
    return settings.postgres.conninfo()


@pytest.fixture(scope="session")
def es_client(settings: ManifoldSettings) -> Iterator[object]:
    _require("elasticsearch", settings.elasticsearch.host, settings.elasticsearch.port)
    from elasticsearch import Elasticsearch

    client = Elasticsearch(settings.elasticsearch.url, request_timeout=30)
    yield client
    client.close()


@pytest.fixture(scope="session")
def neo4j_driver(settings: ManifoldSettings) -> Iterator[object]:
    _require("neo4j", settings.neo4j.host, settings.neo4j.bolt_port)
    import neo4j

    driver = neo4j.GraphDatabase.driver(
        settings.neo4j.uri, auth=(settings.neo4j.user, settings.neo4j.password.get_secret_value())
    )
    yield driver
    driver.close()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names unique to this test run, so reruns against a long-lived stack never collide."""
    run = uuid.uuid4().hex[:10]
    return lambda prefix: f"{prefix}-{run}"


_LAYERS = ("unit", "contract", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its layer, taken from its folder (tests/<layer>/...)."""
    for item in items:
        parts = item.path.parts
        layer = next((p for p in reversed(parts) if p in _LAYERS), None)
        if layer is None:
            raise pytest.UsageError(f"{item.nodeid}: tests live under tests/<{'|'.join(_LAYERS)}>/")
        item.add_marker(getattr(pytest.mark, layer))
