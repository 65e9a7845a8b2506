"""Neo4j adapter: `Neo4jGraphStore` (the graph model and every Cypher statement: `neo4j_cypher.py`).

Guarantees (in addition to `manifold.shared.ports` and those of `neo4j_cypher`):
- `write_versions` (a batch: `UNWIND` statements whose rows carry their version) and
  `delete_version` are each one explicit transaction (no driver-side retry: retries belong to
  the stage runner); `write_version` is the batch of one. A batch transaction that fails
  commits nothing; `manifests` reads a batch with one `UNWIND` query per kind. MERGE on the
  deterministic ids makes replays
  create nothing. After `delete_version`, entities left with no relationship at all are removed;
  entities still named by another version or joined by another version's edge stay.
- With a relation allowlist, the per-type relationship indexes the statements seek are created
  with the constraints by `ensure_schema`.
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
from manifold.shared.stores import neo4j_cypher as cy
from manifold.shared.stores import version_batches as vb

log = logging.getLogger(__name__)

_SCHEMA_ALREADY_THERE = frozenset({
    "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
    "Neo.ClientError.Schema.IndexAlreadyExists",
    "Neo.ClientError.Schema.ConstraintAlreadyExists",
})

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
    """`GraphStore` on Neo4j 5 (guarantees: the module docstring; the model: `neo4j_cypher.py`).

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
        edges = cy.version_edges(self._relation_types)
        self._drop_edges = edges + cy.DROP_EDGES
        many = cy.versions_edges(self._relation_types)
        self._set_active_edges = many + cy.SET_ACTIVE_EDGES
        self._drop_edges_many, self._read_edges_many = many + cy.DROP_EDGES_MANY, many + cy.READ_EDGES_MANY
        self._schema = cy.SCHEMA_STATEMENTS + cy.edge_indexes(self._relation_types)
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
            tx.run(cy.MERGE_VERSIONS, tenant=tenant, versions=versions, graph_model=cy.NEO4J_MODEL_VERSION).consume()
            tx.run(cy.MERGE_ENTITIES, tenant=tenant, entities=[e for b in batch for e in b["entities"]]).consume()
            touched = set(tx.run(cy.DROP_STALE_MENTIONS_MANY, tenant=tenant,
                                 versions=versions).single(strict=True)["touched"])
            tx.run(cy.MERGE_MENTIONS_MANY, tenant=tenant, mentions=[m for b in batch for m in b["mentions"]]).consume()
            touched |= set(tx.run(self._drop_edges_many, tenant=tenant,
                                  versions=edges_keep).single(strict=True)["touched"])
            tx.run(cy.MERGE_EDGES_MANY, tenant=tenant, relations=[r for b in batch for r in b["relations"]]).consume()
            if touched:
                tx.run(cy.DROP_ORPHANS, tenant=tenant, touched=sorted(touched)).consume()
            keys = [(v["document_id"], v["version"]) for v in versions]
            manifests = self._read_manifests(tx, tenant, keys)
        return [manifests[k] for k in keys]

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._tx() as tx:
            touched = set(tx.run(self._drop_edges, key, keep=None).single(strict=True)["touched"])
            record = tx.run(cy.DROP_VERSION_NODE, key).single()
            if record is not None:
                touched |= set(record["touched"])
            if touched:
                tx.run(cy.DROP_ORPHANS, key, touched=sorted(touched)).consume()

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
        for r in tx.run(cy.READ_ENTITIES_MANY, tenant=tenant, versions=versions):
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
            tx.run(cy.SET_ACTIVE_MENTIONS, tenant=tenant_id, versions=versions, active=serving).consume()

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        out: dict[tuple[str, int], tuple[int, int]] = {}
        with self._tx() as tx:
            for r in tx.run(cy.PER_VERSION, tenant=tenant_id):
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
                row = tx.run(cy.DROP_TENANT_BATCH, tenant=tenant_id).single(strict=True)
            removed["nodes"] += row["nodes"]
            removed["relationships"] += row["rels"]
            if row["nodes"] == 0:
                return removed

    def tenants(self) -> set[str]:
        with self._tx() as tx:
            return {r["tenant"] for r in tx.run(cy.TENANTS) if r["tenant"]}
