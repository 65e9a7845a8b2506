"""Neo4j adapter: `Neo4jGraphStore`.

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

Guarantees (in addition to `manifold.shared.ports`):
- Labels and relationship types of the data are never interpolated: they are validated, then
  passed as parameters with Cypher's dynamic `$(...)` syntax (Neo4j 5.26+). All values are
  parameters. The only interpolated text is the store's own relation ALLOWLIST (given at
  construction, each type checked UPPER_SNAKE and back-quoted): with it, a version's edges are
  found by one relationship-index seek per type (index per type on (tenant_id, document_id,
  version), created by `ensure_schema`), so writing, verifying and publishing a version costs its
  own edges, not a scan of the tenant's graph (which made ingestion quadratic: ~0.4 s per call at
  10,000 documents of one tenant). Without an allowlist the store scans (tests, ad-hoc use).
- Every MATCH/MERGE names `tenant_id` on the nodes and relationships it touches.
- `write_versions` (a batch: `UNWIND` statements whose rows carry their version) and
  `delete_version` are each one explicit transaction (no driver-side retry: retries belong to
  the stage runner); `write_version` is the batch of one. A batch transaction that fails
  commits nothing; `manifests` reads a batch with one `UNWIND` query per kind. MERGE on the
  deterministic ids makes replays
  create nothing. After `delete_version`, entities left with no relationship at all are removed;
  entities still named by another version or joined by another version's edge stay.
- `ServiceUnavailable`, `SessionExpired`, transient server errors and unknown commit outcomes
  raise `Transient`. Constraints are created on first use (or by `ensure_schema()`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import neo4j
from neo4j import exceptions as neo4j_errors

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb

log = logging.getLogger(__name__)

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
_SCHEMA_ALREADY_THERE = frozenset({
    "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
    "Neo.ClientError.Schema.IndexAlreadyExists",
    "Neo.ClientError.Schema.ConstraintAlreadyExists",
})

_MERGE_ENTITIES = """
UNWIND $entities AS row
MERGE (e:Entity {tenant_id: $tenant, entity_id: row.entity_id})
SET e:$(row.label), e.type = row.type, e.canonical_key = row.canonical_key, e.name = row.name,
    e.aliases = reduce(acc = coalesce(e.aliases, []), a IN row.aliases |
                       CASE WHEN a IN acc THEN acc ELSE acc + a END),
    e.properties_json = row.properties_json
"""
# A version's edges: with a relation vocabulary, one relationship-index seek per allowlisted type
# (`_version_edges`); without one, a scan of the tenant's entities (tests, ad-hoc stores).
_VERSION_EDGES_SCAN = """
MATCH (s:Entity {tenant_id: $tenant})-[r]->(o:Entity {tenant_id: $tenant})
WHERE r.tenant_id = $tenant AND r.document_id = $document_id AND r.version = $version
"""
_DROP_EDGES = """
WITH s, r, o WHERE $keep IS NULL OR NOT {relation_id: r.relation_id, type: type(r), source_id: s.entity_id,
                                         target_id: o.entity_id} IN $keep
WITH collect(r) AS rels, collect(DISTINCT s.entity_id) + collect(DISTINCT o.entity_id) AS touched
FOREACH (r IN rels | DELETE r)
RETURN touched
"""
_DROP_VERSION_NODE = """
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: $document_id, version: $version})
OPTIONAL MATCH (v)<-[:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WITH v, collect(DISTINCT e.entity_id) AS touched
DETACH DELETE v
RETURN touched
"""
_DROP_ORPHANS = """
MATCH (e:Entity {tenant_id: $tenant})
WHERE e.entity_id IN $touched AND NOT (e)--()
DELETE e
"""

_SET_ACTIVE_EDGES = """
SET r.active = $active
"""
_SET_ACTIVE_MENTIONS = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
OPTIONAL MATCH (v)<-[m:MENTIONED_IN]-(:Entity {tenant_id: $tenant})
SET v.active = $active, m.active = $active
"""
_PER_VERSION = """
MATCH (a:Entity {tenant_id: $tenant})-[r]->(b {tenant_id: $tenant})
WHERE r.tenant_id = $tenant AND r.document_id IS NOT NULL AND r.version IS NOT NULL
RETURN r.document_id AS document_id, r.version AS version, count(r) AS total,
       count(CASE WHEN r.active = true THEN 1 END) AS on
UNION ALL
MATCH (v:DocumentVersion {tenant_id: $tenant})
RETURN v.document_id AS document_id, v.version AS version, 0 AS total, 0 AS on
"""


_DROP_TENANT_BATCH = """
MATCH (n {tenant_id: $tenant})
WITH n LIMIT 5000
OPTIONAL MATCH (n)-[r]-()
WITH collect(DISTINCT n) AS ns, count(DISTINCT r) AS rels
FOREACH (x IN ns | DETACH DELETE x)
RETURN size(ns) AS nodes, rels
"""


def _version_edges(relation_types: Collection[str] | None) -> str:
    """The MATCH part binding `s`, `r`, `o` to one version's edges (tenant, document, version).

    With an allowlist, a `CALL` of one `MATCH` per type, each answered by that type's
    relationship index on (tenant_id, document_id, version) (`_edge_indexes`): the cost is the
    version's own edges, not the tenant's graph. The types are the only text put into the query;
    each must pass `manifest.check_relation_type` (UPPER_SNAKE) and is back-quoted."""
    if not relation_types:
        return _VERSION_EDGES_SCAN
    branches = " UNION ALL ".join(
        f"MATCH (s:Entity)-[r:`{mf.check_relation_type(t)}` {{tenant_id: $tenant, document_id: $document_id, "
        "version: $version}]->(o:Entity) RETURN s, r, o"
        for t in sorted(relation_types))
    return f"CALL () {{ {branches} }}\nWITH s, r, o WHERE s.tenant_id = $tenant AND o.tenant_id = $tenant\n"


def _edge_indexes(relation_types: Collection[str] | None) -> tuple[str, ...]:
    """One relationship range index per allowlisted type, on the keys `_version_edges` seeks."""
    return tuple(
        f"CREATE INDEX manifold_edge_{t.lower()}_version IF NOT EXISTS "
        f"FOR ()-[r:`{mf.check_relation_type(t)}`]-() ON (r.tenant_id, r.document_id, r.version)"
        for t in sorted(relation_types or ()))


# ---- batches: the same steps for several versions of one tenant, rows carry their version

_MERGE_VERSIONS = """
UNWIND $versions AS d
MERGE (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
SET v.content_sha256 = d.content_sha256, v.config_fingerprint = d.fingerprint,
    v.graph_schema_version = d.graph_schema, v.graph_model_version = $graph_model
"""
_DROP_STALE_MENTIONS_MANY = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
      <-[m:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WHERE NOT m.mention_key IN d.keep
DELETE m
RETURN collect(DISTINCT e.entity_id) AS touched
"""
_MERGE_MENTIONS_MANY = """
UNWIND $mentions AS row
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: row.document_id, version: row.version})
MATCH (e:Entity {tenant_id: $tenant, entity_id: row.entity_id})
MERGE (e)-[m:MENTIONED_IN {mention_key: row.mention_key}]->(v)
SET m.tenant_id = $tenant, m.document_id = row.document_id, m.version = row.version,
    m.chunk_id = row.chunk_id, m.record_id = row.record_id, m.extraction_version = row.extraction_version
"""
_DROP_EDGES_MANY = """
WITH d, s, r, o WHERE NOT {relation_id: r.relation_id, type: type(r), source_id: s.entity_id,
                           target_id: o.entity_id} IN d.keep
WITH collect(r) AS rels, collect(DISTINCT s.entity_id) + collect(DISTINCT o.entity_id) AS touched
FOREACH (r IN rels | DELETE r)
RETURN touched
"""
_MERGE_EDGES_MANY = """
UNWIND $relations AS row
MATCH (s:Entity {tenant_id: $tenant, entity_id: row.source_id})
MATCH (o:Entity {tenant_id: $tenant, entity_id: row.target_id})
MERGE (s)-[r:$(row.type) {relation_id: row.relation_id}]->(o)
SET r.tenant_id = $tenant, r.document_id = row.document_id, r.version = row.version,
    r.doc_version = row.doc_version, r.chunk_id = row.chunk_id, r.record_id = row.record_id,
    r.extraction_version = row.extraction_version, r.valid_from = row.valid_from,
    r.valid_to = row.valid_to, r.properties_json = row.properties_json
"""
_READ_ENTITIES_MANY = """
UNWIND $versions AS d
MATCH (v:DocumentVersion {tenant_id: $tenant, document_id: d.document_id, version: d.version})
      <-[m:MENTIONED_IN]-(e:Entity {tenant_id: $tenant})
WHERE m.tenant_id = $tenant AND m.document_id = d.document_id AND m.version = d.version
RETURN d.document_id AS document_id, d.version AS version, e.entity_id AS entity_id, e.type AS type,
       e.canonical_key AS canonical_key, collect([m.chunk_id, m.record_id, m.extraction_version]) AS mentions
"""
_READ_EDGES_MANY = """
RETURN d.document_id AS document_id, d.version AS version,
       r.relation_id AS relation_id, type(r) AS type, s.entity_id AS source_id,
       o.entity_id AS target_id, r.properties_json AS properties_json, r.valid_from AS valid_from,
       r.valid_to AS valid_to, r.chunk_id AS chunk_id, r.record_id AS record_id,
       r.extraction_version AS extraction_version
"""


def _versions_edges(relation_types: Collection[str] | None) -> str:
    """`_version_edges` for every row `d` of `UNWIND $versions AS d` (keys `document_id`,
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


_TENANTS = """
MATCH (v:DocumentVersion) RETURN DISTINCT v.tenant_id AS tenant
UNION
MATCH (e:Entity) RETURN DISTINCT e.tenant_id AS tenant
"""

_TRANSIENT_ERRORS = (
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
    neo4j_errors.TransientError,
    neo4j_errors.IncompleteCommit,
    neo4j_errors.DatabaseUnavailable,
    neo4j_errors.ConnectionAcquisitionTimeoutError,
)


_TIMED_OUT = frozenset({
    "Neo.ClientError.Transaction.LockClientStopped",
    "Neo.ClientError.Transaction.TransactionTimedOut",
    "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
})


class Neo4jGraphStore:
    """`GraphStore` on Neo4j 5 (see the module docstring for the model and guarantees).

    `entity_types` / `relation_types`, when given, are the controlled vocabulary: anything
    else is `BadInput` (route to review), on top of the syntactic label/type checks.
    `tx_timeout_s`, when given, bounds every transaction (a write waiting on another's lock
    longer than that is rolled back and raises `Transient`).
    """

    def __init__(self, driver: neo4j.Driver, *, database: str = "neo4j",
                 entity_types: Collection[str] | None = None,
                 relation_types: Collection[str] | None = None,
                 tx_timeout_s: float | None = None) -> None:
        self._driver = driver
        self._database = database
        self._tx_timeout_s = tx_timeout_s
        self._entity_types = frozenset(entity_types) if entity_types is not None else None
        self._relation_types = frozenset(relation_types) if relation_types is not None else None
        edges = _version_edges(self._relation_types)
        self._drop_edges = edges + _DROP_EDGES
        many = _versions_edges(self._relation_types)
        self._set_active_edges = many + _SET_ACTIVE_EDGES
        self._drop_edges_many, self._read_edges_many = many + _DROP_EDGES_MANY, many + _READ_EDGES_MANY
        self._schema = SCHEMA_STATEMENTS + _edge_indexes(self._relation_types)
        self._ready = False

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, **kwargs: Any) -> Neo4jGraphStore:
        driver = neo4j.GraphDatabase.driver(
            settings.neo4j.uri, auth=(settings.neo4j.user, settings.neo4j.password.get_secret_value())
        )
        return cls(driver, **kwargs)

    def ensure_schema(self) -> None:
        """Create constraints and indexes if absent; idempotent, also when several processes
        run it at once (`IF NOT EXISTS` is not atomic in Neo4j: the loser of a concurrent create
        gets `EquivalentSchemaRuleAlreadyExists`, which means the rule is there)."""
        with self._session() as session:
            for statement in self._schema:
                try:
                    session.run(statement).consume()
                except neo4j.exceptions.ClientError as exc:
                    if exc.code not in _SCHEMA_ALREADY_THERE:
                        raise
        self._ready = True

    @contextmanager
    def _session(self) -> Iterator[neo4j.Session]:
        try:
            with self._driver.session(
                database=self._database,
                # optional properties (record_id, valid_to, ...) may not exist yet: not a problem
                notifications_disabled_classifications=["UNRECOGNIZED"],
            ) as session:
                yield session
        except _TRANSIENT_ERRORS as exc:
            raise Transient(f"neo4j unavailable: {type(exc).__name__}: {exc}") from exc
        except neo4j_errors.ClientError as exc:
            if exc.code in _TIMED_OUT:  # waited too long for a lock another transaction holds
                raise Transient(f"neo4j transaction timed out: {exc.code}") from exc
            raise
        except OSError as exc:
            raise Transient(f"neo4j unreachable: {exc}") from exc

    @contextmanager
    def _tx(self) -> Iterator[neo4j.Transaction]:
        if not self._ready:
            self.ensure_schema()
        with self._session() as session, session.begin_transaction(timeout=self._tx_timeout_s) as tx:
            yield tx
            tx.commit()

    # ------------------------------------------------------------------ write

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        outcome = self.write_versions([doc])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _rows(self, doc: ExtractedDocument) -> dict[str, Any]:
        """The parameter rows of one version (validated first: `BadInput` before any write)."""
        mf.validate(doc)
        mf.check_vocabulary(doc, self._entity_types, self._relation_types)
        ref, v = doc.doc, doc.versions
        at = {"document_id": ref.document_id, "version": ref.version}
        entities = [
            {"entity_id": e.entity_id, "label": mf.graph_label(e.type), "type": e.type,
             "canonical_key": e.canonical_key, "name": e.name, "aliases": list(e.aliases),
             "properties_json": mf.canonical_json(e.properties)}
            for e in doc.entities
        ]
        mentions = [
            {**at, "entity_id": e.entity_id, "mention_key": mf.mention_key(e.entity_id, m),
             "chunk_id": m[0], "record_id": m[1], "extraction_version": m[2]}
            for e in doc.entities
            for m in sorted(mf.entity_mentions(e, v.extraction), key=mf.canonical_json)
        ]
        relations = [
            {**at, "doc_version": f"{ref.document_id}@{ref.version}",
             "relation_id": r.relation_id, "type": mf.check_relation_type(r.type),
             "source_id": r.source_id, "target_id": r.target_id,
             "chunk_id": r.provenance.chunk_id, "record_id": r.provenance.record_id,
             "extraction_version": r.provenance.extraction_version,
             "valid_from": r.valid_from, "valid_to": r.valid_to,
             "properties_json": mf.relation_properties_json(r)}
            for r in doc.relations
        ]
        # an edge is kept only if id, type and both ends are unchanged: MERGE would otherwise
        # add a second edge under the same relation id
        version = {**at, "content_sha256": ref.content_sha256, "fingerprint": v.fingerprint(),
                   "graph_schema": v.graph_schema, "keep": [m["mention_key"] for m in mentions],
                   "keep_edges": [{k: r[k] for k in ("relation_id", "type", "source_id", "target_id")}
                                  for r in relations]}
        return {"version": version, "entities": entities, "mentions": mentions, "relations": relations}

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """Write a batch of versions with `UNWIND` statements in ONE transaction (every row names
        its version; every MATCH/MERGE the tenant) and read their manifests back in it.

        A document that fails validation is its own `BadInput` and is left out. If the batch
        transaction fails, nothing of it is committed: an outage (`Transient`) fails the batch;
        any other error (one document the server refuses) is attributed by writing each version
        in its own transaction, so it lands on its document alone."""
        tenant = vb.one_tenant(docs)
        if tenant is None:
            return []
        outcomes: list[StoreManifest | Exception | None] = [None] * len(docs)
        rows: dict[int, dict[str, Any]] = {}
        for i, doc in enumerate(docs):
            try:
                rows[i] = self._rows(doc)
            except Exception as err:  # noqa: BLE001 - this document's own outcome
                outcomes[i] = err
        if not rows:
            return outcomes  # type: ignore[return-value]
        try:
            written = self._write_rows(tenant, list(rows.values()))
        except neo4j_errors.Neo4jError as err:
            if len(rows) == 1:
                raise
            log.warning("neo4j: batch of %d versions refused (%s); writing each alone", len(rows), err.code)
            for i in rows:
                try:
                    outcomes[i] = self._write_rows(tenant, [rows[i]])[0]
                except Exception as one:  # noqa: BLE001 - this document's own outcome
                    outcomes[i] = one
            return outcomes  # type: ignore[return-value]
        for i, manifest in zip(rows, written, strict=True):
            outcomes[i] = manifest
        return outcomes  # type: ignore[return-value]

    def _write_rows(self, tenant: str, batch: list[dict[str, Any]]) -> list[StoreManifest]:
        versions = [b["version"] for b in batch]
        edges_keep = [{"document_id": b["version"]["document_id"], "version": b["version"]["version"],
                       "keep": b["version"]["keep_edges"]} for b in batch]
        with self._tx() as tx:
            tx.run(_MERGE_VERSIONS, tenant=tenant, versions=versions, graph_model=NEO4J_MODEL_VERSION).consume()
            tx.run(_MERGE_ENTITIES, tenant=tenant, entities=[e for b in batch for e in b["entities"]]).consume()
            touched = set(tx.run(_DROP_STALE_MENTIONS_MANY, tenant=tenant,
                                 versions=versions).single(strict=True)["touched"])
            tx.run(_MERGE_MENTIONS_MANY, tenant=tenant, mentions=[m for b in batch for m in b["mentions"]]).consume()
            touched |= set(tx.run(self._drop_edges_many, tenant=tenant,
                                  versions=edges_keep).single(strict=True)["touched"])
            tx.run(_MERGE_EDGES_MANY, tenant=tenant, relations=[r for b in batch for r in b["relations"]]).consume()
            if touched:
                tx.run(_DROP_ORPHANS, tenant=tenant, touched=sorted(touched)).consume()
            keys = [(v["document_id"], v["version"]) for v in versions]
            manifests = self._read_manifests(tx, tenant, keys)
        return [manifests[k] for k in keys]

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._tx() as tx:
            touched = set(tx.run(self._drop_edges, key, keep=None).single(strict=True)["touched"])
            record = tx.run(_DROP_VERSION_NODE, key).single()
            if record is not None:
                touched |= set(record["touched"])
            if touched:
                tx.run(_DROP_ORPHANS, key, touched=sorted(touched)).consume()

    # ------------------------------------------------------------------ manifest

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        return self.manifests(tenant_id, [(document_id, version)])[(document_id, version)]

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """Every key's manifest in one read: one `UNWIND` query for entities, one for edges."""
        mf.check_tenant(tenant_id)
        if not keys:
            return {}
        with self._tx() as tx:
            return self._read_manifests(tx, tenant_id, keys)

    def _read_manifests(self, tx: neo4j.Transaction, tenant: str,
                        keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        versions = [{"document_id": d, "version": v} for d, v in sorted(set(keys))]
        entities: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        edges: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        for r in tx.run(_READ_ENTITIES_MANY, tenant=tenant, versions=versions):
            entities[(r["document_id"], int(r["version"]))].append(
                (r["entity_id"], mf.entity_hash(r["type"], r["canonical_key"], (tuple(m) for m in r["mentions"]))))
        for r in tx.run(self._read_edges_many, tenant=tenant, versions=versions):
            edges[(r["document_id"], int(r["version"]))].append((r["relation_id"], mf.relation_hash(
                rel_type=r["type"], source_id=r["source_id"], target_id=r["target_id"],
                properties_json=r["properties_json"], valid_from=r["valid_from"], valid_to=r["valid_to"],
                chunk_id=r["chunk_id"], record_id=r["record_id"], extraction_version=r["extraction_version"],
            )))
        return {k: mf.build_manifest("neo4j", mf.NEO4J_KINDS, {"entities": entities[k], "edges": edges[k]})
                for k in keys}

    # ------------------------------------------------------------------ serving marks (publisher)

    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None:
        """`set_serving_many` for one version."""
        self.set_serving_many(tenant_id, [(document_id, version)], serving)

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        """Set `active` on these versions' relationships, their MENTIONED_IN links and their
        DocumentVersion nodes, in one transaction (two `UNWIND` statements); idempotent.
        `write_version` never touches the property, so replays keep the mark (MERGE-recreated
        edges come back unmarked)."""
        mf.check_tenant(tenant_id)
        if not keys:
            return
        versions = [{"document_id": d, "version": v} for d, v in sorted(set(keys))]
        with self._tx() as tx:
            tx.run(self._set_active_edges, tenant=tenant_id, versions=versions, active=serving).consume()
            tx.run(_SET_ACTIVE_MENTIONS, tenant=tenant_id, versions=versions, active=serving).consume()

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        out: dict[tuple[str, int], tuple[int, int]] = {}
        with self._tx() as tx:
            for r in tx.run(_PER_VERSION, tenant=tenant_id):
                k = (r["document_id"], int(r["version"]))
                total, on = out.get(k, (0, 0))
                out[k] = (total + r["total"], on + r["on"])
        return out

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return set(self._per_version(tenant_id))

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return mf.serving_drift(self._per_version(tenant_id), active)

    def delete_tenant(self, tenant_id: str) -> dict[str, int]:
        """Delete every node of the tenant (entities, document versions) with all their
        relationships, in batches; returns the nodes and relationships removed. Idempotent."""
        mf.check_tenant(tenant_id)
        removed = {"nodes": 0, "relationships": 0}
        while True:
            with self._tx() as tx:
                row = tx.run(_DROP_TENANT_BATCH, tenant=tenant_id).single(strict=True)
            removed["nodes"] += row["nodes"]
            removed["relationships"] += row["rels"]
            if row["nodes"] == 0:
                return removed

    def tenants(self) -> set[str]:
        with self._tx() as tx:
            return {r["tenant"] for r in tx.run(_TENANTS) if r["tenant"]}
