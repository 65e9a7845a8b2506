"""The tenant's catalog of resolvable names: `CatalogReader.load(tenant_id)`.

Guarantees:
- **Active only.** An entity is listed only if it has at least one `MENTIONED_IN` link marked
  `active = true` (a mention by the active version of some document). Entities known only from
  retired or staged versions are not resolvable.
- **Tenant-scoped twice.** The Cypher names `tenant_id = $tenant` on every node and relationship
  it matches; product descriptions come from the `serving_*` views through the read-only query
  role under row-level security with the tenant set per transaction, plus an explicit
  `tenant_id = %s` predicate. The tenant is only ever the `tenant_id` argument.
- **Read-only.** Neo4j is read in a READ session (`execute_read`) with a transaction timeout;
  PostgreSQL in a read-only REPEATABLE READ transaction as `manifold_query`.
- **Outages are `Transient`.** Neo4j down, unavailable, or ending the read at its timeout (as a
  just-restarted server does) raises `Transient`, which the service answers by routing without
  the catalog (`partial`); only a genuine client error propagates.
- **Kinds.** Only the kinds in `types.EntityKind` (company, supplier, product, product_group,
  contract, invoice, credit_note, order) are listed; other node types (e.g. Person) are not.
- **Aliases.** A product's description (catalog item `attributes->>'description'`, or a record
  line's description) is added as an alias, so "differential pressure sensor" resolves to
  PRD-482.
- **Cache.** Results are cached per tenant AND reader scope (`shared/access.py`: a reader never
  gets an entry read under another reader's ACL; at most 512 entries) for `ttl_s` seconds (default 30, 0 disables) in
  process memory; a newly activated or retired version may therefore take up to `ttl_s` to
  appear in or vanish from name resolution. Downstream steps still apply the active-version
  checks, so a stale cache entry can cause a resolution but never a stale citation.
- Entries come back sorted by (kind, name, entity_id): the same data gives the same tuple.
- **Holdings.** `holdings(tenant_id)` says which record types (invoice, credit_note, order,
  catalog_item) the tenant's active documents hold, read from `serving_records` through the query
  role (RLS, explicit tenant predicate), cached like the catalog: the planner plans a metric only
  where records can serve it, so "how many" in a tenant of manuals is a text question.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import neo4j
from neo4j import exceptions as neo4j_errors

from manifold.query.types import CatalogEntry, EntityKind, Holdings
from manifold.shared import access
from manifold.shared.access import ReadScope
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores.manifest import check_tenant
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import cypher_serving, serving_params

__all__ = ["CatalogReader", "NODE_TYPE_TO_KIND"]

NODE_TYPE_TO_KIND: dict[str, EntityKind] = {
    "Company": "company",
    "Supplier": "supplier",
    "Product": "product",
    "ProductGroup": "product_group",
    "Contract": "contract",
    "Invoice": "invoice",
    "CreditNote": "credit_note",
    "Order": "order",
}
"""Graph node `type` -> catalog kind. Types not listed are never resolvable."""

_ENTITIES_CYPHER = (
    "MATCH (e:Entity {tenant_id: $tenant})-[m:MENTIONED_IN]->(v:DocumentVersion {tenant_id: $tenant}) "
    "WHERE " + cypher_serving("m") + " AND e.type IN $types "
    "RETURN DISTINCT e.entity_id AS entity_id, e.type AS type, e.canonical_key AS key, "
    "e.name AS name, coalesce(e.aliases, []) AS aliases"
)

_PRODUCT_DESCRIPTIONS_SQL = (
    "SELECT upper(r.number) AS code, r.attributes->>'description' AS description "
    "FROM serving_records r "
    "WHERE r.tenant_id = %(tenant)s AND r.record_type = 'catalog_item' "
    "AND r.attributes->>'description' IS NOT NULL "
    "UNION "
    "SELECT upper(l.product_code), l.description "
    "FROM serving_record_lines l "
    "WHERE l.tenant_id = %(tenant)s AND l.product_code IS NOT NULL AND l.description IS NOT NULL"
)

_RECORD_TYPES_SQL = (
    "SELECT t.record_type FROM unnest(ARRAY['invoice', 'credit_note', 'order', 'catalog_item']) AS t(record_type) "
    "WHERE EXISTS (SELECT 1 FROM serving_records r WHERE r.tenant_id = %(tenant)s AND r.record_type = t.record_type)"
)

_ALIAS_CAP = 20
"""At most this many aliases per entry (keeps fuzzy matching bounded)."""


class CatalogReader:
    """Loads a tenant's resolvable names from Neo4j (+ product descriptions from PostgreSQL)."""

    def __init__(self, driver: neo4j.Driver, connections: TenantConnections, settings: ManifoldSettings,
                 *, ttl_s: float = 30.0) -> None:
        self._driver = driver
        self._db = connections
        self._timeout_s = settings.query.statement_timeout_ms / 1000.0
        self._ttl_s = ttl_s
        # keyed by (tenant, reader's scope): what one reader may see is never served to another
        self._cache: dict[tuple[str, ReadScope], tuple[float, tuple[CatalogEntry, ...]]] = {}
        self._holdings: dict[tuple[str, ReadScope], tuple[float, Holdings]] = {}
        self._lock = threading.Lock()

    def load(self, tenant_id: str) -> tuple[CatalogEntry, ...]:
        """The tenant's catalog (see the module docstring); cached for `ttl_s` seconds."""
        check_tenant(tenant_id)
        key = (tenant_id, access.current(tenant_id))
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        entries = self._read(tenant_id)
        if self._ttl_s > 0:
            with self._lock:
                _evict_expired(self._cache, now)
                self._cache[key] = (now + self._ttl_s, entries)
        return entries

    def holdings(self, tenant_id: str) -> Holdings:
        """The record types the tenant's active documents hold (see the module docstring)."""
        check_tenant(tenant_id)
        key = (tenant_id, access.current(tenant_id))
        now = time.monotonic()
        with self._lock:
            cached = self._holdings.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(max(50, int(self._timeout_s * 1000))),))
            held = Holdings(record_types=frozenset(str(r[0]) for r in conn.execute(
                _RECORD_TYPES_SQL, {"tenant": tenant_id})))
        if self._ttl_s > 0:
            with self._lock:
                _evict_expired(self._holdings, now)
                self._holdings[key] = (now + self._ttl_s, held)
        return held

    def invalidate(self, tenant_id: str | None = None) -> None:
        """Forget the cached catalog and holdings of one tenant (or of all)."""
        with self._lock:
            if tenant_id is None:
                self._cache.clear()
                self._holdings.clear()
            else:
                for cache in (self._cache, self._holdings):
                    for key in [k for k in cache if k[0] == tenant_id]:
                        cache.pop(key, None)

    def _read(self, tenant_id: str) -> tuple[CatalogEntry, ...]:
        rows = self._graph_rows(tenant_id)
        descriptions = self._product_descriptions(tenant_id) if any(
            r["type"] == "Product" for r in rows) else {}
        entries = []
        for row in rows:
            kind = NODE_TYPE_TO_KIND.get(row["type"])
            if kind is None or not row["entity_id"] or not row["name"]:
                continue
            key = row["key"] or row["name"]
            extra = descriptions.get(str(key).upper(), ()) if kind == "product" else ()
            aliases = _unique(a for a in (*row["aliases"], *extra)
                              if isinstance(a, str) and a and a not in (row["name"], key))
            entries.append(CatalogEntry(kind=kind, entity_id=row["entity_id"], key=key, name=row["name"],
                                        aliases=aliases[:_ALIAS_CAP]))
        entries.sort(key=lambda e: (e.kind, e.name.lower(), e.entity_id))
        return tuple(entries)

    def _graph_rows(self, tenant_id: str) -> list[dict[str, Any]]:
        params = serving_params(tenant_id)

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            result = tx.run(_ENTITIES_CYPHER, tenant=tenant_id, types=list(NODE_TYPE_TO_KIND), **params)
            return [record.data() for record in result]

        try:
            with self._driver.session(default_access_mode=neo4j.READ_ACCESS) as session:
                return session.execute_read(neo4j.unit_of_work(timeout=self._timeout_s)(work))
        except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired,
                neo4j_errors.TransientError, neo4j_errors.DatabaseUnavailable) as exc:
            raise Transient(f"neo4j unavailable while loading the catalog: {exc}") from exc
        except neo4j_errors.ClientError as exc:
            # A Neo4j that has just restarted can take longer than the timeout for its first
            # reads: the server ends the transaction with a *client* error code. That is the store
            # being slow, not a bad request: route without the catalog, as when it is down.
            if "TransactionTimedOut" in (exc.code or ""):
                raise Transient(f"neo4j did not answer the catalog read within {self._timeout_s:.1f} s: "
                                f"{exc.code}") from exc
            raise

    def _product_descriptions(self, tenant_id: str) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, true)",
                         (str(max(50, int(self._timeout_s * 1000))),))
            for code, description in conn.execute(_PRODUCT_DESCRIPTIONS_SQL, {"tenant": tenant_id}):
                found.setdefault(code, []).append(description.strip())
        return {code: _unique(sorted(d for d in descs if d)) for code, descs in found.items()}


_CACHE_CAP = 512


def _evict_expired(cache: dict[Any, tuple[float, Any]], now: float) -> None:
    """Keep a cache of many readers bounded: past `_CACHE_CAP` entries, drop the expired ones,
    then the oldest."""
    if len(cache) < _CACHE_CAP:
        return
    for key in [k for k, (until, _) in cache.items() if until <= now]:
        del cache[key]
    while len(cache) >= _CACHE_CAP:
        del cache[next(iter(cache))]


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        seen.setdefault(value, None)
    return tuple(seen)
