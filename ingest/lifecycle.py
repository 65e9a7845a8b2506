"""Composition of the lifecycle ports (publisher, reconciler, status) and `status`.

`build_ports(settings)` connects the manifest and the three version stores (no embedder, so it
is cheap for the CLI); nothing connects at import time. `status` reads only.
"""

from __future__ import annotations

from typing import Any

from manifold.ingest.reconciler import ReconcilePorts
from manifold.shared.config import ManifoldSettings


def build_ports(settings: ManifoldSettings) -> ReconcilePorts:
    from manifold.shared import vocabulary
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.neo4j import Neo4jGraphStore
    from manifold.shared.stores.postgres import PostgresRelationalStore, PostgresStagingStore

    return ReconcilePorts(
        manifest=PostgresVersionManifest.from_settings(settings),
        relational=PostgresRelationalStore.from_settings(settings),
        text=ElasticsearchTextIndex.from_settings(settings),
        graph=Neo4jGraphStore.from_settings(settings, entity_types=vocabulary.ENTITY_TYPES,
                                            relation_types=vocabulary.RELATIONS),
        staging=PostgresStagingStore.from_settings(settings),
        ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
        cache=PostgresEmbeddingCache.from_settings(settings),
    )


# What "artifacts" means per store in `status` (vectors are a column of chunks, not counted twice).
_COUNTED = {"postgres": ("chunks", "sections", "records", "record_lines", "review_items"),
            "elasticsearch": ("chunks",), "neo4j": ("entities", "edges")}


def status(ports: ReconcilePorts, tenant_ids: list[str]) -> dict[str, Any]:
    """Per document: its active version (or None), its state (that of its newest version, so
    `deleted` after a delete, `staged` while a first version waits) and the active version's
    artifact counts per store as recomputed by each store, and `review_items`: how many review
    items the active version has (rows that could not be read, columns not understood, ...). With a
    ledger port, `in_flight` lists the versions handed out upstream that the publisher has not seen
    yet, with their stage."""
    documents = []
    for tenant in tenant_ids:
        by_doc: dict[str, list[Any]] = {}
        for entry in ports.manifest.entries(tenant):
            by_doc.setdefault(entry.document_id, []).append(entry)
        for document_id, entries in sorted(by_doc.items()):
            newest = max(entries, key=lambda e: e.version)
            active = next((e.version for e in entries if e.state == "active"), None)
            counts = dict.fromkeys(_COUNTED, 0)
            review = 0
            if active is not None:
                for name, store in zip(_COUNTED, ports.stores, strict=True):
                    m = store.manifest(tenant, document_id, active)
                    counts[name] = sum(m.counts.get(k, 0) for k in _COUNTED[name])
                    review += m.counts.get("review_items", 0)
            documents.append({"tenant_id": tenant, "document_id": document_id, "active_version": active,
                              "state": newest.state, "versions": {e.version: e.state for e in entries},
                              "counts": counts, "review_items": review})
    in_flight = [f.to_json() for t in tenant_ids for f in ports.ledger.in_flight(t)] if ports.ledger else []
    return {"documents": documents, "in_flight": in_flight}
