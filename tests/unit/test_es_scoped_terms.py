"""`es_mapping.scoped_terms`: the tenant-scoped form of the pre-analysed BM25 fields."""

from __future__ import annotations

from manifold.query.executors.bm25 import bm25_query
from manifold.shared import analysis
from manifold.shared.stores.es_mapping import scoped_terms, tenant_key


def test_each_term_carries_its_tenants_key() -> None:
    value = scoped_terms("acme", analysis.terms("Signing keys rotate"))
    key = tenant_key("acme")
    assert value == f"{key}|sign {key}|key {key}|rotat"
    assert len(key) == 12
    assert tenant_key("acme") != tenant_key("acme2")


def test_no_terms_no_value() -> None:
    assert scoped_terms("acme", []) == ""


def test_a_long_term_is_cut_the_same_way_for_index_and_query() -> None:
    long = "x" * 255
    value = scoped_terms("acme", [long])
    assert len(value) == 255 and " " not in value
    assert value == scoped_terms("acme", analysis.terms(long))


def test_the_query_uses_the_asking_tenants_scope() -> None:
    body = bm25_query("signing key rotation", "acme", None)
    query = body["bool"]["must"][0]["multi_match"]["query"]
    assert query == scoped_terms("acme", analysis.terms("signing key rotation"))
    assert tenant_key("other") not in query
