"""Contract of the `TextIndex` + `ServingMarks` port, run against Elasticsearch and PostgreSQL.

Guarantees checked (`manifold.shared.ports`): the manifest read back equals the expected one
(`manifest.expected_elasticsearch`, so both adapters report equal counts AND checksums for the
same document); writes are idempotent and exact (a smaller rewrite leaves exactly the new
chunks); deletes are complete and idempotent; tenants are isolated; serving marks are per
version, idempotent and reported by `held_versions` / `serving_drift`; and the PostgreSQL
analyzer produces the tokens of Elasticsearch's `manifold_english`.
"""

from __future__ import annotations

import pytest
from contract_world import build_doc

from manifold.shared.ports import ServingMarks, TextIndex
from manifold.shared.stores import manifest as mf


def _zero(m) -> bool:
    return set(m.counts.values()) == {0}


def test_adapter_implements_the_ports(text_index) -> None:
    assert isinstance(text_index, TextIndex)
    assert isinstance(text_index, ServingMarks)


def test_write_returns_the_expected_manifest_and_replays_change_nothing(text_index, tenants, cleanup) -> None:
    a, _ = tenants
    doc = build_doc(a)
    cleanup.wrote(text_index, a, "contract-7", 1)
    expected = mf.expected_elasticsearch(doc)
    first = text_index.write_version(doc)
    assert first == expected == text_index.manifest(a, "contract-7", 1)
    assert first.counts == {"chunks": 3}
    for _ in range(3):
        assert text_index.write_version(doc) == first
    assert text_index.held_versions(a) == {("contract-7", 1)}
    assert a in text_index.tenants()


def test_rewrite_keeps_exactly_the_new_chunks(text_index, tenants, cleanup) -> None:
    a, _ = tenants
    doc = build_doc(a)
    cleanup.wrote(text_index, a, "contract-7", 1)
    text_index.write_version(doc)
    smaller = doc.model_copy(update={"chunks": doc.chunks[:2], "vectors": doc.vectors[:2], "entities": [],
                                     "relations": []})
    assert text_index.write_version(smaller) == mf.expected_elasticsearch(smaller)
    assert text_index.manifest(a, "contract-7", 1).counts == {"chunks": 2}


def test_delete_is_complete_and_idempotent(text_index, tenants, cleanup) -> None:
    a, _ = tenants
    cleanup.wrote(text_index, a, "contract-7", 1)
    cleanup.wrote(text_index, a, "other", 1)
    text_index.write_version(build_doc(a))
    kept = text_index.write_version(build_doc(a, document_id="other"))
    text_index.delete_version(a, "contract-7", 1)
    text_index.delete_version(a, "contract-7", 1)
    text_index.delete_version(a, "never-written", 4)
    assert _zero(text_index.manifest(a, "contract-7", 1))
    assert text_index.manifest(a, "other", 1) == kept
    assert text_index.held_versions(a) == {("other", 1)}


def test_tenants_are_isolated(text_index, tenants, cleanup) -> None:
    a, b = tenants
    cleanup.wrote(text_index, a, "contract-7", 1)
    cleanup.wrote(text_index, b, "contract-7", 1)
    expected_a = text_index.write_version(build_doc(a))
    assert _zero(text_index.manifest(b, "contract-7", 1))
    assert text_index.held_versions(b) == set()
    text_index.write_version(build_doc(b))
    text_index.set_serving(b, "contract-7", 1, True)
    text_index.delete_version(b, "contract-7", 1)
    assert text_index.manifest(a, "contract-7", 1) == expected_a
    assert text_index.serving_drift(a, set()) == set()  # B's mark never touched A


def test_serving_marks(text_index, tenants, cleanup) -> None:
    a, _ = tenants
    cleanup.wrote(text_index, a, "contract-7", 1)
    cleanup.wrote(text_index, a, "contract-7", 2)
    text_index.write_version(build_doc(a))
    text_index.write_version(build_doc(a, version=2))
    v1, v2 = ("contract-7", 1), ("contract-7", 2)
    assert text_index.serving_drift(a, set()) == set()  # a write never marks
    assert text_index.serving_drift(a, {v1}) == {v1}
    text_index.set_serving(a, "contract-7", 1, True)
    text_index.set_serving(a, "contract-7", 1, True)  # idempotent
    assert text_index.serving_drift(a, {v1}) == set()
    assert text_index.serving_drift(a, {v2}) == {v1, v2}  # only that version was marked
    text_index.set_serving(a, "contract-7", 2, True)
    text_index.set_serving(a, "contract-7", 1, False)
    assert text_index.serving_drift(a, {v2}) == set()
    assert text_index.held_versions(a) == {v1, v2}


def test_serving_marks_written_in_a_batch_are_searchable_when_it_ends(text_index, tenants, cleanup) -> None:
    """The publisher marks a whole batch inside `batch` (Elasticsearch: one refresh at its end)."""
    a, _ = tenants
    cleanup.wrote(text_index, a, "contract-7", 1)
    cleanup.wrote(text_index, a, "other", 1)
    text_index.write_version(build_doc(a))
    text_index.write_version(build_doc(a, document_id="other"))
    both = {("contract-7", 1), ("other", 1)}
    with text_index.batch(a):
        text_index.set_serving_many(a, sorted(both), True)
        text_index.set_serving_many(a, [], True)  # nothing to mark: no request
    assert text_index.serving_drift(a, both) == set()
    with text_index.batch(a):
        text_index.set_serving(a, "other", 1, False)
    assert text_index.serving_drift(a, {("contract-7", 1)}) == set()


def test_both_adapters_report_equal_manifests(request, tenants, cleanup) -> None:
    from contract_adapters import TEXT_ADAPTERS, make_text_index

    a, _ = tenants
    doc = build_doc(a)
    manifests = []
    for kind in TEXT_ADAPTERS:
        store = make_text_index(kind, request)
        cleanup.wrote(store, a, "contract-7", 1)
        manifests.append(store.write_version(doc))
    assert manifests[0] == manifests[1]


ANALYZER_SAMPLES = (
    "Invoice INV-2026-0148 from Beta GmbH: 2 x PRD-482 at 10.50 EUR (1,000.25 total).",
    "The supplier is not liable for delays; it will notify ACME's buyer e.g. by e-mail.",
    "Calibration certificates are traceable to a national standard -- U.S.A. rules_apply v1.2",
    "Größe: Müller & Søn, naïve café, São Paulo 3rd-party ISO9001",
)


@pytest.mark.parametrize("text", ANALYZER_SAMPLES)
def test_postgres_analyzer_matches_elasticsearch(text: str, es_client) -> None:
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.es_mapping import ES_INDEX
    from manifold.shared.stores.pg_text import analyze

    ElasticsearchTextIndex(es_client).ensure_index()
    tokens = [t["token"] for t in es_client.indices.analyze(index=ES_INDEX, analyzer="manifold_english",
                                                             text=text)["tokens"]]
    assert analyze(text) == tokens


def test_a_batch_write_gives_each_version_its_own_outcome_and_reads_back_in_one_call(text_index, tenants,
                                                                                     cleanup) -> None:
    from manifold.shared.errors import BadInput

    a, b = tenants
    docs = [build_doc(a, f"contract-b{i}") for i in range(3)]
    for d in docs:
        cleanup.wrote(text_index, a, d.doc.document_id, 1)
    text_index.write_version(docs[0])  # then rewritten smaller inside the batch
    smaller = docs[0].model_copy(update={"chunks": docs[0].chunks[:2], "vectors": docs[0].vectors[:2],
                                         "entities": [], "relations": []})
    refused = docs[1].model_copy(update={"chunks": [docs[1].chunks[0].model_copy(update={"section_id": "nowhere"}),
                                                    *docs[1].chunks[1:]]})
    outcomes = text_index.write_versions([smaller, refused, docs[2]])
    assert outcomes[0] == mf.expected_elasticsearch(smaller)
    assert isinstance(outcomes[1], BadInput)
    assert outcomes[2] == mf.expected_elasticsearch(docs[2])
    keys = [(d.doc.document_id, 1) for d in docs]
    read = text_index.manifests(a, keys)
    assert read == {k: text_index.manifest(a, *k) for k in keys}
    assert read[keys[0]].counts == {"chunks": 2} and _zero(read[keys[1]])  # nothing of the refused version
    assert _zero(text_index.manifests(b, keys)[keys[2]])  # another tenant sees none of it
    again = text_index.write_versions(docs)  # the retry writes the fixed batch; a replay changes nothing
    assert again == [mf.expected_elasticsearch(d) for d in docs] == text_index.write_versions(docs)
    with pytest.raises(ValueError, match="one tenant"):
        text_index.write_versions([docs[0], build_doc(b)])
