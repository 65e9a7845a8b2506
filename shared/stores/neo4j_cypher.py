"""The Cypher of the Neo4j adapter (`neo4j.py`): the graph model, its schema, every statement.

Graph model (`NEO4J_MODEL_VERSION`):

- `(:Entity:<TypeLabel> {tenant_id, entity_id, type, canonical_key, name, aliases,
  properties_json})` - one node per (tenant, entity id), shared by every document that names
  the entity. Unique on (tenant_id, entity_id). `<TypeLabel>` is the entity type in PascalCase
  (`supplier` -> `Supplier`), ASCII letters only, validated (`manifest.graph_label`).
  `name` and `properties_json` are last-writer-wins; `aliases` accumulate.
- `(:DocumentVersion {tenant_id, document_id, version, content_sha256, config_fingerprint,
  graph_schema_version, graph_model_version})` - one node per loaded version, unique on (tenant, document, version).
- Provenance of entities: `(:Entity)-[:MENTIONED_IN {mention_key, tenant_id, document_id,
  version, chunk_id, record_id, extraction_version}]->(:DocumentVersion)`, one link per
  distinct (chunk, record, extraction version) in the entity's provenance. The chunk id on
  the link is the citation; linking to the version node (rather than a node per chunk) makes a
  version's footprint one node to find and delete.
- Relations: `(:Entity)-[:<TYPE> {relation_id, tenant_id, document_id, version, doc_version,
  chunk_id, record_id, extraction_version, valid_from, valid_to, properties_json}]->(:Entity)`,
  `<TYPE>` UPPER_SNAKE, validated against the pattern and, if given, an allowlist. Edges belong
  to exactly one document version; query workers must keep only edges of active versions.

Guarantees:
- Labels and relationship types of the data are never interpolated: they are validated, then
  passed as parameters with Cypher's dynamic `$(...)` syntax (Neo4j 5.26+). All values are
  parameters. The only interpolated text is the store's own relation ALLOWLIST (the builders
  `version_edges`, `versions_edges`, `edge_indexes`; each type checked UPPER_SNAKE and
  back-quoted): with it, a version's edges are found by one relationship-index seek per type
  (index per type on (tenant_id, document_id, version)), so writing, verifying and publishing a
  version costs its own edges, not a scan of the tenant's graph (which made ingestion quadratic:
  ~0.4 s per call at 10,000 documents of one tenant). Without an allowlist the statements scan
  (tests, ad-hoc use).
- Every MATCH/MERGE names `tenant_id` on the nodes and relationships it touches.
"""

from __future__ import annotations

from collections.abc import Collection

from manifold.shared.stores import manifest as mf

NEO4J_MODEL_VERSION = "1"
"""Version of the physical graph model below (labels, keys, link layout). The vocabulary's own
version is `PipelineVersions.graph_schema`; both are stored on every `DocumentVersion` node."""

SCHEMA_STATEMENTS = (
    "CREATE CONSTRAINT manifold_entity_key IF NOT EXISTS "
    "FOR (e:Entity) REQUIRE (e.tenant_id, e.entity_id) IS UNIQUE",
    "CREATE CONSTRAINT manifold_document_version_key IF NOT EXISTS "
    "FOR (v:DocumentVersion) REQUIRE (v.tenant_id, v.document_id, v.version) IS UNIQUE",
    "CREATE INDEX manifold_entity_tenant IF NOT EXISTS FOR (e:Entity) ON (e.tenant_id)",
)

MERGE_ENTITIES = """
UNWIND $entities AS row
MERGE (e:Entity {tenant_id: $tenant, entity_id: row.entity_id})
SET e:$(row.label), e.type = row.type, e.canonical_key = row.canonical_key, e.name = row.name,
    e.aliases = reduce(acc = coalesce(e.aliases, []), a IN row.aliases |
                       CASE WHEN a IN acc THEN acc ELSE acc + a END),
    e.properties_json = row.properties_json
"""
# A version's edges: with a relation vocabulary, one relationship-index seek per allowlisted type
# (`version_edges`); without one, a scan of the tenant's entities (tests, ad-hoc stores).
_VERSION_EDGES_SCAN = """
MATCH (s:Entity {tenant_id: $tenant})-[r]->(o:Entity {tenant_id: $tenant})
WHERE r.tenant_id = $tenant AND r.document_id = $document_id AND r.version = $version
"""
DROP_EDGES = """
WITH s, r, o WHERE $keep IS NULL OR NOT {relation_id: r.relation_id, type: type(r), source_id: s.entity_id,
                                         target_id: o.entity_id} IN $keep
WITH collect(r) AS rels, collect(DISTINCT s.entity_id) + collect(DISTINCT o.entity_id) AS touched
FOREACH (r IN rels | DELETE r)
RETURN touched
"""
DROP_VERSION_NODE = """
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: $document_id, version: $version})
OPTIONAL MATCH (v)<-[:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WITH v, collect(DISTINCT e.entity_id) AS touched
DETACH DELETE v
RETURN touched
"""
DROP_ORPHANS = """
MATCH (e:Entity {tenant_id: $tenant})
WHERE e.entity_id IN $touched AND NOT (e)--()
DELETE e
"""

SET_ACTIVE_EDGES = """
SET r.active = $active
"""
SET_ACTIVE_MENTIONS = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
OPTIONAL MATCH (v)<-[m:MENTIONED_IN]-(:Entity {tenant_id: $tenant})
SET v.active = $active, m.active = $active
"""
PER_VERSION = """
MATCH (a:Entity {tenant_id: $tenant})-[r]->(b {tenant_id: $tenant})
WHERE r.tenant_id = $tenant AND r.document_id IS NOT NULL AND r.version IS NOT NULL
RETURN r.document_id AS document_id, r.version AS version, count(r) AS total,
       count(CASE WHEN r.active = true THEN 1 END) AS on
UNION ALL
MATCH (v:DocumentVersion {tenant_id: $tenant})
RETURN v.document_id AS document_id, v.version AS version, 0 AS total, 0 AS on
"""


DROP_TENANT_BATCH = """
MATCH (n {tenant_id: $tenant})
WITH n LIMIT 5000
OPTIONAL MATCH (n)-[r]-()
WITH collect(DISTINCT n) AS ns, count(DISTINCT r) AS rels
FOREACH (x IN ns | DETACH DELETE x)
RETURN size(ns) AS nodes, rels
"""


def version_edges(relation_types: Collection[str] | None) -> str:
    """The MATCH part binding `s`, `r`, `o` to one version's edges (tenant, document, version).

    With an allowlist, a `CALL` of one `MATCH` per type, each answered by that type's
    relationship index on (tenant_id, document_id, version) (`edge_indexes`): the cost is the
    version's own edges, not the tenant's graph. The types are the only text put into the query;
    each must pass `manifest.check_relation_type` (UPPER_SNAKE) and is back-quoted."""
    if not relation_types:
        return _VERSION_EDGES_SCAN
    branches = " UNION ALL ".join(
        f"MATCH (s:Entity)-[r:`{mf.check_relation_type(t)}` {{tenant_id: $tenant, document_id: $document_id, "
        "version: $version}]->(o:Entity) RETURN s, r, o"
        for t in sorted(relation_types))
    return f"CALL () {{ {branches} }}\nWITH s, r, o WHERE s.tenant_id = $tenant AND o.tenant_id = $tenant\n"


def edge_indexes(relation_types: Collection[str] | None) -> tuple[str, ...]:
    """One relationship range index per allowlisted type, on the keys `version_edges` seeks."""
    return tuple(
        f"CREATE INDEX manifold_edge_{t.lower()}_version IF NOT EXISTS "
        f"FOR ()-[r:`{mf.check_relation_type(t)}`]-() ON (r.tenant_id, r.document_id, r.version)"
        for t in sorted(relation_types or ()))


# ---- batches: the same steps for several versions of one tenant, rows carry their version

MERGE_VERSIONS = """
UNWIND $versions AS d
MERGE (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
SET v.content_sha256 = d.content_sha256, v.config_fingerprint = d.fingerprint,
    v.graph_schema_version = d.graph_schema, v.graph_model_version = $graph_model
"""
DROP_STALE_MENTIONS_MANY = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
      <-[m:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WHERE NOT m.mention_key IN d.keep
DELETE m
RETURN collect(DISTINCT e.entity_id) AS touched
"""
MERGE_MENTIONS_MANY = """
UNWIND $mentions AS row
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: row.document_id, version: row.version})
MATCH (e:Entity {tenant_id: $tenant, entity_id: row.entity_id})
MERGE (e)-[m:MENTIONED_IN {mention_key: row.mention_key}]->(v)
SET m.tenant_id = $tenant, m.document_id = row.document_id, m.version = row.version,
    m.chunk_id = row.chunk_id, m.record_id = row.record_id, m.extraction_version = row.extraction_version
"""
DROP_EDGES_MANY = """
WITH d, s, r, o WHERE NOT {relation_id: r.relation_id, type: type(r), source_id: s.entity_id,
                           target_id: o.entity_id} IN d.keep
WITH collect(r) AS rels, collect(DISTINCT s.entity_id) + collect(DISTINCT o.entity_id) AS touched
FOREACH (r IN rels | DELETE r)
RETURN touched
"""
MERGE_EDGES_MANY = """
UNWIND $relations AS row
MATCH (s:Entity {tenant_id: $tenant, entity_id: row.source_id})
MATCH (o:Entity {tenant_id: $tenant, entity_id: row.target_id})
MERGE (s)-[r:$(row.type) {relation_id: row.relation_id}]->(o)
SET r.tenant_id = $tenant, r.document_id = row.document_id, r.version = row.version,
    r.doc_version = row.doc_version, r.chunk_id = row.chunk_id, r.record_id = row.record_id,
    r.extraction_version = row.extraction_version, r.valid_from = row.valid_from,
    r.valid_to = row.valid_to, r.properties_json = row.properties_json
"""
READ_ENTITIES_MANY = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
      <-[m:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WHERE m.tenant_id = $tenant AND m.document_id = d.document_id AND m.version = d.version
RETURN d.document_id AS document_id, d.version AS version, e.entity_id AS entity_id, e.type AS type,
       e.canonical_key AS canonical_key, collect([m.chunk_id, m.record_id, m.extraction_version]) AS mentions
"""
READ_EDGES_MANY = """
RETURN d.document_id AS document_id, d.version AS version,
       r.relation_id AS relation_id, type(r) AS type, s.entity_id AS source_id,
       o.entity_id AS target_id, r.properties_json AS properties_json, r.valid_from AS valid_from,
       r.valid_to AS valid_to, r.chunk_id AS chunk_id, r.record_id AS record_id,
       r.extraction_version AS extraction_version
"""


def versions_edges(relation_types: Collection[str] | None) -> str:
    """`version_edges` for every row `d` of `UNWIND $versions AS d` (keys `document_id`,
    `version`): binds `d`, `s`, `r`, `o`; the same index seeks per allowlisted type."""
    if not relation_types:
        return ("UNWIND $versions AS d\n"
                "MATCH (s:Entity {tenant_id: $tenant})-[r]->(o:Entity {tenant_id: $tenant})\n"
                "WHERE r.tenant_id = $tenant AND r.document_id = d.document_id AND r.version = d.version\n")
    branches = " UNION ALL ".join(
        f"MATCH (s:Entity)-[r:`{mf.check_relation_type(t)}` {{tenant_id: $tenant, document_id: d.document_id, "
        "version: d.version}]->(o:Entity) RETURN s, r, o"
        for t in sorted(relation_types))
    return (f"UNWIND $versions AS d\nCALL (d) {{ {branches} }}\n"
            "WITH d, s, r, o WHERE s.tenant_id = $tenant AND o.tenant_id = $tenant\n")


TENANTS = """
MATCH (v:DocumentVersion) RETURN DISTINCT v.tenant_id AS tenant
UNION
MATCH (e:Entity) RETURN DISTINCT e.tenant_id AS tenant
"""
