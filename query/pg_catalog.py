"""The tenant's catalog of resolvable names from the PostgreSQL graph tables (embedded profile).

`PostgresCatalogReader` is `catalog.CatalogReader` with the Neo4j read replaced by one SQL
statement over `graph_entities` and `graph_mentions`; everything else (kinds, product
description aliases from the serving views, the per-tenant TTL cache, deterministic order) is
inherited unchanged, so both profiles resolve names identically.

Guarantees (as `CatalogReader`): an entity is listed only if at least one of its mention links
is marked `active` (and the query role's restrictive row-level policy admits only mentions of
versions ACTIVE in the manifest); the statement names `tenant_id` on every table it reads, under
row-level security with the tenant set for a read-only REPEATABLE READ transaction as
`manifold_query`, with a statement timeout. The tenant is only the `tenant_id` argument.
"""

from __future__ import annotations

from typing import Any

import psycopg

from manifold.query.catalog import NODE_TYPE_TO_KIND, CatalogReader
from manifold.shared.config import ManifoldSettings
from manifold.shared.stores.pg_connections import TenantConnections

__all__ = ["PostgresCatalogReader"]

_ENTITIES_SQL = """
SELECT e.entity_id, e.type, e.canonical_key AS key, e.name, e.aliases
FROM manifold.graph_entities e
WHERE e.tenant_id = %(tenant)s AND e.type = ANY(%(types)s::text[])
  AND EXISTS (SELECT 1 FROM manifold.graph_mentions m
              WHERE m.tenant_id = %(tenant)s AND m.entity_id = e.entity_id AND m.active)
ORDER BY e.entity_id
"""


class PostgresCatalogReader(CatalogReader):
    """`CatalogReader` over the PostgreSQL graph tables (see the module docstring)."""

    def __init__(self, connections: TenantConnections, settings: ManifoldSettings, *, ttl_s: float = 30.0) -> None:
        super().__init__(None, connections, settings, ttl_s=ttl_s)  # type: ignore[arg-type]  # no Neo4j driver
        self._pg = connections

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, **kwargs: Any) -> PostgresCatalogReader:
        return cls(TenantConnections(settings.postgres.query_conninfo()), settings, **kwargs)

    def _graph_rows(self, tenant_id: str) -> list[dict[str, Any]]:
        with self._pg.transaction(tenant_id, snapshot=True) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(max(50, int(self._timeout_s * 1000))),))
            try:
                rows = conn.execute(_ENTITIES_SQL, {"tenant": tenant_id, "types": list(NODE_TYPE_TO_KIND)}).fetchall()
            except psycopg.errors.QueryCanceled as exc:
                raise TimeoutError("loading the catalog exceeded the statement timeout") from exc
        return [{"entity_id": r[0], "type": r[1], "key": r[2], "name": r[3], "aliases": list(r[4] or [])}
                for r in rows]
