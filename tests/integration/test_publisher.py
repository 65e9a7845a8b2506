"""The publisher against the real stores: verification before activation, one atomic switch,
readers (through `shared/stores/serving.py`) never see a mix of versions, stale notices change
nothing, deletes hide at once and purge everywhere, gc removes retired versions."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from test_stores import build_doc

from manifold.ingest import load
from manifold.ingest.publisher import PublishPorts, gc, publish
from manifold.ingest.publisher import delete as publish_delete
from manifold.shared.errors import Transient
from manifold.shared.events import DocumentDeleted
from manifold.shared.stores import pg_schema, serving
from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
from manifold.shared.stores.es_mapping import ES_INDEX
from manifold.shared.stores.manifest_pg import PostgresVersionManifest
from manifold.shared.stores.neo4j import Neo4jGraphStore
from manifold.shared.stores.pg_relational import PostgresRelationalStore


@pytest.fixture(scope="module")
def roles(settings, pg_conninfo: str) -> dict[str, str]:
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    return {"ingest": pg.ingest_conninfo(), "query": pg.query_conninfo()}


@pytest.fixture
def ports(roles, es_client, neo4j_driver) -> Iterator[PublishPorts]:
    p = PublishPorts(PostgresVersionManifest(roles["ingest"]), PostgresRelationalStore(roles["ingest"]),
                     ElasticsearchTextIndex(es_client), Neo4jGraphStore(neo4j_driver))
    yield p


@pytest.fixture
def tenant(unique: Callable[[str], str]) -> str:
    return unique("pub")


def _load(ports: PublishPorts, tenant: str, version: int = 1, document_id: str = "contract-7"):
    doc = build_doc(tenant, document_id=document_id, version=version, content=f"v{version}")
    return load.handle(doc, ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]


def _states(ports: PublishPorts, tenant: str, document_id: str = "contract-7") -> dict[int, str]:
    return {e.version: e.state for e in ports.manifest.entries(tenant, document_id)}


def _reads(roles, es_client, neo4j_driver, tenant: str) -> dict[str, set[int]]:
    """The versions of contract-7 a query worker sees through the serving helpers, per store."""
    with psycopg.connect(roles["query"]) as conn, conn.transaction():
        conn.execute("SELECT set_config('manifold.principal', 'reader', true), "  # a reader the ACL policies
                     "set_config('manifold.acl_default', 'tenant', true)")  # admit (no ACL on contract-7)
        active = serving.active_versions(conn, tenant)
        pg = {v for (v,) in conn.execute(
            f"SELECT version FROM manifold.{serving.SERVING_VIEWS['chunks']} WHERE document_id = 'contract-7'")}
    es_client.indices.refresh(index=ES_INDEX)
    hits = es_client.search(index=ES_INDEX, size=100, query={"bool": {
        "filter": serving.es_active_filter(tenant),
        "must": [{"match": {"text": "Beta"}}, {"term": {"document_id": "contract-7"}}]}})["hits"]["hits"]
    edges = neo4j_driver.execute_query(
        f"MATCH (:Entity {{tenant_id: $tenant}})-[r]->(:Entity {{tenant_id: $tenant}}) "
        f"WHERE {serving.cypher_active('r')} AND r.document_id = 'contract-7' "
        "RETURN r.document_id AS document_id, r.version AS version",
        tenant=tenant).records
    return {
        "postgres": pg,
        "elasticsearch": {h["_source"]["version"] for h in serving.check_hits_active(hits, active)},
        "neo4j": {r["version"] for r in serving.check_hits_active([dict(r) for r in edges], active)},
    }


def test_a_verified_version_is_activated_in_one_step(ports, tenant, roles, es_client, neo4j_driver) -> None:
    notice = _load(ports, tenant)
    assert _reads(roles, es_client, neo4j_driver, tenant) == {"postgres": set(), "elasticsearch": set(),
                                                             "neo4j": set()}
    assert publish(notice, ports) == "activated"
    assert _states(ports, tenant) == {1: "active"}
    assert _reads(roles, es_client, neo4j_driver, tenant) == {s: {1} for s in ("postgres", "elasticsearch", "neo4j")}
    assert publish(notice, ports) == "already_active"  # replay: same state
    assert _states(ports, tenant) == {1: "active"}


def test_readers_see_v1_while_v2_is_staged_then_only_v2(ports, tenant, roles, es_client, neo4j_driver) -> None:
    only = {s: {1} for s in ("postgres", "elasticsearch", "neo4j")}
    publish(_load(ports, tenant, 1), ports)
    v2 = _load(ports, tenant, 2)
    assert _reads(roles, es_client, neo4j_driver, tenant) == only
    # the window between marking v2 and the manifest switch: the marks say both, the check says v1
    ports.text.set_serving(tenant, "contract-7", 2, True)  # type: ignore[attr-defined]
    ports.graph.set_serving(tenant, "contract-7", 2, True)  # type: ignore[attr-defined]
    assert _reads(roles, es_client, neo4j_driver, tenant) == only
    assert publish(v2, ports) == "activated"
    assert _states(ports, tenant) == {1: "retired", 2: "active"}
    assert _reads(roles, es_client, neo4j_driver, tenant) == {s: {2} for s in only}
    assert ports.text.serving_drift(tenant, {("contract-7", 2)}) == set()  # type: ignore[attr-defined]
    assert ports.graph.serving_drift(tenant, {("contract-7", 2)}) == set()  # type: ignore[attr-defined]


def test_a_replay_after_a_crash_before_unmarking_clears_the_retired_marks(ports, tenant) -> None:
    """The switch to v2 committed, then the worker died before clearing v1's marks: the redelivered
    notice finds v2 already active and still clears them (no `wrong_version` drift left behind)."""
    publish(_load(ports, tenant, 1), ports)
    v2 = _load(ports, tenant, 2)
    assert publish(v2, ports) == "activated"
    ports.text.set_serving(tenant, "contract-7", 1, True)  # type: ignore[attr-defined]  # the crash
    ports.graph.set_serving(tenant, "contract-7", 1, True)  # type: ignore[attr-defined]
    assert ports.text.serving_drift(tenant, {("contract-7", 2)}) == {("contract-7", 1)}  # type: ignore[attr-defined]
    assert publish(v2, ports) == "already_active"
    assert ports.text.serving_drift(tenant, {("contract-7", 2)}) == set()  # type: ignore[attr-defined]
    assert ports.graph.serving_drift(tenant, {("contract-7", 2)}) == set()  # type: ignore[attr-defined]


def test_a_store_that_does_not_match_blocks_activation(ports, tenant, roles, es_client, neo4j_driver) -> None:
    notice = _load(ports, tenant)
    chunk_id = build_doc(tenant).chunks[0].chunk_id
    es_client.delete(index=ES_INDEX, id=f"{tenant}/{chunk_id}", refresh=True)
    with pytest.raises(Transient, match="elasticsearch: chunks 2/3"):
        publish(notice, ports)
    assert _states(ports, tenant) == {1: "staged"}
    assert _reads(roles, es_client, neo4j_driver, tenant)["postgres"] == set()


def test_a_stale_notice_changes_nothing(ports, tenant, roles, es_client, neo4j_driver) -> None:
    v1, v2 = _load(ports, tenant, 1), _load(ports, tenant, 2)
    assert publish(v2, ports) == "activated"
    assert publish(v1, ports) == "stale"
    assert _states(ports, tenant) == {1: "retired", 2: "active"}
    assert _reads(roles, es_client, neo4j_driver, tenant) == {s: {2} for s in ("postgres", "elasticsearch", "neo4j")}


def test_a_delete_hides_at_once_and_purges_every_store(ports, tenant, roles, es_client, neo4j_driver) -> None:
    publish(_load(ports, tenant, 1), ports)
    other = _load(ports, tenant, 1, "invoice-9")  # names the same two entities
    publish(other, ports)
    assert publish_delete(DocumentDeleted(tenant_id=tenant, document_id="contract-7", version=2), ports) \
        == "delete_applied"
    assert _states(ports, tenant) == {1: "deleted", 2: "deleted"}
    assert _reads(roles, es_client, neo4j_driver, tenant) == {s: set() for s in ("postgres", "elasticsearch", "neo4j")}
    for store in ports.stores:
        assert set(store.manifest(tenant, "contract-7", 1).counts.values()) == {0}
    assert [s.manifest(tenant, "invoice-9", 1) for s in ports.stores] == list(other.stores)
    # a late notice of the deleted document activates nothing and is purged again
    assert publish(_load(ports, tenant, 1), ports) == "deleted"
    assert set(ports.text.manifest(tenant, "contract-7", 1).counts.values()) == {0}
    # a stale delete (older than the active version) changes nothing
    assert publish_delete(DocumentDeleted(tenant_id=tenant, document_id="invoice-9", version=1), ports) \
        == "delete_stale"
    assert _states(ports, tenant, "invoice-9") == {1: "active"}


def test_gc_purges_retired_versions_after_the_grace_period(ports, tenant) -> None:
    publish(_load(ports, tenant, 1), ports)
    v2 = _load(ports, tenant, 2)
    publish(v2, ports)
    assert gc(ports, tenant, grace_s=3600) == 0
    assert ports.text.manifest(tenant, "contract-7", 1).counts["chunks"] == 3
    assert gc(ports, tenant, grace_s=0) == 1
    assert gc(ports, tenant, grace_s=0) == 0
    for store in ports.stores:
        assert set(store.manifest(tenant, "contract-7", 1).counts.values()) == {0}
    assert [s.manifest(tenant, "contract-7", 2) for s in ports.stores] == list(v2.stores)
    assert [e.purged_at is not None for e in ports.manifest.entries(tenant)] == [True, False]
