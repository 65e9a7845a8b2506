"""The ports whose adapters depend on `settings.profile`, chosen in one place."""

from __future__ import annotations

from manifold.ingest.reconciler import ReconcilePorts
from manifold.shared.config import ManifoldSettings
from manifold.shared.log_bus import Bus


def lifecycle_ports(settings: ManifoldSettings) -> ReconcilePorts:
    """Manifest and store ports for status, reconcile and gc. Embedded: the one PostgreSQL,
    started and migrated if needed; distributed: PostgreSQL, Elasticsearch and Neo4j."""
    if settings.profile == "embedded":
        from manifold.deploy.compose import embedded

        return embedded.prepared_lifecycle_ports(settings)
    from manifold.ingest import lifecycle

    return lifecycle.build_ports(settings)


def gc_bus(settings: ManifoldSettings) -> Bus | None:
    """The embedded profile's bus (its messages are erased too); None on Kafka (bounded by retention)."""
    if settings.profile != "embedded":
        return None
    from manifold.deploy.compose.embedded import open_bus

    return open_bus(settings)
