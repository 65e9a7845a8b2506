"""Read side of the publication lifecycle: how query code sees only ACTIVE versions.

The manifest (`version_manifest`) is the one source of truth; each store carries a mark that
query code filters on, and a final check against the manifest runs on the fused hits:

- **PostgreSQL**: the query role reads the `serving_*` views (`SERVING_VIEWS`), which join each
  table to `version_manifest` with `state = 'active'`; activation flips them in one transaction.
- **Elasticsearch**: every chunk of the active version has `serving: true`, everything else
  `false` or none. Queries put `es_active_filter(tenant)` in their bool filter.
- **Neo4j**: relationships, MENTIONED_IN links and the DocumentVersion node of the active
  version have `active = true`. Queries add `cypher_active(var)` for every relationship var.

The ES and Neo4j marks are flipped outside the PostgreSQL transaction (the new version is
marked before activation, the old one unmarked after it), so for a moment both may be marked.
`check_hits_active(hits, active)` with `active` read from the manifest (`active_versions`)
closes that window: a hit survives only if its (document, version) is active right now. Query
workers must run it on every fused result, so a reader never sees a mix of versions.

Per-document access (issue 29): query executors use `es_serving_filter(tenant)` and
`cypher_serving(var)` + `serving_params(tenant)`, which add the ACL of the reader entered for
the request (`shared/access.py`) to the same filters; without a reader they raise (fail closed).
In PostgreSQL the query role's RLS policies do the same from the transaction's principal, and
`active_versions` (the final check) runs under them, so it drops a document revoked mid-request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg

from manifold.shared import access
from manifold.shared.stores.manifest import check_tenant
from manifold.shared.stores.pg_schema import SERVING_VIEWS

__all__ = ["SERVING_VIEWS", "active_versions", "check_hits_active", "cypher_active", "cypher_serving",
           "es_active_filter", "es_serving_filter", "serving_params"]

H = TypeVar("H")


def active_versions(conn: psycopg.Connection[Any], tenant_id: str,
                    document_ids: Sequence[str] | None = None) -> dict[str, int]:
    """document_id -> active version for the tenant (optionally only `document_ids`), read in the
    caller's transaction (the tenant is set transaction-locally). Works for the query role."""
    check_tenant(tenant_id)
    conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant_id,))
    query = ("SELECT document_id, version FROM manifold.version_manifest "
             "WHERE tenant_id = %s AND state = 'active'")
    params: tuple[Any, ...] = (tenant_id,)
    if document_ids is not None:
        query += " AND document_id = ANY(%s)"
        params += (list(document_ids),)
    return {d: v for d, v in conn.execute(query, params).fetchall()}


def es_active_filter(tenant_id: str) -> list[dict[str, Any]]:
    """The filter clauses every Elasticsearch query must carry: its tenant and serving=true."""
    check_tenant(tenant_id)
    return [{"term": {"tenant_id": tenant_id}}, {"term": {"serving": True}}]


def es_serving_filter(tenant_id: str) -> list[dict[str, Any]]:
    """`es_active_filter` plus the ACL clause of the reader entered for `tenant_id`
    (`access.current`: raises `AccessUnresolved` when there is none). What query executors use."""
    clauses = es_active_filter(tenant_id)
    acl = access.current(tenant_id).es_clause()
    return clauses + ([acl] if acl is not None else [])


def cypher_serving(var: str = "r", tenant_param: str = "tenant") -> str:
    """`cypher_active` AND the relationship's document is readable (`access.cypher_readable`);
    bind `serving_params(tenant_id)` with it."""
    return f"({cypher_active(var, tenant_param)} AND {access.cypher_readable(var)})"


def serving_params(tenant_id: str) -> dict[str, Any]:
    """The parameters `cypher_serving` needs, from the reader entered for `tenant_id`."""
    return access.current(tenant_id).cypher_params()


def cypher_active(var: str = "r", tenant_param: str = "tenant") -> str:
    """A Cypher predicate for a relationship variable: same tenant and marked active."""
    if not var.isidentifier() or not tenant_param.isidentifier():
        raise ValueError("variable and parameter names must be identifiers")
    return f"({var}.tenant_id = ${tenant_param} AND {var}.active = true)"


def _key(hit: Any) -> tuple[str | None, int | None]:
    source = hit.get("_source", hit) if isinstance(hit, Mapping) else hit
    if isinstance(source, Mapping):
        return source.get("document_id"), source.get("version")
    return getattr(source, "document_id", None), getattr(source, "version", None)


def check_hits_active(hits: Iterable[H], active: Mapping[str, int]) -> list[H]:
    """The final check: keep only hits whose (document_id, version) is the active version in
    `active` (from `active_versions`). Hits are mappings (ES hits with `_source`, rows as
    dicts) or objects with `document_id` and `version` attributes; a hit naming no version is
    dropped."""
    kept = []
    for hit in hits:
        document_id, version = _key(hit)
        if document_id is not None and version is not None and active.get(document_id) == int(version):
            kept.append(hit)
    return kept
