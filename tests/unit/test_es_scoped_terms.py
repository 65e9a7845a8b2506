"""`es_mapping.scoped_terms`: the tenant-scoped form of the pre-analysed BM25 fields."""

from __future__ import annotations

from manifold.query.executors.bm25 import TIE_BREAKER, TITLE_BOOST, bm25_query
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


def _clauses(body: dict) -> dict[str, list[dict]]:
    queries = body["bool"]["must"][0]["dis_max"]["queries"]
    return {name: [c["term"][name] for c in q["bool"]["should"]]
            for q in queries for name in {next(iter(c["term"])) for c in q["bool"]["should"]}}


def test_the_query_uses_the_asking_tenants_scope() -> None:
    body = bm25_query("signing key rotation", "acme", None)
    clauses = _clauses(body)
    expected = scoped_terms("acme", analysis.terms("signing key rotation") + ["signingkey", "keyrot"]).split()
    assert [c["value"] for c in clauses["text_terms"]] == expected  # the words, then the pairs joined
    assert [c["value"] for c in clauses["title_terms"]] == expected
    assert all(tenant_key("other") not in c["value"] for cs in clauses.values() for c in cs)


def test_term_boosts_apply_per_field_and_title_keeps_its_weight() -> None:
    scoped = scoped_terms("acme", ["sign", "key"]).split()
    boosts = {"text_terms": {scoped[0]: 0.8, scoped[1]: 1.5}, "title_terms": {scoped[0]: 2.0}}
    clauses = _clauses(bm25_query("signing key", "acme", None, boosts))
    assert [c["boost"] for c in clauses["text_terms"]] == [0.8, 1.5, 1.0]  # "signingkey": no boost given
    assert [c["boost"] for c in clauses["title_terms"]] == [2.0 * TITLE_BOOST, 1.0 * TITLE_BOOST, 1.0 * TITLE_BOOST]
    assert bm25_query("signing key", "acme", None)["bool"]["must"][0]["dis_max"]["tie_breaker"] == TIE_BREAKER


def test_a_query_of_stop_words_matches_nothing() -> None:
    body = bm25_query("the of and", "acme", ["d1"])
    assert body["bool"]["must"] == [{"match_none": {}}]
    assert {"terms": {"document_id": ["d1"]}} in body["bool"]["filter"]


def test_the_query_always_carries_the_readers_serving_and_acl_filter() -> None:
    """Replies are also checked in PostgreSQL (final_check under RLS), so a reply-level leak test
    does not notice a BM25 query without its Elasticsearch ACL filter; this pins the filter itself."""
    from manifold.shared.stores.serving import es_serving_filter

    for docs in (None, ["d1"]):
        body = bm25_query("signing key rotation", "acme", docs)
        assert all(f in body["bool"]["filter"] for f in es_serving_filter("acme"))
    assert all(f in bm25_query("the of", "acme", None)["bool"]["filter"] for f in es_serving_filter("acme"))


def test_terms_given_by_the_caller_build_the_same_body() -> None:
    from manifold.query.executors.bm25 import query_terms

    terms = query_terms("signing key rotation", "acme")
    assert bm25_query("signing key rotation", "acme", ["d1"], terms=terms) == bm25_query(
        "signing key rotation", "acme", ["d1"])
    assert terms == scoped_terms("acme", analysis.query_terms("signing key rotation")).split()


def test_adjacent_words_are_also_looked_for_joined() -> None:
    """Configuration keys join words: "week start" asks about `weekstart`, "sit-ups" about
    `situps`; words apart by other punctuation, short words, digits and stop words never pair."""
    assert analysis.compound_terms("make the week start on Monday") == ["weekstart"]
    assert analysis.compound_terms("the man who did 251 sit-ups") == analysis.terms("manwho whodid situps")
    assert analysis.compound_terms("taskwarrior: make it so") == []
    assert analysis.compound_terms("core.hooksPath is set") == []
    assert analysis.compound_terms("the data set, or dataset") == []  # the joined word is already a term
    assert analysis.compound_terms("") == []
