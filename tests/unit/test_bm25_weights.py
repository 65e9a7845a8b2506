"""`bm25_weights`: per-tenant IDF over the shared Elasticsearch index, as boosts."""

from __future__ import annotations

import math
from typing import Any

import pytest

from manifold.query.executors.bm25_weights import FIELDS, TenantTermWeights, boost, idf


def test_idf_is_lucenes_bm25_idf() -> None:
    assert idf(1, 10) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert idf(10, 10) == pytest.approx(math.log(1 + 0.5 / 10.5))


@pytest.mark.parametrize(("n", "tenant", "index"), [(1, 10, 10_000), (300, 400, 50_000), (7, 7, 7), (2, 5, 5)])
def test_boost_turns_the_index_idf_into_the_tenants(n: int, tenant: int, index: int) -> None:
    assert boost(n, tenant, index) * idf(n, index) == pytest.approx(idf(n, tenant))


def test_a_common_word_of_a_small_tenant_loses_weight_next_to_a_big_index() -> None:
    assert boost(90, 100, 50_000) < 0.1 < boost(1, 100, 50_000) < 1.0


def test_absent_terms_and_stale_counts_stay_finite() -> None:
    assert boost(0, 10, 100) == 1.0
    assert boost(5, 0, 0) == 1.0
    assert 0 < boost(12, 10, 100) < 1.0  # the cached tenant count is older than the frequency


class FakeES:
    """Answers `termvectors` and the tenant count from fixed statistics, counting the requests."""

    def __init__(self, df: dict[str, int], index_docs: int, tenant_docs: int) -> None:
        self.df, self.index_docs, self.tenant_docs = df, index_docs, tenant_docs
        self.calls: list[tuple[str, Any]] = []
        self.timeouts: list[float] = []

    def options(self, *, request_timeout: float) -> FakeES:
        self.timeouts.append(request_timeout)
        return self

    def termvectors(self, *, doc: dict[str, str], **_: Any) -> dict[str, Any]:
        self.calls.append(("termvectors", doc["text_terms"]))
        terms = doc["text_terms"].split()
        return {"term_vectors": {f: {"field_statistics": {"doc_count": self.index_docs},
                                     "terms": {t: ({"doc_freq": self.df[t]} if t in self.df else {}) for t in terms}}
                                 for f in FIELDS}}

    def search(self, *, query: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("count", query["term"]["tenant_id"]))
        return {"aggregations": {f: {"doc_count": self.tenant_docs} for f in FIELDS}}


def test_boosts_come_from_term_and_tenant_statistics_and_are_cached() -> None:
    now = [0.0]
    es = FakeES({"k|key": 40, "k|rotat": 2}, index_docs=50_000, tenant_docs=100)
    weights = TenantTermWeights(es, "idx", ttl_s=30, clock=lambda: now[0])  # type: ignore[arg-type]
    got = weights.boosts("acme", ["k|key", "k|rotat", "k|absent"], deadline=10.0)
    for f in FIELDS:
        assert got[f]["k|key"] == pytest.approx(boost(40, 100, 50_000))
        assert got[f]["k|rotat"] == pytest.approx(boost(2, 100, 50_000))
        assert got[f]["k|absent"] == 1.0
    assert [c[0] for c in es.calls] == ["termvectors", "count"]
    weights.boosts("acme", ["k|key"], deadline=10.0)  # everything cached
    weights.boosts("acme", ["k|key", "k|new"], deadline=10.0)  # only the new term is asked for
    assert es.calls[2:] == [("termvectors", "k|new")]
    now[0] = 31.0  # past the TTL: asked again
    weights.boosts("acme", ["k|key"], deadline=10.0)
    assert [c[0] for c in es.calls[3:]] == ["termvectors", "count"]


def test_no_terms_no_request() -> None:
    es = FakeES({}, 1, 1)
    assert TenantTermWeights(es, "idx").boosts("acme", [], deadline=10.0) == {f: {} for f in FIELDS}  # type: ignore[arg-type]
    assert es.calls == []


def test_a_refused_statistics_request_falls_back_to_index_wide_idf(caplog: pytest.LogCaptureFixture) -> None:
    from elasticsearch import BadRequestError

    class TwoIndexAlias(FakeES):
        def termvectors(self, **_: Any) -> dict[str, Any]:
            raise BadRequestError("alias [manifold-chunks] has more than one index", meta=_Meta(), body={})  # type: ignore[arg-type]

    got = TenantTermWeights(TwoIndexAlias({}, 1, 1), "idx").boosts("acme", ["k|a"], deadline=10.0)  # type: ignore[arg-type]
    assert got == {f: {"k|a": 1.0} for f in FIELDS}
    assert "index-wide IDF" in caplog.text


class _Meta:
    status = 400


def test_every_request_gets_only_the_time_left_until_the_deadline() -> None:
    now = [100.0]
    es = FakeES({"k|a": 1}, index_docs=10, tenant_docs=5)

    def clock() -> float:
        now[0] += 0.5  # each look at the clock: half a second has passed
        return now[0]

    TenantTermWeights(es, "idx", clock=clock).boosts("acme", ["k|a"], deadline=103.0)  # type: ignore[arg-type]
    assert len(es.timeouts) == 2 and all(t <= 3.0 for t in es.timeouts)
    assert es.timeouts[1] < es.timeouts[0]
