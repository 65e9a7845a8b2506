"""The whole pipeline including the publisher, in-process over the real Kafka and stores:
versions become active once verified, an update retires the old version, a delete hides and
purges a document, gc removes retired versions, and the reconciler finds no drift."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from pipeline_support import migrate, running_workers, test_settings, wait_for

from manifold.ingest import ROLES, lifecycle
from manifold.ingest.publisher import gc
from manifold.ingest.reconciler import reconcile
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.kafka import ensure_topics

ZERO = {"missing": 0, "stale": 0, "orphaned": 0, "wrong_version": 0}


@pytest.fixture(scope="module")
def stack(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client,
          neo4j_driver) -> Iterator[dict]:
    s = test_settings(settings)
    migrate(s)
    assert "publish" in ROLES
    _skip_backlog(kafka_bootstrap, "manifold.publish", topics.PUBLISH)
    ports = lifecycle.build_ports(s)
    from manifold.deploy.compose.distributed import upstream_client

    with running_workers(s) as errors:
        yield {"client": upstream_client(s), "ports": ports, "errors": errors}


def _skip_backlog(bootstrap: str, group: str, topic: str) -> None:
    """Move the publisher's group to the end of its topic: on a long-lived dev stack the topic
    holds every earlier run's notices (for tenants whose artifacts tests have since removed,
    each retried before it is dead-lettered); they are not this test's business."""
    ensure_topics(bootstrap, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = [TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                for p in meta.partitions]
        consumer.commit(offsets=ends, asynchronous=False)
    finally:
        consumer.close()


def _wait(what: str, check: Callable[[], bool], stack: dict) -> None:
    wait_for(what, check, stack["errors"])


def _states(ports, tenant: str, doc: str) -> dict[int, str]:
    return {e.version: e.state for e in ports.manifest.entries(tenant, doc)}


def test_update_delete_gc_and_reconcile(stack: dict) -> None:
    tenant, client, ports = f"life-{uuid.uuid4().hex[:8]}", stack["client"], stack["ports"]
    note = b"Site note.\n\nACME Corp approved Beta GmbH as a vendor for sensors.\n"
    assert client.publish_bytes(tenant, "notes/a.txt", note, "text/plain") == 1
    assert client.publish_bytes(tenant, "notes/b.txt", b"Another note about relay boards.\n", "text/plain") == 1
    _wait("both documents to become active",
          lambda: _states(ports, tenant, "notes/a.txt") == {1: "active"}
          and _states(ports, tenant, "notes/b.txt") == {1: "active"}, stack)
    assert reconcile(ports, [tenant]).to_json()["drift"] == ZERO

    assert client.publish_bytes(tenant, "notes/a.txt", note + b"\nThe relay board was replaced.\n",
                                "text/plain") == 2
    _wait("version 2 to replace version 1",
          lambda: _states(ports, tenant, "notes/a.txt") == {1: "retired", 2: "active"}, stack)
    # The old version's serving mark is cleared just after the activation commits (readers are
    # protected meanwhile by the final check against the manifest), so wait for it, don't race it.
    _wait("version 1's serving mark to be cleared",
          lambda: ports.text.serving_drift(tenant, {("notes/a.txt", 2), ("notes/b.txt", 1)}) == set(), stack)

    assert client.delete(tenant, "notes/b.txt") == 2
    _wait("the delete to apply", lambda: _states(ports, tenant, "notes/b.txt") == {1: "deleted", 2: "deleted"}, stack)
    _wait("the deleted document's artifacts to go",
          lambda: all(set(s.manifest(tenant, "notes/b.txt", 1).counts.values()) == {0} for s in ports.stores), stack)

    # The publisher finishes the delete in every store (and marks it purged) a moment after the
    # counts reach zero; once it has, nothing is stale: v1 of a.txt is retired but inside the grace period.
    _wait("the delete to finish everywhere", lambda: reconcile(ports, [tenant]).to_json()["drift"] == ZERO, stack)
    assert gc(ports, tenant, grace_s=0) == 1
    assert all(set(s.manifest(tenant, "notes/a.txt", 1).counts.values()) == {0} for s in ports.stores)
    assert reconcile(ports, [tenant], grace_s=0).to_json()["drift"] == ZERO
    status = {d["document_id"]: d for d in lifecycle.status(ports, [tenant])["documents"]}
    assert (status["notes/a.txt"]["active_version"], status["notes/a.txt"]["state"]) == (2, "active")
    assert status["notes/a.txt"]["counts"]["elasticsearch"] >= 1
    assert (status["notes/b.txt"]["active_version"], status["notes/b.txt"]["state"]) == (None, "deleted")
