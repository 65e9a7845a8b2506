"""Contract of the `GraphStore` + `ServingMarks` port, run against Neo4j and PostgreSQL.

Guarantees checked (`manifold.shared.ports`): manifests equal `manifest.expected_neo4j` (so both
adapters report equal counts and checksums); idempotent, exact writes (a smaller rewrite, a
relation changed under the same id); the controlled vocabulary; complete, idempotent deletes
that keep entities still named by another version; tenant isolation; serving marks.
"""

from __future__ import annotations

import pytest
from contract_world import build_doc, eid

from manifold.shared.errors import BadInput
from manifold.shared.ports import GraphStore, ServingMarks
from manifold.shared.stores import manifest as mf


def _zero(m) -> bool:
    return set(m.counts.values()) == {0}


def test_adapter_implements_the_ports(graph_store) -> None:
    assert isinstance(graph_store, GraphStore)
    assert isinstance(graph_store, ServingMarks)


def test_write_returns_the_expected_manifest_and_replays_change_nothing(graph_store, tenants, cleanup) -> None:
    a, _ = tenants
    doc = build_doc(a)
    cleanup.wrote(graph_store, a, "contract-7", 1)
    first = graph_store.write_version(doc)
    assert first == mf.expected_neo4j(doc) == graph_store.manifest(a, "contract-7", 1)
    assert first.counts == {"entities": 2, "edges": 1}
    for _ in range(3):
        assert graph_store.write_version(doc) == first
    assert graph_store.held_versions(a) == {("contract-7", 1)}


def test_rewrite_keeps_exactly_the_new_artifacts(graph_store, tenants, cleanup) -> None:
    a, _ = tenants
    doc = build_doc(a)
    cleanup.wrote(graph_store, a, "contract-7", 1)
    graph_store.write_version(doc)
    smaller = doc.model_copy(update={"entities": doc.entities[:1], "relations": []})
    assert graph_store.write_version(smaller) == mf.expected_neo4j(smaller)
    flipped = doc.relations[0].model_copy(update={"type": "SUPPLIES", "source_id": doc.relations[0].target_id,
                                                  "target_id": doc.relations[0].source_id})
    changed = doc.model_copy(update={"relations": [flipped]})
    assert graph_store.write_version(changed) == mf.expected_neo4j(changed)


def test_vocabulary_allowlist_rejects_before_writing(request, tenants) -> None:
    from contract_adapters import GRAPH_ADAPTERS, make_graph_store

    a, _ = tenants
    for kind in GRAPH_ADAPTERS:
        store = make_graph_store(kind, request, entity_types={"Company", "Supplier"}, relation_types={"SUPPLIES"})
        with pytest.raises(BadInput, match="APPROVED_VENDOR"):
            store.write_version(build_doc(a))
        assert _zero(store.manifest(a, "contract-7", 1))


def test_delete_is_complete_and_keeps_shared_entities(graph_store, tenants, cleanup) -> None:
    a, _ = tenants
    cleanup.wrote(graph_store, a, "contract-7", 1)
    cleanup.wrote(graph_store, a, "other", 1)
    graph_store.write_version(build_doc(a))
    kept = graph_store.write_version(build_doc(a, document_id="other"))  # names the same two entities
    graph_store.delete_version(a, "contract-7", 1)
    graph_store.delete_version(a, "contract-7", 1)
    graph_store.delete_version(a, "never-written", 2)
    assert _zero(graph_store.manifest(a, "contract-7", 1))
    assert graph_store.manifest(a, "other", 1) == kept
    assert graph_store.held_versions(a) == {("other", 1)}
    graph_store.delete_version(a, "other", 1)
    assert graph_store.held_versions(a) == set()
    if hasattr(graph_store, "tenants"):
        assert a not in graph_store.tenants()  # no orphan entity survives


def test_tenants_are_isolated(graph_store, tenants, cleanup) -> None:
    a, b = tenants
    cleanup.wrote(graph_store, a, "contract-7", 1)
    cleanup.wrote(graph_store, b, "contract-7", 1)
    expected_a = graph_store.write_version(build_doc(a))
    assert _zero(graph_store.manifest(b, "contract-7", 1))
    assert graph_store.held_versions(b) == set()
    assert eid(a, "acme") != eid(b, "acme")
    graph_store.write_version(build_doc(b))
    graph_store.set_serving(b, "contract-7", 1, True)
    graph_store.delete_version(b, "contract-7", 1)
    assert graph_store.manifest(a, "contract-7", 1) == expected_a
    assert graph_store.serving_drift(a, set()) == set()


def test_serving_marks(graph_store, tenants, cleanup) -> None:
    a, _ = tenants
    cleanup.wrote(graph_store, a, "contract-7", 1)
    cleanup.wrote(graph_store, a, "contract-7", 2)
    doc = build_doc(a)
    graph_store.write_version(doc)
    graph_store.write_version(build_doc(a, version=2))
    v1, v2 = ("contract-7", 1), ("contract-7", 2)
    assert graph_store.serving_drift(a, set()) == set()
    assert graph_store.serving_drift(a, {v1}) == {v1}
    graph_store.set_serving(a, "contract-7", 1, True)
    graph_store.set_serving(a, "contract-7", 1, True)
    assert graph_store.serving_drift(a, {v1}) == set()
    assert graph_store.serving_drift(a, {v2}) == {v1, v2}
    graph_store.write_version(doc)  # a replay keeps the marks
    assert graph_store.serving_drift(a, {v1}) == set()
    graph_store.set_serving(a, "contract-7", 1, False)
    assert graph_store.serving_drift(a, set()) == set()
    assert graph_store.held_versions(a) == {v1, v2}


def test_serving_marks_of_many_versions_at_once(graph_store, tenants, cleanup) -> None:
    """The publisher marks a whole batch with one `set_serving_many`; it touches exactly those
    versions of that tenant."""
    a, b = tenants
    for tenant, doc_id in ((a, "contract-7"), (a, "other"), (b, "contract-7")):
        cleanup.wrote(graph_store, tenant, doc_id, 1)
        graph_store.write_version(build_doc(tenant, document_id=doc_id))
    both = {("contract-7", 1), ("other", 1)}
    graph_store.set_serving_many(a, sorted(both), True)
    assert graph_store.serving_drift(a, both) == set()
    assert graph_store.serving_drift(b, set()) == set()  # the other tenant's version untouched
    graph_store.set_serving_many(a, [("other", 1)], False)
    assert graph_store.serving_drift(a, {("contract-7", 1)}) == set()


def test_both_adapters_report_equal_manifests(request, tenants, cleanup) -> None:
    from contract_adapters import GRAPH_ADAPTERS, make_graph_store

    a, _ = tenants
    doc = build_doc(a)
    manifests = []
    for kind in GRAPH_ADAPTERS:
        store = make_graph_store(kind, request)
        cleanup.wrote(store, a, "contract-7", 1)
        manifests.append(store.write_version(doc))
    assert manifests[0] == manifests[1]


def test_a_batch_write_gives_each_version_its_own_outcome_and_reads_back_in_one_call(graph_store, tenants,
                                                                                     cleanup) -> None:
    a, b = tenants
    docs = [build_doc(a, f"contract-b{i}") for i in range(3)]  # they name the same entities
    for d in docs:
        cleanup.wrote(graph_store, a, d.doc.document_id, 1)
    graph_store.write_version(docs[0])  # then rewritten smaller inside the batch
    smaller = docs[0].model_copy(update={"entities": docs[0].entities[:1], "relations": []})
    refused = docs[1].model_copy(update={"relations": [docs[1].relations[0].model_copy(update={"type": "not snake"})]})
    outcomes = graph_store.write_versions([smaller, refused, docs[2]])
    assert outcomes[0] == mf.expected_neo4j(smaller)
    assert isinstance(outcomes[1], BadInput)
    assert outcomes[2] == mf.expected_neo4j(docs[2])
    keys = [(d.doc.document_id, 1) for d in docs]
    read = graph_store.manifests(a, keys)
    assert read == {k: graph_store.manifest(a, *k) for k in keys}
    assert read[keys[0]].counts == {"entities": 1, "edges": 0} and _zero(read[keys[1]])
    assert _zero(graph_store.manifests(b, keys)[keys[2]])  # another tenant sees none of it
    again = graph_store.write_versions(docs)  # the retry writes the fixed batch; a replay changes nothing
    assert again == [mf.expected_neo4j(d) for d in docs] == graph_store.write_versions(docs)
    with pytest.raises(ValueError, match="one tenant"):
        graph_store.write_versions([docs[0], build_doc(b)])
