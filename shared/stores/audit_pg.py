"""The operator console's audit log in PostgreSQL (`manifold.console_audit`, migration 13).

Guarantees: append-only (the ingest role may insert and select, never update or delete); every
row and every read is confined to one tenant by the table's FORCE row-level security and the
tenant set per transaction (`TenantConnections`); values are bound parameters only. Nothing
connects at construction. A tenant purge removes the tenant's rows like any tenant table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from manifold.shared.stores.pg_connections import TenantConnections


@dataclass(frozen=True)
class AuditEntry:
    """One privileged action: who (`actor`, with the `role` it acted in), what (`action` on
    `target`: an id, a filter or a stage), how many (`counts`) and how it ended (`result`)."""

    at: datetime
    actor: str
    role: str
    action: str
    target: str
    counts: dict[str, Any]
    result: str


class PostgresAuditLog:
    def __init__(self, conninfo: str, *, connect_timeout: int = 5) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)

    def record(self, tenant_id: str, *, actor: str, role: str, action: str, target: str,
               counts: dict[str, Any], result: str) -> None:
        with self._db.transaction(tenant_id) as conn:
            conn.execute("INSERT INTO console_audit (tenant_id, actor, role, action, target, counts, result) "
                         "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)",
                         (tenant_id, actor, role, action, target[:2000], json.dumps(counts, default=str),
                          result[:2000]))

    def recent(self, tenant_id: str, limit: int = 200) -> list[AuditEntry]:
        """The tenant's newest entries first."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute("SELECT at, actor, role, action, target, counts, result FROM console_audit "
                                "WHERE tenant_id = %s ORDER BY at DESC, audit_id DESC LIMIT %s",
                                (tenant_id, limit)).fetchall()
        return [AuditEntry(at, actor, role, action, target, dict(counts or {}), result)
                for at, actor, role, action, target, counts, result in rows]
