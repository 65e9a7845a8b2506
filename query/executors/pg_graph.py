"""`graph_expand` over the PostgreSQL edges table (embedded profile).

Same parameters, `StepResult` and rules as `graph.GraphExpandExecutor` (Neo4j):

- **Constant SQL.** `EXPAND_SQL[direction]`: two constant statements (out / in), a recursive
  CTE whose depth counter stops at the validated `max_hops` (1..`HOP_CAP`); relation types,
  ids, dates and limits are parameters. Types are validated by `graph.validate_relations`
  (the plan's allowlist intersected with the ingest vocabulary) before the database is touched.
- **Cycle guard = Neo4j's path semantics.** A path never uses the same edge twice (the CTE
  carries the path's edge ids and refuses a repeat); nodes may repeat, the start must be one of
  `from_ids` and the target must not be. So both adapters enumerate the same paths.
- **Tenant and active on every edge.** Every edge has `tenant_id = %(tenant)s AND active`
  (the publisher's mark), and the query role's restrictive row-level policy keeps only edges of
  versions ACTIVE in the manifest. The tenant is only the `tenant_id` argument.
- **Time validity.** With `valid_during = [start, end)` an edge must overlap it; stored
  `valid_to` is the last valid day (inclusive): `(valid_from IS NULL OR valid_from < end) AND
  (valid_to IS NULL OR valid_to >= start)`.
- **Bounded.** At most `fanout_cap` targets by (name, entity id) (`fanout_cap + 1` fetched to
  detect the cap: a `capped` gap), at most `PATHS_PER_TARGET` paths per target (ordered by their
  edge ids); a statement timeout from min(statement timeout, step budget) -> `TimeoutError`.
- **Final active check** against the manifest (`active_versions` + `check_hits_active`), as in
  graph.py; output order: targets by (name, entity id), evidence by edge id.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import psycopg

from manifold.query.executors.graph import cut_targets, expansion_args, graph_result
from manifold.query.plan import GraphExpandParams
from manifold.query.types import StepResult
from manifold.shared.config import ManifoldSettings
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import active_versions, check_hits_active

__all__ = ["EXPAND_SQL", "PgGraphExpandExecutor"]

_EXPAND = """
WITH RECURSIVE walk (start_id, node_id, depth, edge_ids, node_ids) AS (
    SELECT e.__FROM__, e.__TO__, 1, ARRAY[e.relation_id], ARRAY[e.__FROM__, e.__TO__]
    FROM manifold.graph_edges e
    WHERE e.tenant_id = %(tenant)s AND e.active AND e.type = ANY(%(types)s::text[])
      AND e.__FROM__ = ANY(%(from_ids)s::text[]) __VALID__
  UNION ALL
    SELECT w.start_id, e.__TO__, w.depth + 1, w.edge_ids || e.relation_id, w.node_ids || e.__TO__
    FROM walk w
    JOIN manifold.graph_edges e ON e.tenant_id = %(tenant)s AND e.__FROM__ = w.node_id
    WHERE w.depth < %(hops)s AND e.active AND e.type = ANY(%(types)s::text[])
      AND NOT (e.relation_id = ANY(w.edge_ids)) __VALID__
), reached AS (
    SELECT w.node_id, w.edge_ids, w.node_ids FROM walk w WHERE NOT (w.node_id = ANY(%(from_ids)s::text[]))
), targets AS (
    SELECT t.entity_id, t.canonical_key, t.name, t.type, count(*) AS path_count
    FROM reached r JOIN manifold.graph_entities t ON t.tenant_id = %(tenant)s AND t.entity_id = r.node_id
    GROUP BY t.entity_id, t.canonical_key, t.name, t.type
    ORDER BY t.name, t.entity_id LIMIT %(limit)s
)
SELECT t.entity_id, t.canonical_key, t.name, t.type, t.path_count, p.edge_ids, p.node_ids
FROM targets t
CROSS JOIN LATERAL (
    SELECT r.edge_ids, r.node_ids FROM reached r WHERE r.node_id = t.entity_id
    ORDER BY r.edge_ids LIMIT %(paths_per_target)s
) p
ORDER BY t.name, t.entity_id, p.edge_ids
"""
_VALID = ("AND (%(start)s::date IS NULL OR ((e.valid_from IS NULL OR e.valid_from < %(end)s::date) "
          "AND (e.valid_to IS NULL OR e.valid_to >= %(start)s::date)))")

EXPAND_SQL: dict[str, str] = {
    "out": _EXPAND.replace("__FROM__", "source_id").replace("__TO__", "target_id").replace("__VALID__", _VALID),
    "in": _EXPAND.replace("__FROM__", "target_id").replace("__TO__", "source_id").replace("__VALID__", _VALID),
}
"""direction -> the constant SQL text of that traversal."""

_EDGES = """
SELECT relation_id, type, source_id, target_id, document_id, version, chunk_id, record_id, valid_from, valid_to
FROM manifold.graph_edges WHERE tenant_id = %(tenant)s AND active AND relation_id = ANY(%(ids)s::text[])
"""
_NODES = ("SELECT entity_id, name, type FROM manifold.graph_entities "
          "WHERE tenant_id = %(tenant)s AND entity_id = ANY(%(ids)s::text[])")


class PgGraphExpandExecutor:
    """Expands from entity ids along allowlisted relationships in PostgreSQL (module docstring).

    `connections` must connect as the query role."""

    def __init__(self, connections: TenantConnections, settings: ManifoldSettings) -> None:
        self._db = connections
        self._timeout_ms = settings.query.statement_timeout_ms

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> PgGraphExpandExecutor:
        return cls(TenantConnections(settings.postgres.query_conninfo()), settings)

    def run(self, params: GraphExpandParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        checked = expansion_args(params, tenant_id)
        if isinstance(checked, StepResult):
            return checked
        args = checked
        hops, types = args["hops"], tuple(args["types"])
        timeout_ms = max(1, int(min(self._timeout_ms / 1000.0, timeout_s) * 1000))
        started = time.perf_counter()
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            try:
                conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(timeout_ms),))
                raw = conn.execute(EXPAND_SQL[params.direction], args).fetchall()
                edge_ids = sorted({eid for r in raw for eid in r[5]})
                node_ids = sorted({nid for r in raw for nid in r[6]})
                edges = {r[0]: _edge_row(r) for r in conn.execute(_EDGES, {"tenant": tenant_id, "ids": edge_ids})}
                nodes = {r[0]: {"entity_id": r[0], "name": r[1], "type": r[2]}
                         for r in conn.execute(_NODES, {"tenant": tenant_id, "ids": node_ids})}
                documents = sorted({e["document_id"] for e in edges.values() if e["document_id"]})
                active = active_versions(conn, tenant_id, documents)
            except psycopg.errors.QueryCanceled as exc:
                raise TimeoutError(f"graph traversal exceeded its timeout of {timeout_ms} ms") from exc
        retrieved_at = datetime.now(timezone.utc)
        store_ms = (time.perf_counter() - started) * 1000.0

        rows: list[dict[str, Any]] = []
        for entity_id, key, name, etype, path_count, path_edges, path_nodes in raw:
            if not rows or rows[-1]["entity_id"] != entity_id:
                rows.append({"entity_id": entity_id, "key": key, "name": name, "type": etype,
                             "path_count": int(path_count), "paths": []})
            rows[-1]["paths"].append({"nodes": [nodes[n] for n in path_nodes],
                                      "edges": [edges[e] for e in path_edges]})
        rows, gaps = cut_targets(rows, params.fanout_cap)
        used_edges = {e["edge_id"]: e for r in rows for p in r["paths"] for e in p["edges"]}
        kept_edges = {e["edge_id"]: e for e in check_hits_active(list(used_edges.values()), active)}
        dropped = len(used_edges) - len(kept_edges)

        return graph_result(rows, kept_edges, dropped, params, types, hops, gaps=gaps, store="postgres",
                            tenant_id=tenant_id, retrieved_at=retrieved_at, store_ms=store_ms)


def _edge_row(r: tuple[Any, ...]) -> dict[str, Any]:
    rid, rtype, src, dst, document_id, version, chunk_id, record_id, vf, vt = r
    return {"edge_id": rid, "type": rtype, "source": src, "target": dst, "document_id": document_id,
            "version": int(version), "chunk_id": chunk_id, "record_id": record_id,
            "valid_from": vf.isoformat() if vf is not None else None,
            "valid_to": vt.isoformat() if vt is not None else None}


