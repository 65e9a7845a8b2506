"""Elasticsearch is real: BM25 ranks a text field while a keyword field matches exactly."""

from __future__ import annotations


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
