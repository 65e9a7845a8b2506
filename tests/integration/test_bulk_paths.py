"""The batch paths of load and publish against the real stores (issue 14, 'Bad input'): a batch
with a document Elasticsearch's `_bulk` refuses, and a Neo4j transaction that fails halfway
through a batch. The good documents publish, the bad one fails with its own reason, nothing is
half-published, and a retry changes nothing. The PostgreSQL adapters write a batch with a fixed
number of statements and fall back to one savepoint per document when any of it fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from test_stores import build_doc

from manifold.ingest import load, publisher
from manifold.shared.artifacts import LoadNotice
from manifold.shared.errors import BadInput, Transient
from manifold.shared.stores import pg_schema
from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
from manifold.shared.stores.manifest_pg import PostgresVersionManifest
from manifold.shared.stores.neo4j import Neo4jGraphStore
from manifold.shared.stores.pg_relational import PostgresRelationalStore
from manifold.shared.stores.pg_text import PostgresTextIndex

DOCS = ("bulk-a", "bulk-b", "bulk-c")


@pytest.fixture(scope="module")
def roles(settings, pg_conninfo: str) -> dict[str, str]:
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    return {"ingest": pg.ingest_conninfo(), "query": pg.query_conninfo()}


@pytest.fixture
def tenant(unique: Callable[[str], str]) -> str:
    return unique("bulk")


@pytest.fixture
def ports(roles, es_client, neo4j_driver, tenant) -> Iterator[publisher.PublishPorts]:
    graph = Neo4jGraphStore(neo4j_driver, relation_types=_relations(tenant))
    p = publisher.PublishPorts(PostgresVersionManifest(roles["ingest"]), PostgresRelationalStore(roles["ingest"]),
                               ElasticsearchTextIndex(es_client), graph)
    yield p
    for document_id in DOCS:
        for store in p.stores:
            store.delete_version(tenant, document_id, 1)


def _relations(tenant: str) -> set[str]:
    """An allowlist, so the adapter takes its production path (one index seek per type)."""
    return {r.type for r in build_doc(tenant).relations} | {"OWNS"}


def _states(ports: publisher.PublishPorts, tenant: str) -> dict[str, str]:
    return {d: e.state for d in DOCS for e in ports.manifest.entries(tenant, d)}


def test_an_item_the_bulk_request_refuses_fails_its_document_only(ports, tenant) -> None:
    good_a, bad, good_c = (build_doc(tenant, d) for d in DOCS)
    # a keyword longer than Lucene's 32766-byte term limit: Elasticsearch refuses that one item
    huge = bad.chunks[1].model_copy(update={"identifiers": ["X" * 40_000]})
    bad = bad.model_copy(update={"chunks": [bad.chunks[0], huge, bad.chunks[2]]})
    outcomes = load.handle_batch([good_a, bad, good_c], ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert isinstance(outcomes[0], LoadNotice) and isinstance(outcomes[2], LoadNotice)
    assert isinstance(outcomes[1], BadInput)
    assert f"refused chunk {huge.chunk_id} (status 400)" in str(outcomes[1]) and "immense term" in str(outcomes[1])
    assert set(ports.graph.manifest(tenant, "bulk-b", 1).counts.values()) == {0}  # went no further
    notices = [outcomes[0], outcomes[2]]
    assert publisher.handle_batch(notices, ports) == [None, None]  # type: ignore[arg-type]
    assert _states(ports, tenant) == {"bulk-a": "active", "bulk-c": "active"}  # bulk-b: never staged
    # a retry changes nothing: the good versions load to the same manifests, the bad one fails again
    again = load.handle_batch([good_a, bad, good_c], ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert again[0] == outcomes[0] and again[2] == outcomes[2] and isinstance(again[1], BadInput)
    assert publisher.handle_batch([again[0], again[2]], ports) == [None, None]  # type: ignore[arg-type]
    assert _states(ports, tenant) == {"bulk-a": "active", "bulk-c": "active"}


def test_a_neo4j_transaction_failing_halfway_commits_nothing_of_the_batch(ports, tenant, neo4j_driver) -> None:
    docs = [build_doc(tenant, d) for d in DOCS]
    ports.graph.write_version(docs[1])  # type: ignore[attr-defined]  # bulk-b's version node exists
    # the same store, but giving up on a lock after 5 s (a write takes well under a second)
    impatient = Neo4jGraphStore(neo4j_driver, relation_types=_relations(tenant), tx_timeout_s=5)
    with neo4j_driver.session() as session:
        blocker = session.begin_transaction()  # another writer holds bulk-b's version node
        blocker.run("MATCH (v:DocumentVersion {tenant_id: $t, document_id: 'bulk-b', version: 1}) SET v.held = true",
                    t=tenant).consume()
        try:
            with pytest.raises(Transient, match="timed out"):
                impatient.write_versions(docs)
            for d in ("bulk-a", "bulk-c"):  # nothing of the failed batch transaction was committed
                assert set(ports.graph.manifest(tenant, d, 1).counts.values()) == {0}
            # the runner then handles each document alone: only the blocked one fails
            alone: list[LoadNotice | Exception] = []
            for doc in docs:
                try:
                    alone.append(load.handle(doc, ports.relational, ports.text, impatient))  # type: ignore[arg-type]
                except Transient as err:
                    alone.append(err)
            assert isinstance(alone[0], LoadNotice) and isinstance(alone[2], LoadNotice)
            assert isinstance(alone[1], Transient)
        finally:
            blocker.rollback()
    assert publisher.handle_batch([alone[0], alone[2]], ports) == [None, None]  # type: ignore[list-item]
    assert _states(ports, tenant) == {"bulk-a": "active", "bulk-c": "active"}
    # its retry (the lock released) loads and publishes it; replaying the whole batch changes nothing
    retried = load.handle_batch(docs, ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert all(isinstance(n, LoadNotice) for n in retried) and retried[0] == alone[0] and retried[2] == alone[2]
    assert publisher.handle_batch(retried, ports) == [None, None, None]  # type: ignore[arg-type]
    assert _states(ports, tenant) == {d: "active" for d in DOCS}
    assert [s.manifests(tenant, [(d, 1) for d in DOCS]) for s in ports.stores] == [
        {(d, 1): n.stores[i] for d, n in zip(DOCS, retried, strict=True)} for i in range(3)]  # type: ignore[union-attr]


def test_a_batch_verifies_each_version_on_its_own_and_activates_only_those_that_match(ports, tenant,
                                                                                       es_client) -> None:
    from manifold.shared.stores.es_mapping import ES_INDEX

    docs = [build_doc(tenant, d) for d in DOCS]
    notices = load.handle_batch(docs, ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert all(isinstance(n, LoadNotice) for n in notices)
    es_client.delete(index=ES_INDEX, id=f"{tenant}/{docs[1].chunks[0].chunk_id}", refresh=True)  # bulk-b drifts
    outcomes = publisher.handle_batch(notices, ports)  # type: ignore[arg-type]
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], Transient) and "bulk-b@1 not verified: elasticsearch: chunks 2/3" in str(outcomes[1])
    assert _states(ports, tenant) == {"bulk-a": "active", "bulk-b": "staged", "bulk-c": "active"}
    # the retry (after a reload repaired the store) activates it; the others stay as they are
    reloaded = load.handle_batch([docs[1]], ports.relational, ports.text, ports.graph)  # type: ignore[arg-type]
    assert reloaded == [notices[1]]
    assert publisher.handle_batch(notices, ports) == [None, None, None]  # type: ignore[arg-type]
    assert _states(ports, tenant) == {d: "active" for d in DOCS}


def _fails(doc: object) -> None:
    raise AssertionError("the batch fell back to writing each document")


@pytest.mark.parametrize("kind", ["relational", "text"])
def test_a_postgres_batch_writes_what_single_writes_would_and_isolates_a_bad_document(roles, tenant, kind) -> None:
    store = PostgresRelationalStore(roles["ingest"]) if kind == "relational" else PostgresTextIndex(roles["ingest"])
    good_a, bad, good_c = (build_doc(tenant, d) for d in DOCS)
    try:
        single = store.write_version
        store.write_version = _fails  # type: ignore[method-assign]  # prove the whole-batch path took it
        outcomes = store.write_versions([good_a, good_c])
        store.write_version = single  # type: ignore[method-assign]
        assert outcomes == [store.manifest(tenant, "bulk-a", 1), store.manifest(tenant, "bulk-c", 1)]
        assert all(not isinstance(o, Exception) and sum(o.counts.values()) > 0 for o in outcomes)
        if kind == "relational":  # the same version stored with other content: immutable
            store.write_version(bad.model_copy(update={"doc": bad.doc.model_copy(
                update={"content_sha256": "0" * 64})}))
        else:  # a chunk whose section does not exist fails validation
            bad = bad.model_copy(update={"chunks": [bad.chunks[0].model_copy(update={"section_id": "nowhere"})]
                                         + bad.chunks[1:]})
        again = store.write_versions([good_a, bad, good_c])  # falls back to one savepoint each
        assert again[0] == outcomes[0] and again[2] == outcomes[1]
        assert isinstance(again[1], BadInput)
        assert ("immutable" if kind == "relational" else "nowhere") in str(again[1])
        assert store.write_versions([good_a, good_c]) == outcomes  # a retry changes nothing
    finally:
        for document_id in DOCS:
            store.delete_version(tenant, document_id, 1)
