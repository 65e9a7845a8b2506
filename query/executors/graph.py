"""`graph_expand`: bounded, tenant-scoped, active-only traversal over allowlisted relationships.

Guarantees:
- **Templates only.** The Cypher text is one of `TEMPLATES[(direction, max_hops)]`: six constant
  strings written here (out/in x 1..3 hops, the bound a literal). Relationship types, entity
  ids, dates and limits are parameters (`type(r) IN $types`); no caller input is ever
  interpolated into Cypher. Relation types are validated again here against `plan.Relation`
  and the ingest vocabulary (`RELATIONS`); anything else raises `ValueError` before the
  database is touched (`MENTIONED_IN` and other non-vocabulary types can never be traversed).
- **Tenant and active on every element.** Every node on the path has `tenant_id = $tenant`;
  every relationship satisfies `tenant_id = $tenant AND active = true` and its document is
  readable by the request's reader (`cypher_serving`; the `cypher_active`
  predicate, applied through `all(r IN relationships(p) ...)`). The tenant is only the
  `tenant_id` keyword argument.
- **Time validity.** With `valid_during = [start, end)`, an edge must overlap it. Stored
  `valid_to` is the LAST valid day (inclusive), so the edge's interval is the half-open
  `[valid_from, valid_to + 1 day)`, and overlap is
  `(valid_from IS NULL OR valid_from < $end) AND (valid_to IS NULL OR valid_to >= $start)`;
  a missing bound is open-ended, and non-temporal edges carry neither bound so always pass.
- **Bounded.** At most `fanout_cap` distinct targets (the query fetches `fanout_cap + 1` to
  detect the cap and reports a `capped` gap) and at most `PATHS_PER_TARGET` paths per target;
  READ session (`execute_read`) with a transaction timeout = min(statement timeout, step
  timeout); a timeout raises `TimeoutError`, an unreachable server `Transient`.
- **Final active check.** After the traversal, the (document_id, version) of every edge is
  checked against the manifest (`active_versions`, via the read-only query role) with
  `check_hits_active`; an edge of a version that is no longer active is dropped, with every
  path through it, and a target left with no path is dropped. `result["dropped_inactive"]`
  counts the dropped edges.
- **Provenance kept, targets deduplicated.** A fact repeated by several documents (e.g.
  SUPPLIES from an agreement and from an invoice) yields one target and one edge evidence per
  relationship (each with its document, version and chunk).
- Output order is deterministic: targets by (name, entity_id), evidence by edge id.
"""

from __future__ import annotations

import time
import typing
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Literal

import neo4j
import psycopg
from neo4j import exceptions as neo4j_errors

from manifold.query.plan import HOP_CAP, GraphExpandParams, Relation
from manifold.query.types import Evidence, Gap, StepResult
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores.manifest import check_tenant
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.serving import active_versions, check_hits_active, cypher_serving, serving_params
from manifold.shared.vocabulary import RELATIONS

__all__ = ["ALLOWED_RELATIONS", "PATHS_PER_TARGET", "TEMPLATES", "GraphExpandExecutor", "graph_result",
           "validate_relations"]

ALLOWED_RELATIONS: frozenset[str] = frozenset(typing.get_args(Relation)) & frozenset(RELATIONS)
"""Relationship types a query may traverse: the plan's allowlist, also known to the vocabulary."""

PATHS_PER_TARGET = 20
"""At most this many paths (with their edges) are returned per target entity."""

_EXPAND_TEMPLATE = (
    "MATCH p = __PATTERN__ "
    "WHERE a.entity_id IN $from_ids AND NOT b.entity_id IN $from_ids "
    "AND all(n IN nodes(p) WHERE n.tenant_id = $tenant) "
    "AND all(r IN relationships(p) WHERE " + cypher_serving("r") + " AND type(r) IN $types "
    "AND ($start IS NULL OR ((r.valid_from IS NULL OR r.valid_from < $end) "
    "AND (r.valid_to IS NULL OR r.valid_to >= $start)))) "
    "WITH b, collect(p) AS ps ORDER BY b.name, b.entity_id LIMIT $limit "
    "RETURN b.entity_id AS entity_id, b.canonical_key AS key, b.name AS name, b.type AS type, "
    "size(ps) AS path_count, "
    "[path IN ps[..$paths_per_target] | {"
    "nodes: [n IN nodes(path) | {entity_id: n.entity_id, name: n.name, type: n.type}], "
    "edges: [r IN relationships(path) | {edge_id: r.relation_id, type: type(r), "
    "source: startNode(r).entity_id, target: endNode(r).entity_id, document_id: r.document_id, "
    "version: r.version, chunk_id: r.chunk_id, record_id: r.record_id, "
    "valid_from: toString(r.valid_from), valid_to: toString(r.valid_to)}]}] AS paths"
)

_PATTERNS: dict[tuple[str, int], str] = {
    ("out", 1): "(a:Entity {tenant_id: $tenant})-[rels*1..1]->(b:Entity {tenant_id: $tenant})",
    ("out", 2): "(a:Entity {tenant_id: $tenant})-[rels*1..2]->(b:Entity {tenant_id: $tenant})",
    ("out", 3): "(a:Entity {tenant_id: $tenant})-[rels*1..3]->(b:Entity {tenant_id: $tenant})",
    ("in", 1): "(a:Entity {tenant_id: $tenant})<-[rels*1..1]-(b:Entity {tenant_id: $tenant})",
    ("in", 2): "(a:Entity {tenant_id: $tenant})<-[rels*1..2]-(b:Entity {tenant_id: $tenant})",
    ("in", 3): "(a:Entity {tenant_id: $tenant})<-[rels*1..3]-(b:Entity {tenant_id: $tenant})",
}

TEMPLATES: dict[tuple[str, int], str] = {
    key: _EXPAND_TEMPLATE.replace("__PATTERN__", pattern) for key, pattern in _PATTERNS.items()
}
"""(direction, max_hops) -> the constant Cypher text for that traversal."""


def validate_relations(relation: str | Sequence[str]) -> tuple[str, ...]:
    """The relation(s) as a sorted tuple, each checked against `ALLOWED_RELATIONS`."""
    values = (relation,) if isinstance(relation, str) else tuple(relation)
    if not values:
        raise ValueError("graph_expand needs at least one relation")
    bad = [v for v in values if not isinstance(v, str) or v not in ALLOWED_RELATIONS]
    if bad:
        raise ValueError(f"relation(s) {bad!r} are not allowed; allowed: {', '.join(sorted(ALLOWED_RELATIONS))}")
    return tuple(sorted(set(values)))


class GraphExpandExecutor:
    """Expands from entity ids along allowlisted relationships (see the module docstring)."""

    def __init__(self, driver: neo4j.Driver, connections: TenantConnections, settings: ManifoldSettings) -> None:
        self._driver = driver
        self._db = connections
        self._timeout_ms = settings.query.statement_timeout_ms

    def run(self, params: GraphExpandParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        checked = expansion_args(params, tenant_id)
        if isinstance(checked, StepResult):
            return checked
        query_params = checked
        hops, types = query_params["hops"], tuple(query_params["types"])
        timeout = max(0.001, min(self._timeout_ms / 1000.0, timeout_s))
        started = time.perf_counter()
        rows = self._read(TEMPLATES[(params.direction, hops)], {**query_params, **serving_params(tenant_id)}, timeout)
        retrieved_at = datetime.now(timezone.utc)
        rows, gaps = cut_targets(rows, params.fanout_cap)

        edges = {e["edge_id"]: e for r in rows for path in r["paths"] for e in path["edges"]}
        documents = sorted({e["document_id"] for e in edges.values() if e["document_id"]})
        remaining_ms = int((timeout - (time.perf_counter() - started)) * 1000)
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            try:
                conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(max(1, remaining_ms)),))
                active = active_versions(conn, tenant_id, documents)
            except psycopg.errors.QueryCanceled as exc:
                raise TimeoutError("the final active-version check exceeded the step timeout") from exc
        store_ms = (time.perf_counter() - started) * 1000.0
        kept_edges = {e["edge_id"]: e for e in check_hits_active(list(edges.values()), active)}
        dropped = len(edges) - len(kept_edges)

        return graph_result(rows, kept_edges, dropped, params, types, hops, gaps=gaps, store="neo4j",
                            tenant_id=tenant_id, retrieved_at=retrieved_at, store_ms=store_ms)

    def _read(self, text: str, parameters: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(text, parameters)]

        try:
            with self._driver.session(default_access_mode=neo4j.READ_ACCESS) as session:
                return session.execute_read(neo4j.unit_of_work(timeout=timeout)(work))
        except neo4j_errors.ClientError as exc:
            if "TransactionTimedOut" in (exc.code or "") or "Timeout" in (exc.code or ""):
                raise TimeoutError(f"graph traversal exceeded its timeout of {timeout:.3f} s") from exc
            raise
        except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired,
                neo4j_errors.TransientError) as exc:
            if "Timeout" in (getattr(exc, "code", None) or ""):
                raise TimeoutError(f"graph traversal exceeded its timeout of {timeout:.3f} s") from exc
            raise Transient(f"neo4j unavailable during graph_expand: {exc}") from exc


def expansion_args(params: GraphExpandParams, tenant_id: str) -> dict[str, Any] | StepResult:
    """Checks a `graph_expand` step for both profiles and gives the template parameters.

    Raises `ValueError` on an invalid tenant, relation, direction or hop count, or an unresolved
    `$step` reference; returns the empty result with a `missing_data` gap when no entity id is
    given. The parameters ask for `fanout_cap + 1` targets so that a cut can be reported."""
    check_tenant(tenant_id)
    types = validate_relations(params.relation)
    if params.direction not in ("out", "in"):
        raise ValueError(f"direction {params.direction!r} is not out or in")
    hops = params.max_hops
    if not isinstance(hops, int) or isinstance(hops, bool) or not 1 <= hops <= HOP_CAP:
        raise ValueError(f"max_hops must be an int in 1..{HOP_CAP}")
    if isinstance(params.from_ids, str):
        raise ValueError(f"unresolved reference {params.from_ids!r}: the engine must resolve it first")
    from_ids = sorted({i for i in params.from_ids if isinstance(i, str) and i})
    if not from_ids:
        return StepResult(result={"paths": [], "targets": [], "dropped_inactive": 0},
                          gaps=(Gap(kind="missing_data", detail="graph_expand was given no entity ids"),))
    return {
        "tenant": tenant_id, "from_ids": from_ids, "types": list(types), "hops": hops,
        "start": params.valid_during.start if params.valid_during else None,
        "end": params.valid_during.end if params.valid_during else None,
        "limit": params.fanout_cap + 1, "paths_per_target": PATHS_PER_TARGET,
    }


def cut_targets(rows: list[dict[str, Any]], cap: int) -> tuple[list[dict[str, Any]], list[Gap]]:
    """At most `cap` targets (rows come ordered by name), with a `capped` gap for the cut and one
    naming targets that have more than `PATHS_PER_TARGET` paths."""
    gaps: list[Gap] = []
    if len(rows) > cap:
        rows = rows[:cap]
        gaps.append(Gap(kind="capped", detail=f"more than {cap} entities are reachable; only the first "
                                              f"{cap} (by name) are returned"))
    truncated = [r["name"] for r in rows if r["path_count"] > PATHS_PER_TARGET]
    if truncated:
        gaps.append(Gap(kind="capped", detail=f"only {PATHS_PER_TARGET} paths per target are returned "
                                              f"(more for: {', '.join(map(str, truncated[:5]))})"))
    return rows, gaps


def _edge_evidence(edge: dict[str, Any], tenant_id: str, retrieved_at: datetime,
                   store: Literal["neo4j", "postgres"]) -> Evidence:
    return Evidence(
        evidence_id=f"ev_edge_{edge['edge_id']}", store=store, kind="edge", tenant_id=tenant_id,
        document_id=edge["document_id"], version=edge["version"], chunk_id=edge["chunk_id"],
        record_id=edge["record_id"], edge_id=edge["edge_id"],
        claims={"type": edge["type"], "source": edge["source"], "target": edge["target"],
                "valid_from": edge["valid_from"], "valid_to": edge["valid_to"]},
        retrieved_at=retrieved_at,
    )


def graph_result(rows: list[dict[str, Any]], kept_edges: dict[str, dict[str, Any]], dropped: int,
                 params: GraphExpandParams, types: Sequence[str], hops: int, *, gaps: list[Gap],
                 store: Literal["neo4j", "postgres"], tenant_id: str, retrieved_at: datetime,
                 store_ms: float) -> StepResult:
    """The `StepResult` of a traversal, whichever store ran it: targets that still have a path
    made only of active edges (`kept_edges`), those paths, one evidence item per edge used,
    and a `missing_data` gap when nothing is left. Shared by the Neo4j and PostgreSQL executors
    so both profiles answer identically."""
    targets: list[dict[str, Any]] = []
    paths_out: list[dict[str, Any]] = []
    for r in rows:
        live = [p for p in r["paths"] if all(e["edge_id"] in kept_edges for e in p["edges"])]
        if not live:
            continue
        targets.append({"entity_id": r["entity_id"], "key": r["key"], "name": r["name"], "type": r["type"]})
        for p in live:
            paths_out.append({"target": r["entity_id"], "nodes": p["nodes"],
                              "edges": [e["edge_id"] for e in p["edges"]]})
    used = sorted({eid for p in paths_out for eid in p["edges"]})
    evidence = tuple(_edge_evidence(kept_edges[eid], tenant_id, retrieved_at, store) for eid in used)
    if not targets:
        gaps.append(Gap(kind="missing_data",
                        detail=f"no active {'/'.join(types)} relationship ({params.direction}) from the given "
                               "entities" + (" during the requested period" if params.valid_during else "")))
    return StepResult(
        outputs={"ids": tuple(t["entity_id"] for t in targets),
                 "keys": tuple(t["key"] or t["name"] for t in targets),
                 "names": tuple(t["name"] for t in targets)},
        evidence=evidence,
        result={"targets": targets, "paths": paths_out, "relations": list(types),
                "direction": params.direction, "max_hops": hops, "dropped_inactive": dropped,
                "valid_during": ({"start": params.valid_during.start.isoformat(),
                                  "end": params.valid_during.end.isoformat()} if params.valid_during else None)},
        gaps=tuple(gaps), rows=len(rows), store_ms=store_ms,
    )
