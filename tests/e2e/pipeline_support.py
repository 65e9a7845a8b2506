"""Helpers shared by the e2e tests: run the workers in-process, wait, and read topics."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer

from manifold.ingest import ROLES, workers
from manifold.shared import topics
from manifold.shared.artifacts import LoadNotice
from manifold.shared.config import IngestSettings, ManifoldSettings
from manifold.shared.dlq import DeadLetter
from manifold.shared.stores import pg_schema

SCOPED_PRODUCER = ("e2e-scoped", "e2e-scoped-producer-key-0123456789abcdef")
"""An upstream producer the e2e workers accept only for tenant `e2e-scope-only`."""


def test_settings(base: ManifoldSettings) -> ManifoldSettings:
    """No metrics server, few retries so poison reaches the DLQ quickly, and one producer key
    scoped to a single tenant (besides the development producer of the test configuration)."""
    from manifold.shared.config import ProducerKey

    scoped = {SCOPED_PRODUCER[0]: ProducerKey(key=SCOPED_PRODUCER[1], tenants=["e2e-scope-only"])}  # type: ignore[arg-type]
    return base.model_copy(update={"ingest": IngestSettings(metrics_port=0, max_attempts=2, producers=scoped)})


test_settings.__test__ = False  # type: ignore[attr-defined]  # not a test despite its name


def migrate(settings: ManifoldSettings) -> None:
    pg = settings.postgres
    pg_schema.migrate(pg.conninfo(), ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())


@contextmanager
def running_workers(settings: ManifoldSettings, roles: tuple[str, ...] = ROLES) -> Iterator[list[BaseException]]:
    """Every given role running in a background thread; yields the list its errors land in."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            workers.run(settings, list(roles), stop)
        except BaseException as err:  # surfaced by wait_for
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        stop.set()
        thread.join(60)


def wait_for(what: str, check: Callable[[], bool], errors: list[BaseException], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert not errors, errors
        if check():
            return
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


def read_topic(bootstrap: str, topic: str, accept: Callable[[bytes], object | None]) -> list:
    """Everything on `topic` so far that `accept` maps to a value (read from offset 0)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out, idle = [], 0
    try:
        while idle < 3:
            msgs = consumer.consume(500, timeout=1.0)
            if not msgs:
                idle += 1
                continue
            idle = 0
            for msg in msgs:
                if msg.error() is None and (value := accept(msg.value())) is not None:
                    out.append(value)
    finally:
        consumer.close()
    return out


def load_notices(bootstrap: str, tenant: str, document_id: str | None = None) -> list[LoadNotice]:
    def accept(raw: bytes) -> LoadNotice | None:
        try:
            notice = LoadNotice.model_validate_json(raw)
        except ValueError:
            return None
        if notice.doc.tenant_id != tenant or document_id not in (None, notice.doc.document_id):
            return None
        return notice

    return read_topic(bootstrap, topics.PUBLISH, accept)


def dead_letters(bootstrap: str, tenant: str) -> list[DeadLetter]:
    def accept(raw: bytes) -> DeadLetter | None:
        try:  # the DLQ may hold anything anyone wrote to it (tests/integration/test_dlq_cli.py writes garbage)
            letter = DeadLetter.model_validate_json(raw or b"")
        except ValueError:
            return None
        return letter if letter.tenant_id == tenant else None

    return read_topic(bootstrap, topics.DLQ, accept)


def store_manifests(ports, tenant: str, doc: str, version: int) -> list:
    return [ports.relational.manifest(tenant, doc, version), ports.text.manifest(tenant, doc, version),
            ports.graph.manifest(tenant, doc, version)]
