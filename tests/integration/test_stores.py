"""The load stage's store adapters against the real PostgreSQL, Elasticsearch and Neo4j.

One small document version (3 chunks with 384-dim vectors, 1 invoice with 2 lines, 2 entities,
1 relation, 1 review item) is written through `ingest.load.handle`; each store's manifest,
recomputed from what it holds, must equal the expected one; replays change nothing; tenants
are isolated in the data layer; deletes are complete; outages are `Transient`.
"""

from __future__ import annotations

import hashlib
import math
import socket
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from factories import pipeline_versions
from psycopg import sql
from psycopg.conninfo import make_conninfo

from manifold.ingest.load import expected_manifests, handle
from manifold.shared.artifacts import (
    BusinessRecord,
    Chunk,
    DocRef,
    Entity,
    ExtractedDocument,
    Provenance,
    RecordLine,
    Relation,
    ReviewItem,
    Section,
)
from manifold.shared.errors import BadInput, Transient
from manifold.shared.ids import child_id, entity_id, version_scope
from manifold.shared.ports import GraphStore, RelationalStore, StagedItemMissing, StagingStore, TextIndex
from manifold.shared.stores import pg_schema
from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
from manifold.shared.stores.es_mapping import ES_INDEX, ES_SCHEMA_VERSION
from manifold.shared.stores.neo4j import Neo4jGraphStore
from manifold.shared.stores.pg_relational import PostgresRelationalStore
from manifold.shared.stores.pg_staging import PostgresStagingStore

VERSIONS = pipeline_versions(parser="parser-1", chunker="chunker-1", embedding_model="all-MiniLM-L6-v2",
                             extraction="extract-1", pg_schema=pg_schema.PG_SCHEMA_VERSION,
                             es_schema=ES_SCHEMA_VERSION, graph_schema="graph-1")
VERSION_TABLES = ("document_versions", "sections", "chunks", "records", "record_lines", "review_items")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _vector(seed: int) -> list[float]:
    raw = [math.sin(seed * 7.0 + i * 0.37) for i in range(384)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def build_doc(tenant: str, document_id: str = "contract-7", version: int = 1, content: str = "v1") -> ExtractedDocument:
    ref = DocRef(tenant_id=tenant, document_id=document_id, version=version,
                 content_sha256=_sha(f"{document_id}@{version}:{content}"), media_type="text/markdown",
                 metadata={"source": "test", "pages": 2})
    scope = version_scope(tenant, document_id, version, ref.content_sha256, VERSIONS.fingerprint())
    sections = [Section(section_id=child_id("sec", scope, i), ordinal=i, title=t, path=["Agreement", t])
                for i, t in enumerate(["Parties", "Invoice"])]
    texts = ["ACME buys sensors from Beta GmbH.", "Invoice INV-2026-0148 from Beta GmbH.", "2 x PRD-482 at 10.50 EUR"]
    chunks = [Chunk(chunk_id=child_id("chunk", scope, i), section_id=sections[min(i, 1)].section_id, ordinal=i,
                    kind="text" if i < 2 else "table", text=t, content_sha256=_sha(t),
                    identifiers=["INV-2026-0148"] if i == 1 else ["PRD-482"] if i == 2 else [])
              for i, t in enumerate(texts)]
    prov = Provenance(document_id=document_id, version=version, chunk_id=chunks[0].chunk_id,
                      extraction_version="extract-1")
    record = BusinessRecord(
        record_id=child_id("rec", scope, 0), record_type="invoice", number="INV-2026-0148",
        counterparty_id="SUP-9", counterparty_name="Beta GmbH", issued_on=date(2026, 3, 31), currency="EUR",
        status="open", total=Decimal("31.00"),
        lines=[RecordLine(line_no=1, product_code="PRD-482", description="sensor", quantity=Decimal("2"),
                          unit_price=Decimal("10.50"), amount=Decimal("21.00")),
               RecordLine(line_no=2, product_code="PRD-9", description="cable", quantity=Decimal("1"),
                          unit_price=Decimal("10.0000"), amount=Decimal("10.00"))],
        attributes={"po": "PO-1", "discount": 0.5, "net_days": 30.0},
        provenance=prov.model_copy(update={"chunk_id": chunks[1].chunk_id}),
    )
    acme = Entity(entity_id=entity_id(tenant, "company", "acme"), type="company", canonical_key="acme",
                  name="ACME", aliases=["Acme Corp"], properties={"country": "DE"}, provenance=[prov])
    beta = Entity(entity_id=entity_id(tenant, "supplier", "beta-gmbh"), type="supplier", canonical_key="beta-gmbh",
                  name="Beta GmbH", provenance=[prov, prov.model_copy(update={"chunk_id": chunks[1].chunk_id,
                                                                             "record_id": record.record_id})])
    relation = Relation(relation_id=child_id("rel", scope, 0), type="SUPPLIES", source_id=beta.entity_id,
                        target_id=acme.entity_id, properties={"category": "sensors", "share": 0.25, "n": 1.0},
                        valid_from=date(2026, 1, 1), provenance=prov)
    review = ReviewItem(review_id=child_id("rev", scope, 0), reason="unknown relation type VENDOR_OF",
                        payload={"type": "VENDOR_OF", "tokens": ["Beta", "ACME"], "score": 1.0, "big": 1e20},
                        provenance=prov)
    return ExtractedDocument(doc=ref, versions=VERSIONS, sections=sections, chunks=chunks,
                             vectors=[_vector(i) for i in range(3)], entities=[acme, beta],
                             relations=[relation], records=[record], review=[review])


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pg_roles(settings, pg_conninfo: str) -> dict[str, str]:
    ingest = settings.postgres.ingest_password.get_secret_value()
    query = settings.postgres.query_password.get_secret_value()
    pg_schema.migrate(pg_conninfo, ingest_password=ingest, query_password=query)
    return {
        "admin": pg_conninfo,
        "ingest": settings.postgres.conninfo(user=pg_schema.INGEST_ROLE, password=ingest),
        "query": settings.postgres.conninfo(user=pg_schema.QUERY_ROLE, password=query),
    }


class Stores:
    def __init__(self, relational: RelationalStore, text: TextIndex, graph: GraphStore, staging: StagingStore):
        self.relational, self.text, self.graph, self.staging = relational, text, graph, staging
        self.written: set[tuple[str, str, int]] = set()

    @property
    def all(self) -> tuple[RelationalStore, TextIndex, GraphStore]:
        return self.relational, self.text, self.graph

    def load(self, doc: ExtractedDocument):
        self.written.add((doc.doc.tenant_id, doc.doc.document_id, doc.doc.version))
        return handle(doc, self.relational, self.text, self.graph)

    def manifests(self, tenant: str, document_id: str = "contract-7", version: int = 1):
        return [store.manifest(tenant, document_id, version) for store in self.all]


@pytest.fixture
def stores(pg_roles, es_client, neo4j_driver) -> Iterator[Stores]:
    s = Stores(PostgresRelationalStore(pg_roles["ingest"]), ElasticsearchTextIndex(es_client),
               Neo4jGraphStore(neo4j_driver), PostgresStagingStore(pg_roles["ingest"]))
    yield s
    for key in s.written:
        for store in s.all:
            store.delete_version(*key)


@pytest.fixture
def tenants(unique: Callable[[str], str]) -> tuple[str, str]:
    return unique("ta"), unique("tb")


def _zero(manifest) -> bool:
    return set(manifest.counts.values()) == {0}


def _pg_rows(conninfo: str, tenant: str | None, table: str, document_id: str | None = None) -> int:
    """Rows of `table` visible to the role in `conninfo` with `tenant` set (None: not set)."""
    with psycopg.connect(conninfo) as conn, conn.transaction():
        if tenant is not None:
            conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant,))
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("manifold", table))
        params: tuple[Any, ...] = ()
        if document_id is not None:
            query += sql.SQL(" WHERE document_id = %s")
            params = (document_id,)
        return conn.execute(query, params).fetchone()[0]


def _admin_counts(admin: str, tenant: str) -> dict[str, int]:
    """Rows per table for a tenant, as the superuser (who is not subject to RLS)."""
    with psycopg.connect(admin) as conn:
        return {
            t: conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s").format(
                sql.Identifier("manifold", t)), (tenant,)).fetchone()[0]
            for t in VERSION_TABLES
        }


def _graph_counts(driver, tenant: str) -> tuple[int, int, int]:
    with driver.session() as session:
        row = session.run(
            "MATCH (n {tenant_id: $t}) OPTIONAL MATCH (n)-[r {tenant_id: $t}]->() "
            "RETURN count(DISTINCT n) AS nodes, count(r) AS rels, "
            "count(DISTINCT CASE WHEN n:Entity THEN n END) AS entities", t=tenant,
        ).single()
    return row["nodes"], row["rels"], row["entities"]


def _es_count(es_client, tenant: str) -> int:
    es_client.indices.refresh(index=ES_INDEX)
    return es_client.count(index=ES_INDEX, query={"term": {"tenant_id": tenant}})["count"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- tests


def test_migrations_are_idempotent_and_force_rls(pg_roles) -> None:
    assert str(pg_schema.current_version(pg_roles["ingest"])) == pg_schema.PG_SCHEMA_VERSION
    with psycopg.connect(pg_roles["admin"]) as conn:
        flags = dict(conn.execute(
            "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'manifold' AND c.relkind = 'r'"
        ).fetchall())
        roles = dict(conn.execute(
            "SELECT rolname, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname LIKE 'manifold\\_%'"
        ).fetchall())
        owners = {r[0] for r in conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = 'manifold'").fetchall()}
    assert all(flags[t] for t in pg_schema.TENANT_TABLES), flags
    assert roles == {"manifold_owner": False, "manifold_ingest": False, "manifold_query": False}
    assert owners == {"manifold_owner"}


def test_rerunning_migrate_applies_nothing(settings, pg_roles) -> None:
    ingest = settings.postgres.ingest_password.get_secret_value()
    query = settings.postgres.query_password.get_secret_value()
    assert pg_schema.migrate(pg_roles["admin"], ingest_password=ingest, query_password=query) == []


def test_manifests_recomputed_from_every_store_match_expected(stores: Stores, tenants) -> None:
    doc = build_doc(tenants[0])
    notice = stores.load(doc)
    assert notice.stores == expected_manifests(doc) == stores.manifests(tenants[0])
    counts = {m.store: m.counts for m in notice.stores}
    assert counts == {
        "postgres": {"chunks": 3, "vectors": 3, "sections": 2, "records": 1, "record_lines": 2, "review_items": 1},
        "elasticsearch": {"chunks": 3},
        "neo4j": {"entities": 2, "edges": 1},
    }


def test_new_version_is_staged_and_money_is_exact(stores: Stores, tenants, pg_roles) -> None:
    assert stores.relational.newest_version(tenants[0], "contract-7") is None
    stores.load(build_doc(tenants[0]))
    stores.load(build_doc(tenants[0], version=2))
    assert stores.relational.newest_version(tenants[0], "contract-7") == 2
    assert stores.relational.newest_version(tenants[1], "contract-7") is None
    # the batched read a stage's stale checks use says the same, per tenant
    assert stores.relational.newest_versions(tenants[0], ["contract-7", "never-loaded"]) == {"contract-7": 2}
    assert stores.relational.newest_versions(tenants[1], ["contract-7"]) == {}
    with psycopg.connect(pg_roles["admin"]) as conn:
        states = conn.execute("SELECT state FROM manifold.document_versions WHERE tenant_id = %s",
                              (tenants[0],)).fetchall()
        lines = conn.execute("SELECT unit_price, amount, pg_typeof(amount)::text FROM manifold.record_lines "
                             "WHERE tenant_id = %s AND version = 1 ORDER BY line_no", (tenants[0],)).fetchall()
    assert states == [("staged",), ("staged",)]
    assert lines == [(Decimal("10.50"), Decimal("21.00"), "numeric"), (Decimal("10.0000"), Decimal("10.00"), "numeric")]


def test_replaying_three_times_changes_no_count(stores: Stores, tenants, pg_roles, es_client, neo4j_driver) -> None:
    doc = build_doc(tenants[0])
    first = stores.load(doc)
    before = (_admin_counts(pg_roles["admin"], tenants[0]), _es_count(es_client, tenants[0]),
              _graph_counts(neo4j_driver, tenants[0]))
    with psycopg.connect(pg_roles["admin"]) as conn:
        xmins = conn.execute("SELECT chunk_id, xmin::text FROM manifold.chunks WHERE tenant_id = %s ORDER BY 1",
                             (tenants[0],)).fetchall()
    for _ in range(3):
        assert stores.load(doc) == first
    after = (_admin_counts(pg_roles["admin"], tenants[0]), _es_count(es_client, tenants[0]),
             _graph_counts(neo4j_driver, tenants[0]))
    assert after == before
    assert before[0] == {"document_versions": 1, "sections": 2, "chunks": 3, "records": 1, "record_lines": 2,
                         "review_items": 1}
    assert before[1] == 3
    assert before[2] == (3, 4, 2)  # nodes: 2 entities + the version; links: 1 edge + 3 mentions
    with psycopg.connect(pg_roles["admin"]) as conn:  # a replay rewrites no row
        assert conn.execute("SELECT chunk_id, xmin::text FROM manifold.chunks WHERE tenant_id = %s ORDER BY 1",
                            (tenants[0],)).fetchall() == xmins
    assert stores.manifests(tenants[0]) == first.stores


def test_rewrite_keeps_exactly_the_new_artifacts(stores: Stores, tenants, neo4j_driver) -> None:
    doc = build_doc(tenants[0])
    stores.load(doc)
    smaller = doc.model_copy(update={
        "chunks": doc.chunks[:2], "vectors": doc.vectors[:2], "entities": doc.entities[:1], "relations": [],
        "review": [], "records": [doc.records[0].model_copy(update={"lines": doc.records[0].lines[:1]})],
    })
    notice = stores.load(smaller)
    assert notice.stores == stores.manifests(tenants[0]) == expected_manifests(smaller)
    assert _graph_counts(neo4j_driver, tenants[0])[2] == 1  # Beta lost its last link and is gone


def test_changed_relation_under_the_same_id_replaces_the_edge(stores: Stores, tenants, neo4j_driver) -> None:
    doc = build_doc(tenants[0])
    stores.load(doc)
    flipped = doc.relations[0].model_copy(update={
        "type": "SUPPLIED_BY", "source_id": doc.relations[0].target_id, "target_id": doc.relations[0].source_id})
    changed = doc.model_copy(update={"relations": [flipped]})
    assert stores.load(changed).stores == stores.manifests(tenants[0])
    assert _graph_counts(neo4j_driver, tenants[0]) == (3, 4, 2)


def test_graph_vocabulary_allowlist_rejects_before_writing(neo4j_driver, tenants) -> None:
    graph = Neo4jGraphStore(neo4j_driver, entity_types={"company", "supplier"}, relation_types={"APPROVED_VENDOR"})
    with pytest.raises(BadInput, match="SUPPLIES"):
        graph.write_version(build_doc(tenants[0]))
    assert _zero(graph.manifest(tenants[0], "contract-7", 1))


def test_same_version_with_other_content_is_bad_input(stores: Stores, tenants) -> None:
    stores.load(build_doc(tenants[0]))
    with pytest.raises(BadInput, match="immutable"):
        stores.relational.write_version(build_doc(tenants[0], content="edited"))


def test_tenants_are_isolated_in_every_store(stores: Stores, tenants, pg_roles) -> None:
    a, b = tenants
    doc_a = build_doc(a)
    expected_a = stores.load(doc_a).stores
    # Through every adapter, tenant B sees nothing of A's version.
    assert all(_zero(m) for m in stores.manifests(b))
    # Through the manifold_ingest role itself (RLS with FORCE): only the tenant set is visible.
    ingest = pg_roles["ingest"]
    for table in VERSION_TABLES:
        assert _pg_rows(ingest, b, table, "contract-7") == 0, table
        assert _pg_rows(ingest, None, table) == 0, table
    assert _pg_rows(ingest, a, "chunks", "contract-7") == 3
    with psycopg.connect(ingest) as conn, conn.transaction():
        conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (b,))
        touched = conn.execute("UPDATE manifold.chunks SET text = 'hijacked' WHERE document_id = 'contract-7'").rowcount
        assert touched == 0
    with psycopg.connect(ingest) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level"):
        with conn.transaction():
            conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (b,))
            conn.execute("INSERT INTO manifold.documents (tenant_id, document_id) VALUES (%s, 'x')", (a,))
    # The same document id under tenant B is a separate version; deleting it leaves A intact.
    stores.load(build_doc(b))
    for store in stores.all:
        store.delete_version(b, "contract-7", 1)
    assert stores.manifests(a) == expected_a
    # Staging: a blob or payload of A is not there for B, even under the same hash or key.
    sha = stores.staging.put_blob(a, b"%PDF-1.7 tenant a")
    stores.staging.put_payload(a, "contract-7@1", "parse", b"{}")
    with pytest.raises(StagedItemMissing):
        stores.staging.get_blob(b, sha)
    with pytest.raises(StagedItemMissing):
        stores.staging.get_payload(b, "contract-7@1", "parse")


def test_query_role_reads_serving_tables_only_and_cannot_write(stores: Stores, tenants, pg_roles) -> None:
    a, _ = tenants
    stores.load(build_doc(a))
    query = pg_roles["query"]
    # Only the serving views, and they show active versions only: this one is merely staged.
    assert _pg_rows(query, a, "serving_chunks", "contract-7") == 0
    assert _pg_rows(pg_roles["ingest"], a, "chunks", "contract-7") == 3
    # `chunks` itself is readable (migration 5, for HNSW) but only rows of active versions.
    assert _pg_rows(query, a, "chunks", "contract-7") == 0
    for table in ("sections", "records", "record_lines", "document_versions",
                  "review_items", "staging_blobs", "stage_payloads"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _pg_rows(query, a, table)
    with psycopg.connect(query) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("INSERT INTO manifold.documents (tenant_id, document_id) VALUES (%s, 'q')", (a,))
    with psycopg.connect(query) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        with conn.transaction():
            conn.execute("SET TRANSACTION READ WRITE")
            conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (a,))
            conn.execute("INSERT INTO manifold.documents (tenant_id, document_id) VALUES (%s, 'q')", (a,))


def test_delete_version_removes_it_everywhere(stores: Stores, tenants, pg_roles, es_client, neo4j_driver) -> None:
    a, _ = tenants
    first, second = build_doc(a), build_doc(a, document_id="invoice-9")  # both name ACME and Beta
    stores.load(first)
    expected_second = stores.load(second).stores
    for store in stores.all:
        store.delete_version(a, "contract-7", 1)
        store.delete_version(a, "contract-7", 1)  # deleting again is a no-op
    assert all(_zero(m) for m in stores.manifests(a))
    with psycopg.connect(pg_roles["admin"]) as conn:
        for table in VERSION_TABLES:
            left = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s AND document_id = %s").format(
                sql.Identifier("manifold", table)), (a, "contract-7")).fetchone()[0]
            assert left == 0, table
    # The other document keeps its artifacts, and the entities it still names.
    assert stores.manifests(a, "invoice-9") == expected_second
    assert _graph_counts(neo4j_driver, a)[2] == 2
    for store in stores.all:
        store.delete_version(a, "invoice-9", 1)
    assert _es_count(es_client, a) == 0
    assert _graph_counts(neo4j_driver, a) == (0, 0, 0)  # no orphan entity survives
    assert _admin_counts(pg_roles["admin"], a) == dict.fromkeys(VERSION_TABLES, 0)


def test_staging_store_round_trip(stores: Stores, tenants) -> None:
    a, _ = tenants
    staging = stores.staging
    content = b"%PDF-1.7 " + bytes(range(256)) * 10
    sha = staging.put_blob(a, content)
    assert sha == hashlib.sha256(content).hexdigest()
    assert staging.put_blob(a, content) == sha  # idempotent
    assert staging.get_blob(a, sha) == content
    staging.put_payload(a, "tenant/doc@3", "parse", b"one")
    staging.put_payload(a, "tenant/doc@3", "parse", b"two")  # last write wins
    staging.put_payload(a, "tenant/doc@3", "chunk", b"three")
    assert staging.get_payload(a, "tenant/doc@3", "parse") == b"two"
    assert staging.get_payload(a, "tenant/doc@3", "chunk") == b"three"
    with pytest.raises(StagedItemMissing):
        staging.get_blob(a, "0" * 64)
    with pytest.raises(StagedItemMissing):
        staging.get_payload(a, "tenant/doc@3", "embed")
    # a stage's micro-batch: one write and one read for several payloads, same rules
    staging.put_payloads(a, [("tenant/doc@4", "parse", b"four"), ("tenant/doc@4", "parse", b"five"),
                             ("tenant/doc@5", "parse", b"six")])
    assert staging.get_payloads(a, [("tenant/doc@4", "parse"), ("tenant/doc@5", "parse"),
                                    ("tenant/doc@3", "chunk"), ("tenant/doc@6", "parse")]) == {
        ("tenant/doc@4", "parse"): b"five", ("tenant/doc@5", "parse"): b"six", ("tenant/doc@3", "chunk"): b"three"}
    assert staging.get_payloads(tenants[1], [("tenant/doc@4", "parse")]) == {}  # another tenant's: absent


def test_store_outages_are_transient(settings, tenants) -> None:
    import neo4j
    from elasticsearch import Elasticsearch

    doc = build_doc(tenants[0])
    port = _closed_port()
    down = make_conninfo(settings.postgres.conninfo(user="manifold_ingest", password="x"), port=str(port))
    pg = PostgresRelationalStore(down, connect_timeout=2)
    es = ElasticsearchTextIndex(Elasticsearch(f"http://127.0.0.1:{port}", request_timeout=2, max_retries=0))
    driver = neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=("neo4j", "x"), connection_timeout=2)
    graph = Neo4jGraphStore(driver)
    staging = PostgresStagingStore(down, connect_timeout=2)
    try:
        for store in (pg, es, graph):
            with pytest.raises(Transient):
                store.write_version(doc)
            with pytest.raises(Transient):
                store.manifest(tenants[0], "contract-7", 1)
            with pytest.raises(Transient):
                store.delete_version(tenants[0], "contract-7", 1)
        with pytest.raises(Transient):
            staging.put_blob(tenants[0], b"x")
        with pytest.raises(Transient):  # the handler surfaces the first store's outage
            handle(doc, pg, es, graph)
    finally:
        driver.close()


# ---------------------------------------------------------------------------- embedding cache


def test_embedding_cache_round_trips_float32_bit_for_bit_and_first_writer_wins(pg_roles, tenants) -> None:
    import numpy as np

    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache

    cache = PostgresEmbeddingCache(pg_roles["ingest"])
    t1, t2 = tenants
    first = np.asarray(_vector(1), dtype=np.float32).tolist()
    noisy = (np.asarray(first, dtype=np.float32) + np.float32(1e-7)).tolist()
    h = _sha("ACME buys sensors from Beta GmbH.")
    assert cache.lookup(t1, "cfg", [h]) == {}
    assert cache.fill(t1, "cfg", {h: first}) == {h: first}
    assert cache.fill(t1, "cfg", {h: noisy}) == {h: first}  # the stored vector wins, bit for bit
    assert cache.lookup(t1, "cfg", [h]) == {h: first}
    assert cache.lookup(t1, "other-cfg", [h]) == {}
    assert cache.lookup(t2, "cfg", [h]) == {}  # per tenant (RLS)
    with pytest.raises(BadInput):
        cache.lookup(t1, "cfg", ["not-a-hash"])
    with psycopg.connect(pg_roles["ingest"]) as conn:  # no tenant set: RLS shows nothing
        assert conn.execute("SELECT count(*) FROM manifold.embedding_cache").fetchone()[0] == 0


def test_embedding_cache_entries_go_with_the_last_chunk_that_uses_them(stores: Stores, tenants, pg_roles) -> None:
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache

    cache = PostgresEmbeddingCache(pg_roles["ingest"])
    tenant = tenants[0]
    doc = build_doc(tenant)
    used = {c.content_sha256: v for c, v in zip(doc.chunks, doc.vectors, strict=True)}
    orphan = _sha("a text no stored chunk has")
    cache.fill(tenant, "cfg", {**used, orphan: _vector(9)})
    stores.relational.write_version(doc)
    other = build_doc(tenant, document_id="contract-8")  # shares the chunk texts
    stores.relational.write_version(other)
    assert cache.sweep(tenant, grace_s=3600) == 0  # nothing old enough yet
    assert cache.sweep(tenant, grace_s=0) == 1  # only the orphan: every other text is in use
    stores.relational.delete_version(tenant, "contract-7", 1)
    assert set(cache.lookup(tenant, "cfg", list(used))) == set(used)  # contract-8 still uses them
    stores.relational.delete_version(tenant, "contract-8", 1)
    assert cache.lookup(tenant, "cfg", list(used)) == {}  # erased with the last chunk using them


def test_a_batch_loads_the_good_versions_and_gives_the_bad_one_its_own_error(stores: Stores, tenants) -> None:
    from manifold.ingest.load import handle_batch

    tenant = tenants[0]
    stores.load(build_doc(tenant, document_id="contract-9"))  # stored with content v1
    docs = [build_doc(tenant, document_id="contract-7"),
            build_doc(tenant, document_id="contract-9", content="other bytes, same version"),  # immutable: bad
            build_doc(tenant, document_id="contract-8")]
    stores.written |= {(tenant, d.doc.document_id, 1) for d in docs}
    first = handle_batch(docs, stores.relational, stores.text, stores.graph)
    assert isinstance(first[1], BadInput)
    assert [type(o).__name__ for o in first] == ["LoadNotice", "BadInput", "LoadNotice"]
    for doc, notice in zip(docs[::2], first[::2], strict=True):
        assert stores.manifests(tenant, doc.doc.document_id) == notice.stores == expected_manifests(doc)
    again = handle_batch(docs, stores.relational, stores.text, stores.graph)  # a retry changes nothing
    assert [o.stores for o in again[::2]] == [o.stores for o in first[::2]]
    assert stores.manifests(tenant, "contract-9") == expected_manifests(build_doc(tenant, document_id="contract-9"))


def test_a_pg_batch_is_one_transaction_a_failed_version_rolls_back_alone(pg_roles, tenants) -> None:
    store = PostgresRelationalStore(pg_roles["ingest"])
    tenant = tenants[0]
    store.write_version(build_doc(tenant, document_id="contract-9"))
    with store.batch(tenant):
        store.write_version(build_doc(tenant, document_id="contract-7"))
        with pytest.raises(BadInput):
            store.write_version(build_doc(tenant, document_id="contract-9", content="changed"))
        store.write_version(build_doc(tenant, document_id="contract-8"))
        with pytest.raises(RuntimeError):  # one tenant per batch
            store.manifest(tenants[1], "contract-7", 1)
    for name in ("contract-7", "contract-8", "contract-9"):
        assert store.manifest(tenant, name, 1) == expected_manifests(build_doc(tenant, document_id=name))[0]
        store.delete_version(tenant, name, 1)
