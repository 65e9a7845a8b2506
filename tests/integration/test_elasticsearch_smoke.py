"""Elasticsearch is real: BM25 ranks a text field while a keyword field matches exactly."""

from __future__ import annotations

import pytest


def test_bm25_and_keyword(es_client, unique) -> None:
    index = unique("smoke-es")
    es_client.indices.create(
        index=index,
        mappings={
            "properties": {
                "tenant": {"type": "keyword"},
                "invoice_no": {"type": "keyword"},
                "text": {"type": "text"},
            }
        },
    )
    try:
        docs = [
            {"tenant": "t1", "invoice_no": "INV-2024-001", "text": "Invoice for steel bolts and nuts"},
            {"tenant": "t1", "invoice_no": "INV-2024-002", "text": "Credit note for returned copper wire"},
            {"tenant": "t2", "invoice_no": "INV-2024-001", "text": "Steel beams, steel plates and steel bolts"},
        ]
        for i, doc in enumerate(docs):
            es_client.index(index=index, id=str(i), document=doc)
        es_client.indices.refresh(index=index)

        bm25 = es_client.search(
            index=index,
            query={"bool": {"must": {"match": {"text": "steel bolts"}}, "filter": {"term": {"tenant": "t1"}}}},
        )
        hits = bm25["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["0"]  # the tenant filter keeps t2's stronger match out
        assert hits[0]["_score"] > 0

        exact = es_client.search(index=index, query={"term": {"invoice_no": "INV-2024-002"}})
        assert [h["_id"] for h in exact["hits"]["hits"]] == ["1"]
        # keyword fields are not analysed: a lower-cased identifier does not match
        assert es_client.count(index=index, query={"term": {"invoice_no": "inv-2024-002"}})["count"] == 0
    finally:
        es_client.indices.delete(index=index)


def test_server_major_matches_client(es_client) -> None:
    import elasticsearch

    # The integ-test-zip has no handler for `GET /`, so ask the local node for its version.
    nodes = es_client.nodes.info(node_id="_local", filter_path="nodes.*.version")
    server = next(iter(nodes["nodes"].values()))["version"]
    assert server.split(".")[0] == elasticsearch.__versionstr__.split(".")[0]


def test_new_index_version_waits_for_the_alias_switch(es_client, unique) -> None:
    """A new index version is built beside the serving one: the alias moves only on `switch_alias`,
    atomically, and then points at the new index alone."""
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex

    alias, old, new = unique("alias-es"), unique("old-es"), unique("new-es")
    first = ElasticsearchTextIndex(es_client, index=old, alias=alias)
    second = ElasticsearchTextIndex(es_client, index=new, alias=alias)
    try:
        first.ensure_index()
        assert first.alias_targets() == {old}  # fresh deployment: the alias comes with the index
        second.ensure_index()
        assert second.alias_targets() == {old}  # a rebuild does not serve a half-filled index
        assert second.switch_alias() == {old}
        assert second.alias_targets() == {new}
        assert second.switch_alias() == set()  # idempotent
    finally:
        es_client.indices.delete(index=[old, new], ignore_unavailable=True)


def test_stemmed_fields_match_inflections_and_identifiers_stay_exact(es_client, unique) -> None:
    """The pre-analysed BM25 fields: an inflected query meets the stored stem; the keyword
    `identifiers` field is never analysed."""
    from manifold.query.executors.bm25 import bm25_query
    from manifold.shared import analysis
    from manifold.shared.stores.es_mapping import ES_MAPPING, ES_SETTINGS, scoped_terms

    index = unique("stem-es")
    es_client.indices.create(index=index, settings=ES_SETTINGS, mappings=ES_MAPPING)
    try:
        doc = {"tenant_id": "t1", "document_id": "d1", "version": 1, "chunk_id": "c1", "serving": True,
               "text": "Vaccinated mice were studied", "identifiers": ["INV-2026-0148"],
               "text_terms": scoped_terms("t1", analysis.terms("Vaccinated mice were studied")),
               "title_terms": scoped_terms("t1", analysis.terms("Immunity studies"))}
        es_client.index(index=index, id="t1/c1", document=doc, refresh=True)
        query = bm25_query("vaccination study", "t1", None)
        hits = es_client.search(index=index, query=query)["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["t1/c1"]
        assert es_client.search(index=index, query=bm25_query("vaccination", "t2", None))["hits"]["hits"] == []
        assert es_client.count(index=index, query={"term": {"identifiers": "inv-2026-0148"}})["count"] == 0
        assert es_client.count(index=index, query={"term": {"identifiers": "INV-2026-0148"}})["count"] == 1
    finally:
        es_client.indices.delete(index=index, ignore_unavailable=True)


def test_document_frequencies_are_the_tenants_own(es_client, unique) -> None:
    """Terms are scoped to their tenant, so the document frequency BM25 reads for a term is the
    number of the asking tenant's chunks holding it: another tenant's many copies of the same
    words leave it unchanged (with unscoped terms it would count them all). The document count
    and average length are index-wide (module docstring of `es_mapping`)."""
    from manifold.query.executors.bm25 import bm25_query
    from manifold.shared import analysis
    from manifold.shared.stores.es_mapping import ES_MAPPING, ES_SETTINGS, scoped_terms

    index = unique("scoped-es")
    es_client.indices.create(index=index, settings=ES_SETTINGS, mappings=ES_MAPPING)

    def put(tenant: str, chunk: str, text: str) -> None:
        es_client.index(index=index, id=f"{tenant}/{chunk}", refresh=True, document={
            "tenant_id": tenant, "document_id": chunk, "version": 1, "chunk_id": chunk, "serving": True,
            "text": text, "text_terms": scoped_terms(tenant, analysis.terms(text)),
            "title_terms": scoped_terms(tenant, analysis.terms("Manual"))})

    def frequencies(tenant: str, question: str) -> list[int]:
        """The `n` (documents containing the term) of every term in the top hit's explanation."""
        hit = es_client.search(index=index, query=bm25_query(question, tenant, None), explain=True,
                               size=1)["hits"]["hits"][0]
        found: list[int] = []

        def walk(node: dict) -> None:
            if node.get("description", "").startswith("n, number of documents containing term"):
                found.append(int(node["value"]))
            for child in node.get("details", []):
                walk(child)
        walk(hit["_explanation"])
        return found

    try:
        put("t1", "a", "The rotation interval of the signing key is ninety days")
        put("t1", "b", "Backups are kept for thirty days in the cold bucket")
        assert frequencies("t1", "signing key rotation") == [1, 1, 1]
        for i in range(6):
            put("t2", f"c{i}", "The rotation interval of the signing key is ninety days")
        assert frequencies("t1", "signing key rotation") == [1, 1, 1]
        assert frequencies("t2", "signing key rotation") == [6, 6, 6]
        assert {h["_id"] for h in es_client.search(index=index, query=bm25_query("rotation", "t1", None))[
            "hits"]["hits"]} == {"t1/a"}
    finally:
        es_client.indices.delete(index=index, ignore_unavailable=True)


def test_tenant_idf_does_not_move_with_another_tenants_size(es_client, unique) -> None:
    """With `TenantTermWeights` boosts, a tenant's BM25 scores are its own: a second tenant of
    50 chunks (as long as the first tenant's, so the index-wide average length stays put) leaves
    them unchanged, where the index-wide document count alone would raise every IDF."""
    import time

    from manifold.query.executors.bm25 import bm25_query
    from manifold.query.executors.bm25_weights import TenantTermWeights
    from manifold.shared import analysis
    from manifold.shared.stores.es_mapping import ES_MAPPING, ES_SETTINGS, scoped_terms

    index = unique("tenant-idf-es")
    es_client.indices.create(index=index, settings=ES_SETTINGS, mappings=ES_MAPPING)
    texts = ["The rotation interval of the signing key is ninety days",
             "Backups of the signing service are kept ninety days",
             "The cold bucket keeps archives for seven years"]

    def put(tenant: str, chunk: str, text: str) -> None:
        es_client.index(index=index, id=f"{tenant}/{chunk}", document={
            "tenant_id": tenant, "document_id": chunk, "version": 1, "chunk_id": chunk, "serving": True,
            "text": text, "text_terms": scoped_terms(tenant, analysis.terms(text)),
            "title_terms": scoped_terms(tenant, analysis.terms("Manual"))})

    def scores(question: str, weighted: bool) -> dict[str, float]:
        scoped = scoped_terms("t1", analysis.terms(question)).split()
        boosts = TenantTermWeights(es_client, index, ttl_s=0).boosts(
            "t1", scoped, deadline=time.monotonic() + 5) if weighted else None
        hits = es_client.search(index=index, query=bm25_query(question, "t1", None, boosts))["hits"]["hits"]
        return {h["_id"]: h["_score"] for h in hits}

    try:
        for i, text in enumerate(texts):
            put("t1", f"c{i}", text)
        es_client.indices.refresh(index=index)
        question = "how long are signing key backups kept"
        alone = scores(question, weighted=True)
        assert alone == pytest.approx(scores(question, weighted=False))  # one tenant: index == tenant
        for i in range(50):
            put("t2", f"c{i}", texts[i % 3].replace("days", "weeks"))
        es_client.indices.refresh(index=index)
        assert scores(question, weighted=True) == pytest.approx(alone, rel=1e-4)
        assert scores(question, weighted=False)["t1/c1"] > 1.5 * alone["t1/c1"]
    finally:
        es_client.indices.delete(index=index, ignore_unavailable=True)
