"""PostgreSQL graph store (embedded profile): `PostgresGraphStore`, the graph as tables.

The same port and model as `Neo4jGraphStore` (`GraphStore` + `ServingMarks`), on the tables of
migration 7 (`pg_schema`):

- `graph_entities` - one row per (tenant, entity id), shared by every document naming the
  entity: type, label (validated `manifest.graph_label`), canonical key, name, aliases,
  properties (canonical JSON). `name` and `properties_json` are last-writer-wins; `aliases`
  accumulate (first-seen order, no repeats), as in Neo4j.
- `graph_versions` - one row per loaded (tenant, document, version): the `DocumentVersion` node.
- `graph_mentions` - the `MENTIONED_IN` links: one row per (version, mention key), with chunk,
  record and extraction version (the citation), and the `active` mark.
- `graph_edges` - the typed relationships of one version: relation id, type (UPPER_SNAKE,
  validated), source, target, provenance, `valid_from` / `valid_to` (dates; `valid_to` is the
  LAST valid day, inclusive), properties (canonical JSON) and the `active` mark.

Guarantees (in addition to `manifold.shared.ports`):
- The manifest's `store` is `"neo4j"` (the graph slot of the load notice) and its kinds,
  ids and checksum inputs are Neo4j's (`entity_hash` over type, key and mention links;
  `relation_hash` over the stored edge), so both adapters report equal manifests.
- `write_version` and `delete_version` are each one transaction (ingest role, tenant set for
  it; every statement also names `tenant_id`). Upserts keyed by the deterministic ids; a replay
  rewrites no row. Mentions and edges of this version that `doc` no longer has are deleted.
  An edge whose type or ends changed under the same relation id is replaced (one row per id).
  After either, entities left with no mention and no edge at all are removed; entities still
  named or joined by another version stay.
- `write_version` never changes an existing row's `active` mark; `set_serving` flips the marks
  of the version's edges, mention links and version row in one transaction; idempotent.
- `entity_types` / `relation_types`, when given, are the controlled vocabulary (`BadInput`).
- `tenants()` (the reconciler's sweep) reads the security-definer function of migration 9.
- Unreachable server or aborted transaction: `Transient`. Nothing connects at construction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.pg_text import sweep_tenants

__all__ = ["PG_GRAPH_MODEL_VERSION", "STORE_SLOT", "PostgresGraphStore"]

STORE_SLOT = "neo4j"
"""The `StoreManifest.store` this adapter reports: the graph slot of the load notice."""

PG_GRAPH_MODEL_VERSION = "1"

_KEY = "tenant_id = %(tenant)s AND document_id = %(document_id)s AND version = %(version)s"

_UPSERT_VERSION = """
INSERT INTO manifold.graph_versions (tenant_id, document_id, version, content_sha256, config_fingerprint,
                                     graph_schema_version, graph_model_version)
VALUES (%(tenant)s, %(document_id)s, %(version)s, %(sha)s, %(fp)s, %(graph_schema)s, %(graph_model)s)
ON CONFLICT (tenant_id, document_id, version) DO UPDATE SET
    content_sha256 = EXCLUDED.content_sha256, config_fingerprint = EXCLUDED.config_fingerprint,
    graph_schema_version = EXCLUDED.graph_schema_version, graph_model_version = EXCLUDED.graph_model_version
WHERE (graph_versions.content_sha256, graph_versions.config_fingerprint, graph_versions.graph_schema_version,
       graph_versions.graph_model_version) IS DISTINCT FROM
      (EXCLUDED.content_sha256, EXCLUDED.config_fingerprint, EXCLUDED.graph_schema_version,
       EXCLUDED.graph_model_version)
"""
_UPSERT_ENTITY = """
INSERT INTO manifold.graph_entities AS e (tenant_id, entity_id, type, label, canonical_key, name, aliases,
                                          properties_json)
VALUES (%(tenant)s, %(entity_id)s, %(type)s, %(label)s, %(canonical_key)s, %(name)s, %(aliases)s,
        %(properties_json)s)
ON CONFLICT (tenant_id, entity_id) DO UPDATE SET
    type = EXCLUDED.type, label = EXCLUDED.label, canonical_key = EXCLUDED.canonical_key, name = EXCLUDED.name,
    aliases = e.aliases || ARRAY(SELECT a FROM unnest(EXCLUDED.aliases) WITH ORDINALITY AS u(a, i)
                                 WHERE NOT (a = ANY(e.aliases)) ORDER BY i),
    properties_json = EXCLUDED.properties_json
WHERE (e.type, e.label, e.canonical_key, e.name, e.properties_json) IS DISTINCT FROM
      (EXCLUDED.type, EXCLUDED.label, EXCLUDED.canonical_key, EXCLUDED.name, EXCLUDED.properties_json)
   OR NOT (EXCLUDED.aliases <@ e.aliases)
"""
_DROP_STALE_MENTIONS = (f"DELETE FROM manifold.graph_mentions WHERE {_KEY} AND NOT (mention_key = ANY(%(keep)s)) "
                        "RETURNING entity_id")
_UPSERT_MENTION = """
INSERT INTO manifold.graph_mentions AS m (tenant_id, document_id, version, mention_key, entity_id, chunk_id,
                                          record_id, extraction_version)
VALUES (%(tenant)s, %(document_id)s, %(version)s, %(mention_key)s, %(entity_id)s, %(chunk_id)s, %(record_id)s,
        %(extraction_version)s)
ON CONFLICT (tenant_id, document_id, version, mention_key) DO UPDATE SET
    entity_id = EXCLUDED.entity_id, chunk_id = EXCLUDED.chunk_id, record_id = EXCLUDED.record_id,
    extraction_version = EXCLUDED.extraction_version
WHERE (m.entity_id, m.chunk_id, m.record_id, m.extraction_version) IS DISTINCT FROM
      (EXCLUDED.entity_id, EXCLUDED.chunk_id, EXCLUDED.record_id, EXCLUDED.extraction_version)
"""
_DROP_STALE_EDGES = f"DELETE FROM manifold.graph_edges WHERE {_KEY} AND NOT (relation_id = ANY(%(keep)s))"
_EDGE_ENDS = f"SELECT source_id, target_id FROM manifold.graph_edges WHERE {_KEY}"
_UPSERT_EDGE = """
INSERT INTO manifold.graph_edges AS r (tenant_id, document_id, version, relation_id, type, source_id, target_id,
                                       chunk_id, record_id, extraction_version, valid_from, valid_to,
                                       properties_json)
VALUES (%(tenant)s, %(document_id)s, %(version)s, %(relation_id)s, %(type)s, %(source_id)s, %(target_id)s,
        %(chunk_id)s, %(record_id)s, %(extraction_version)s, %(valid_from)s, %(valid_to)s, %(properties_json)s)
ON CONFLICT (tenant_id, document_id, version, relation_id) DO UPDATE SET
    type = EXCLUDED.type, source_id = EXCLUDED.source_id, target_id = EXCLUDED.target_id,
    chunk_id = EXCLUDED.chunk_id, record_id = EXCLUDED.record_id, extraction_version = EXCLUDED.extraction_version,
    valid_from = EXCLUDED.valid_from, valid_to = EXCLUDED.valid_to, properties_json = EXCLUDED.properties_json,
    active = CASE WHEN (r.type, r.source_id, r.target_id) = (EXCLUDED.type, EXCLUDED.source_id, EXCLUDED.target_id)
                  THEN r.active ELSE false END
WHERE (r.type, r.source_id, r.target_id, r.chunk_id, r.record_id, r.extraction_version, r.valid_from, r.valid_to,
       r.properties_json) IS DISTINCT FROM
      (EXCLUDED.type, EXCLUDED.source_id, EXCLUDED.target_id, EXCLUDED.chunk_id, EXCLUDED.record_id,
       EXCLUDED.extraction_version, EXCLUDED.valid_from, EXCLUDED.valid_to, EXCLUDED.properties_json)
"""
_DROP_EDGES = f"DELETE FROM manifold.graph_edges WHERE {_KEY} RETURNING source_id, target_id"
_DROP_VERSION = f"DELETE FROM manifold.graph_mentions WHERE {_KEY} RETURNING entity_id"
_DROP_VERSION_ROW = f"DELETE FROM manifold.graph_versions WHERE {_KEY}"
_DROP_ORPHANS = """
DELETE FROM manifold.graph_entities e
WHERE e.tenant_id = %(tenant)s AND e.entity_id = ANY(%(touched)s)
  AND NOT EXISTS (SELECT 1 FROM manifold.graph_mentions m WHERE m.tenant_id = e.tenant_id AND m.entity_id = e.entity_id)
  AND NOT EXISTS (SELECT 1 FROM manifold.graph_edges r WHERE r.tenant_id = e.tenant_id
                  AND (r.source_id = e.entity_id OR r.target_id = e.entity_id))
"""
_READ_ENTITIES = """
SELECT e.entity_id, e.type, e.canonical_key, array_agg(ARRAY[m.chunk_id, m.record_id, m.extraction_version])
FROM manifold.graph_mentions m
JOIN manifold.graph_entities e ON e.tenant_id = m.tenant_id AND e.entity_id = m.entity_id
WHERE m.tenant_id = %(tenant)s AND m.document_id = %(document_id)s AND m.version = %(version)s
GROUP BY e.entity_id, e.type, e.canonical_key
"""
_READ_EDGES = f"""
SELECT relation_id, type, source_id, target_id, properties_json, valid_from, valid_to, chunk_id, record_id,
       extraction_version
FROM manifold.graph_edges WHERE {_KEY}
"""
_IN_KEYS = ("tenant_id = %(tenant)s AND (document_id, version) IN "
            "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[]))")
_READ_ENTITIES_MANY = """
SELECT m.document_id, m.version, e.entity_id, e.type, e.canonical_key,
       array_agg(ARRAY[m.chunk_id, m.record_id, m.extraction_version])
FROM manifold.graph_mentions m
JOIN manifold.graph_entities e ON e.tenant_id = m.tenant_id AND e.entity_id = m.entity_id
WHERE m.tenant_id = %(tenant)s AND (m.document_id, m.version) IN
      (SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[]))
GROUP BY m.document_id, m.version, e.entity_id, e.type, e.canonical_key
"""
_READ_EDGES_MANY = f"""
SELECT document_id, version, relation_id, type, source_id, target_id, properties_json, valid_from, valid_to,
       chunk_id, record_id, extraction_version
FROM manifold.graph_edges WHERE {_IN_KEYS}
"""
_SET_ACTIVE = [
    f"UPDATE manifold.{t} x SET active = %(active)s "
    "FROM unnest(%(documents)s::text[], %(versions)s::integer[]) AS k(document_id, version) "
    "WHERE x.tenant_id = %(tenant)s AND x.document_id = k.document_id AND x.version = k.version "
    "AND x.active IS DISTINCT FROM %(active)s"
    for t in ("graph_edges", "graph_mentions", "graph_versions")
]
_PER_VERSION = """
SELECT document_id, version, count(*), count(*) FILTER (WHERE active) FROM (
    SELECT document_id, version, active FROM manifold.graph_edges WHERE tenant_id = %(tenant)s
    UNION ALL
    SELECT document_id, version, active FROM manifold.graph_mentions WHERE tenant_id = %(tenant)s
) links GROUP BY document_id, version
UNION ALL
SELECT document_id, version, 0, 0 FROM manifold.graph_versions WHERE tenant_id = %(tenant)s
"""


class PostgresGraphStore:
    """`GraphStore` + `ServingMarks` on PostgreSQL (see the module docstring).

    `conninfo` must log in as `manifold_ingest`.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10,
                 entity_types: Collection[str] | None = None,
                 relation_types: Collection[str] | None = None) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)
        self._entity_types = frozenset(entity_types) if entity_types is not None else None
        self._relation_types = frozenset(relation_types) if relation_types is not None else None

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every call of this thread for `tenant_id` inside the block in one transaction
        (`TenantConnections.batch`): a batch of `write_version`s commits once."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, **kwargs: Any) -> PostgresGraphStore:
        return cls(settings.postgres.ingest_conninfo(), **kwargs)

    # ------------------------------------------------------------------ write

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        mf.validate(doc)
        mf.check_vocabulary(doc, self._entity_types, self._relation_types)
        ref, v = doc.doc, doc.versions
        key = {"tenant": ref.tenant_id, "document_id": ref.document_id, "version": ref.version}
        entities = [
            {**key, "entity_id": e.entity_id, "type": e.type, "label": mf.graph_label(e.type),
             "canonical_key": e.canonical_key, "name": e.name, "aliases": list(dict.fromkeys(e.aliases)),
             "properties_json": mf.canonical_json(e.properties)}
            for e in doc.entities
        ]
        mentions = [
            {**key, "entity_id": e.entity_id, "mention_key": mf.mention_key(e.entity_id, m),
             "chunk_id": m[0], "record_id": m[1], "extraction_version": m[2]}
            for e in doc.entities
            for m in sorted(mf.entity_mentions(e, v.extraction), key=mf.canonical_json)
        ]
        relations = [
            {**key, "relation_id": r.relation_id, "type": mf.check_relation_type(r.type),
             "source_id": r.source_id, "target_id": r.target_id, "chunk_id": r.provenance.chunk_id,
             "record_id": r.provenance.record_id, "extraction_version": r.provenance.extraction_version,
             "valid_from": r.valid_from, "valid_to": r.valid_to,
             "properties_json": mf.relation_properties_json(r)}
            for r in doc.relations
        ]
        with self._db.transaction(ref.tenant_id) as conn:
            conn.execute(_UPSERT_VERSION, {**key, "sha": ref.content_sha256, "fp": v.fingerprint(),
                                           "graph_schema": v.graph_schema, "graph_model": PG_GRAPH_MODEL_VERSION})
            touched: set[str] = set()
            with conn.cursor() as cur:
                cur.executemany(_UPSERT_ENTITY, entities)
                cur.execute(_DROP_STALE_MENTIONS, {**key, "keep": [m["mention_key"] for m in mentions]})
                touched |= {r[0] for r in cur.fetchall()}
                cur.executemany(_UPSERT_MENTION, mentions)
                # every end this version's edges had before (an edge may lose or change its ends)
                touched |= {end for row in cur.execute(_EDGE_ENDS, key).fetchall() for end in row}
                cur.execute(_DROP_STALE_EDGES, {**key, "keep": [r["relation_id"] for r in relations]})
                cur.executemany(_UPSERT_EDGE, relations)
            if touched:
                conn.execute(_DROP_ORPHANS, {**key, "touched": sorted(touched)})
            return self._read_manifest(conn, key)

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id) as conn:
            touched = {end for row in conn.execute(_DROP_EDGES, key).fetchall() for end in row}
            touched |= {r[0] for r in conn.execute(_DROP_VERSION, key).fetchall()}
            conn.execute(_DROP_VERSION_ROW, key)
            if touched:
                conn.execute(_DROP_ORPHANS, {**key, "touched": sorted(touched)})

    # ------------------------------------------------------------------ manifest

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return self._read_manifest(conn, key)

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """Every key's manifest from one snapshot: one query for entities, one for edges."""
        mf.check_tenant(tenant_id)
        if not keys:
            return {}
        documents, versions = vb.key_arrays(keys)
        args = {"tenant": tenant_id, "documents": documents, "versions": versions}
        entities: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        edges: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            for d, v, eid, etype, ckey, mentions in conn.execute(_READ_ENTITIES_MANY, args).fetchall():
                entities[(d, int(v))].append((eid, mf.entity_hash(etype, ckey, (tuple(m) for m in mentions))))
            for d, v, rid, rtype, src, dst, props, vf, vt, ch, rec, ev in conn.execute(_READ_EDGES_MANY, args):
                edges[(d, int(v))].append((rid, mf.relation_hash(
                    rel_type=rtype, source_id=src, target_id=dst, properties_json=props, valid_from=vf,
                    valid_to=vt, chunk_id=ch, record_id=rec, extraction_version=ev)))
        return {k: mf.build_manifest(STORE_SLOT, mf.NEO4J_KINDS, {"entities": entities[k], "edges": edges[k]})
                for k in keys}

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """One transaction for the batch, each version in its own savepoint (`batch`)."""
        tenant = vb.one_tenant(docs)
        if tenant is None:
            return []
        with self.batch(tenant):
            return vb.write_each(self.write_version, docs)

    @staticmethod
    def _read_manifest(conn: psycopg.Connection[Any], key: dict[str, Any]) -> StoreManifest:
        entities = [
            (eid, mf.entity_hash(etype, ckey, (tuple(m) for m in mentions)))
            for eid, etype, ckey, mentions in conn.execute(_READ_ENTITIES, key).fetchall()
        ]
        edges = [
            (rid, mf.relation_hash(rel_type=rtype, source_id=src, target_id=dst, properties_json=props,
                                   valid_from=vf, valid_to=vt, chunk_id=ch, record_id=rec, extraction_version=ev))
            for rid, rtype, src, dst, props, vf, vt, ch, rec, ev in conn.execute(_READ_EDGES, key).fetchall()
        ]
        return mf.build_manifest(STORE_SLOT, mf.NEO4J_KINDS, {"entities": entities, "edges": edges})

    # ------------------------------------------------------------------ serving marks (publisher)

    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None:
        """Set `active` on this version's edges, mention links and version row, in one
        transaction; idempotent. `write_version` keeps the marks of unchanged rows."""
        self.set_serving_many(tenant_id, [(document_id, version)], serving)

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        """`set_serving` for every version in one transaction: one statement per table for the
        whole batch; idempotent."""
        mf.check_tenant(tenant_id)
        if not keys:
            return
        documents, versions = vb.key_arrays(keys)
        args = {"tenant": tenant_id, "documents": documents, "versions": versions, "active": bool(serving)}
        with self._db.transaction(tenant_id) as conn:
            for statement in _SET_ACTIVE:
                conn.execute(statement, args)

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        out: dict[tuple[str, int], tuple[int, int]] = {}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            for d, v, total, on in conn.execute(_PER_VERSION, {"tenant": tenant_id}).fetchall():
                k = (d, int(v))
                t0, o0 = out.get(k, (0, 0))
                out[k] = (t0 + int(total), o0 + int(on))
        return out

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return set(self._per_version(tenant_id))

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return mf.serving_drift(self._per_version(tenant_id), active)

    def tenants(self) -> set[str]:
        """Every tenant with a version or entity in the graph (for the reconciler's sweep)."""
        return sweep_tenants(self._db, "graph_tenants")
