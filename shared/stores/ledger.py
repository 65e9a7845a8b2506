"""PostgreSQL `VersionLedger`: atomic version assignment for the upstream publish client.

Guarantees: reservations of one (tenant, document) are serialised by a transaction advisory lock
and the row lock, so concurrent publishers never hand out the same version twice; the tenant is set per
transaction and the table (`manifold.upstream_versions`, migration 2 in `pg_schema`) is under
row-level security like every tenant table. Connect as `manifold_ingest`.
"""

from __future__ import annotations

from manifold.shared.stores.postgres import TenantConnections


class PostgresVersionLedger:
    def __init__(self, conninfo: str) -> None:
        self._db = TenantConnections(conninfo)

    def reserve(self, tenant_id: str, document_id: str, content_sha256: str | None) -> int | None:
        with self._db.transaction(tenant_id) as conn:
            # Serialise reservations of one document, including its very first one (no row to lock yet).
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{tenant_id}/{document_id}",))
            row = conn.execute(
                "SELECT version, content_sha256, deleted, confirmed FROM upstream_versions "
                "WHERE tenant_id = %s AND document_id = %s FOR UPDATE",
                (tenant_id, document_id),
            ).fetchone()
            deleting = content_sha256 is None
            if row is None:
                if deleting:
                    return None
                conn.execute(
                    "INSERT INTO upstream_versions (tenant_id, document_id, version, content_sha256) "
                    "VALUES (%s, %s, 1, %s)",
                    (tenant_id, document_id, content_sha256),
                )
                return 1
            version, sha, deleted, confirmed = row
            same = deleted if deleting else (not deleted and sha == content_sha256)
            if same:
                return None if confirmed else int(version)
            conn.execute(
                "UPDATE upstream_versions SET version = version + 1, content_sha256 = %s, deleted = %s, "
                "confirmed = false, updated_at = now() WHERE tenant_id = %s AND document_id = %s",
                (content_sha256, deleting, tenant_id, document_id),
            )
            return int(version) + 1

    def confirm(self, tenant_id: str, document_id: str, version: int) -> None:
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                "UPDATE upstream_versions SET confirmed = true, updated_at = now() "
                "WHERE tenant_id = %s AND document_id = %s AND version = %s",
                (tenant_id, document_id, version),
            )

    def live_documents(self, tenant_id: str) -> set[str]:
        """Ids of the tenant's documents whose last reserved event is an upsert (not a delete)."""
        with self._db.transaction(tenant_id) as conn:
            rows = conn.execute(
                "SELECT document_id FROM upstream_versions WHERE tenant_id = %s AND NOT deleted",
                (tenant_id,),
            ).fetchall()
        return {row[0] for row in rows}
