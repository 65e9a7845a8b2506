"""Erasure: after a delete, a document's content is removed from everything manifold writes.

`collect(ports, tenant, grace_s, bus)` is the gc pass (the `reconcile` worker role runs it every
`reconcile_interval_s`; `manifold gc` runs it once; the embedded `manifold delete` runs it right
after applying the delete). `purge_tenant(ports, tenant)` erases a whole tenant.

Guarantees (docs/lifecycle.md 'Erasure'):
- **Serving stores**: the publisher removes a deleted document's versions from PostgreSQL,
  Elasticsearch and Neo4j when it applies the delete; `collect` first re-runs `publisher.gc`,
  which finishes any purge a crash interrupted and removes retired versions past `grace_s`.
- **Staging**: every stage payload (parsed text, chunks, vectors, extraction) of a deleted
  document up to its tombstone version — in-flight versions included — and of every purged
  version, and every claim-check blob only those versions used (`StagingEraser`).
- **Embedded bus**: every message and dead letter keyed by the deleted document, once every
  consumer group has read it (`BusEraser`); a message not yet consumed goes at a later pass.
  Apart from erasure, the embedded bus has a retention like Kafka's (`BusRetention`,
  `embedded.bus_retention_s`): `manifold gc` and `manifold serve` remove read messages past it.
- **Kafka** cannot delete single records: stage and publish topics carry claim-check references
  only, and the two topics that can carry content (`manifold.documents`, `manifold.dlq`) have a
  bounded retention (`kafka.content_retention_ms`, `shared/kafka.pipeline_topic_configs`).
- Idempotent: rerunning removes nothing more and fails nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from manifold.ingest.publisher import PublishPorts, gc
from manifold.shared.ports import VersionManifest


@runtime_checkable
class StagingEraser(Protocol):
    def erase_deleted(self, tenant_id: str) -> dict[str, int]:
        """Remove staged payloads and blobs of deleted documents and purged versions; counts per table."""
        ...


@runtime_checkable
class BusEraser(Protocol):
    def erase_documents(self, tenant_id: str, deleted: Mapping[str, int]) -> int:
        """Remove consumed messages of each document up to the version given; how many."""
        ...


@runtime_checkable
class BusRetention(Protocol):
    def trim(self, retain_s: float) -> int:
        """Remove messages older than `retain_s` that every consumer group has read (not the DLQ)."""
        ...


class TenantStore(Protocol):
    def delete_tenant(self, tenant_id: str) -> dict[str, int]:
        """Remove every artifact of the tenant; counts per index / kind."""
        ...


def deleted_documents(manifest: VersionManifest, tenant_id: str) -> dict[str, int]:
    """Each deleted document of the tenant and its tombstone (highest deleted) version."""
    out: dict[str, int] = {}
    for entry in manifest.entries(tenant_id):
        if entry.state == "deleted":
            out[entry.document_id] = max(out.get(entry.document_id, 0), entry.version)
    return out


def collect(ports: PublishPorts, tenant_id: str, grace_s: float, *, staging: object = None,
            bus: object = None) -> dict[str, int]:
    """One gc pass for one tenant (see the module guarantees); returns what it removed."""
    removed = {"versions": gc(ports, tenant_id, grace_s)}
    if isinstance(staging, StagingEraser):
        removed.update(staging.erase_deleted(tenant_id))
    if isinstance(bus, BusEraser):
        removed["bus_messages"] = bus.erase_documents(tenant_id, deleted_documents(ports.manifest, tenant_id))
    return removed


@dataclass
class PurgePorts:
    """What `purge_tenant` erases: PostgreSQL (every tenant table and the embedded bus, through
    `postgres(tenant)`), and the external text index and graph (None on the embedded profile,
    where they are PostgreSQL tables)."""

    postgres: Callable[[str], dict[str, int]]
    text: TenantStore | None = None
    graph: TenantStore | None = None
    access_events: Callable[[str], int] | None = None
    """Write a tombstone for every ACL and membership key of the tenant on the compacted access
    topics (Kafka keeps their latest value forever otherwise); returns how many. Run before
    PostgreSQL is purged (the keys are read there). None on the embedded profile, whose bus is
    a PostgreSQL table purged with the rest."""


def purge_tenant(ports: PurgePorts, tenant_id: str) -> dict[str, dict[str, int]]:
    """Erase the tenant everywhere: Elasticsearch and Neo4j first (readers stop seeing it), then
    PostgreSQL, whose manifest and ledger go last so a crash midway can simply be rerun."""
    removed: dict[str, dict[str, int]] = {}
    if ports.text is not None:
        removed["elasticsearch"] = ports.text.delete_tenant(tenant_id)
    if ports.graph is not None:
        removed["neo4j"] = ports.graph.delete_tenant(tenant_id)
    if ports.access_events is not None:
        removed["access_topics"] = {"tombstones": ports.access_events(tenant_id)}
    removed["postgres"] = ports.postgres(tenant_id)
    return removed
