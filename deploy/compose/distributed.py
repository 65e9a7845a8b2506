"""Composition root of the distributed profile's publishing side: Kafka, PostgreSQL, Elasticsearch, Neo4j.

Nothing connects at import time; each builder connects (or checks its key) when called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from manifold.ingest.access_client import AccessClient
from manifold.ingest.erasure import PurgePorts
from manifold.ingest.upstream import UpstreamClient
from manifold.shared.config import ManifoldSettings


def upstream_client(settings: ManifoldSettings, client_id: str = "manifold-ingest-cli") -> UpstreamClient:
    """The distributed profile's publish client: Kafka producer, PostgreSQL ledger and staging
    store, signed as the configured upstream producer. Creates the pipeline topics if missing
    (with the bounded retention of content topics). Raises `NoProducerKey` (a ValueError) before
    anything connects when no producer key is configured or allowed."""
    from confluent_kafka import Producer

    from manifold.shared import topics
    from manifold.shared.envelope_auth import signer_from_settings
    from manifold.shared.kafka import ensure_topics, pipeline_topic_configs, producer_config
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    signer = signer_from_settings(settings)
    ensure_topics(settings.kafka.bootstrap_servers, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS,
                  pipeline_topic_configs(settings.kafka))
    return UpstreamClient(
        producer=Producer(producer_config(settings.kafka.bootstrap_servers, client_id)),  # type: ignore[arg-type]  # confluent_kafka's stubs: invariant list headers, overloaded commit vs the bus port
        ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
        staging=PostgresStagingStore.from_settings(settings),
        max_document_bytes=settings.ingest.max_document_bytes,
        signer=signer,
    )


def access_client(settings: ManifoldSettings, client_id: str = "manifold-acl-cli") -> AccessClient:
    """The distributed profile's ACL / membership publisher: a Kafka producer signing as the
    configured upstream producer. Creates the topics if missing (the access topics compacted)."""
    from confluent_kafka import Producer

    from manifold.shared import topics
    from manifold.shared.envelope_auth import signer_from_settings
    from manifold.shared.kafka import ensure_topics, pipeline_topic_configs, producer_config

    signer = signer_from_settings(settings)
    ensure_topics(settings.kafka.bootstrap_servers, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS,
                  pipeline_topic_configs(settings.kafka))
    return AccessClient(Producer(producer_config(settings.kafka.bootstrap_servers, client_id)),  # type: ignore[arg-type]  # confluent_kafka's stubs, as upstream_client
                        signer)


def purge_ports(settings: ManifoldSettings, postgres: Callable[[str], Any]) -> PurgePorts:
    """`manifold purge-tenant`'s stores: `postgres` (the superuser purge) plus the Elasticsearch
    index and the Neo4j graph."""
    from manifold.shared import vocabulary
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.neo4j import Neo4jGraphStore

    return PurgePorts(postgres=postgres, text=ElasticsearchTextIndex.from_settings(settings),
                      graph=Neo4jGraphStore.from_settings(settings, entity_types=vocabulary.ENTITY_TYPES,
                                                          relation_types=vocabulary.RELATIONS),
                      access_events=lambda tenant: access_tombstones(settings, tenant))


def access_tombstones(settings: ManifoldSettings, tenant_id: str) -> int:
    """A tombstone on `manifold.acl` / `manifold.principals` for every key the tenant has in
    PostgreSQL's ACL state, acknowledged by Kafka: compaction then erases the tenant's ACLs and
    memberships from the topics. Returns how many were written."""
    from confluent_kafka import Producer

    from manifold.shared import topics
    from manifold.shared.acl_events import principal_key
    from manifold.shared.events import event_key
    from manifold.shared.kafka import producer_config
    from manifold.shared.messaging import Deliveries
    from manifold.shared.stores.acl_pg import PostgresAclStore

    docs, users = PostgresAclStore.from_settings(settings).keys(tenant_id)
    producer = Producer(producer_config(settings.kafka.bootstrap_servers, "manifold-purge"))
    deliveries = Deliveries(producer, 60.0, bus="kafka")  # type: ignore[arg-type]  # confluent_kafka's stubs
    for doc in docs:
        deliveries.send(topics.ACL, event_key(tenant_id, doc), None)  # type: ignore[arg-type]  # a tombstone
    for user in users:
        deliveries.send(topics.PRINCIPALS, principal_key(tenant_id, user), None)  # type: ignore[arg-type]  # a tombstone
    deliveries.flush()
    return len(docs) + len(users)
