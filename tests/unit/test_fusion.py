"""Fusion of ranked text branches: RRF math, dedup, identity order, caps, aggregation, degradation."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manifold.query.fusion import deduplicate, fuse, may_share_run, overlaps, rrf_score, union
from manifold.query.types import TextHit

K = 60
W = {"exact": 1.0, "bm25": 1.0, "vector": 1.0}


def hit(chunk: str, rank: int, source: str = "bm25", *, doc: str = "d1", section: str = "s1",
        text: str | None = None, identity: bool = False, version: int = 1) -> TextHit:
    text = text if text is not None else f"text of {chunk}"
    return TextHit(chunk_id=chunk, document_id=doc, version=version, section_id=section, text=text,
                   content_sha256=hashlib.sha256(text.encode()).hexdigest(), source=source,  # type: ignore[arg-type]
                   rank=rank, identity=identity)


def test_rrf_score_is_weighted_sum_of_reciprocal_ranks() -> None:
    score = rrf_score({"bm25": 3, "vector": 1}, {"bm25": 1.5, "vector": 0.75}, K)
    assert score == pytest.approx(1.5 / 63 + 0.75 / 61)
    assert rrf_score({"exact": 1}, {"bm25": 1.0}, K) == 0.0  # unweighted branch counts nothing


def test_fuse_ranks_by_weighted_rrf_and_keeps_branch_ranks() -> None:
    branches = {
        "bm25": [hit("a", 1, doc="d1"), hit("b", 2, doc="d2"), hit("c", 3, doc="d3")],
        "vector": [hit("c", 1, "vector", doc="d3"), hit("b", 2, "vector", doc="d2")],
    }
    out = fuse(branches, k=K, weights=W, per_document_cap=2, limit=10)
    assert [f.hit.chunk_id for f in out.hits] == ["c", "b", "a"]
    c, b, a = out.hits
    assert c.score == pytest.approx(1 / 63 + 1 / 61)
    assert b.score == pytest.approx(2 / 62)
    assert a.score == pytest.approx(1 / 61)
    assert c.ranks == {"bm25": 3, "vector": 1}
    assert [f.hit.rank for f in out.hits] == [1, 2, 3]
    assert out.hits[0].hit.score == pytest.approx(c.score)


def test_weights_change_the_order() -> None:
    branches = {"bm25": [hit("a", 1, doc="d1"), hit("b", 2, doc="d2")],
                "vector": [hit("b", 1, "vector", doc="d2"), hit("a", 2, "vector", doc="d1")]}
    lexical = fuse(branches, k=K, weights={"bm25": 1.5, "vector": 0.75}, per_document_cap=2, limit=10)
    semantic = fuse(branches, k=K, weights={"bm25": 0.75, "vector": 1.5}, per_document_cap=2, limit=10)
    assert [f.hit.chunk_id for f in lexical.hits] == ["a", "b"]
    assert [f.hit.chunk_id for f in semantic.hits] == ["b", "a"]


def test_dedup_by_chunk_id_keeps_best_rank_per_branch() -> None:
    cands = union({"bm25": [hit("a", 4)], "vector": [hit("a", 2, "vector")]})
    assert len(cands) == 1
    assert cands[0].ranks == {"bm25": 4, "vector": 2}
    assert cands[0].hit.source == "vector"  # better-ranked representative


def test_dedup_by_content_hash_across_documents() -> None:
    same = "Invoice INV-2026-0148 line 1"
    branches = {"bm25": [hit("orig", 1, doc="inv.csv", text=same), hit("replica", 2, doc="replica/inv.csv", text=same)]}
    out = fuse(branches, k=K, weights=W, per_document_cap=2, limit=10)
    assert [f.hit.chunk_id for f in out.hits] == ["orig"]
    assert out.hits[0].merged_ids == ("replica",)
    assert out.hits[0].ranks == {"bm25": 1}  # a duplicate never adds support twice
    assert out.deduplicated == 1


def test_dedup_by_overlap_window_same_section_only() -> None:
    base = "The differential pressure sensor must be calibrated every twelve months on a bench. " * 3
    a = hit("a", 1, text=base)
    b = hit("b", 2, text=base[10:] + " Tail.")  # overlaps a by > 80 %
    other_section = hit("c", 3, section="s2", text=base[5:])
    assert overlaps(a, b)
    assert not overlaps(a, other_section)
    assert overlaps(hit("x", 1, text="abc def"), hit("y", 2, text="zz abc def zz"))  # substring
    kept = deduplicate(union({"bm25": [a, b, other_section]}))
    assert [c.hit.chunk_id for c in kept] == ["a", "c"]
    assert kept[0].merged == ["b"]


def test_small_boundary_overlap_is_not_a_duplicate() -> None:
    a = hit("a", 1, text="x" * 1000 + "shared tail of 150 characters" * 5)
    b = hit("b", 2, text="shared tail of 150 characters" * 5 + "y" * 1000)
    assert not overlaps(a, b)


def test_identity_hits_sort_first_deterministically() -> None:
    branches = {
        "bm25": [hit("lex", 1, doc="d1"), hit("id2", 5, doc="d3")],
        "vector": [hit("lex", 1, "vector", doc="d1")],
        "exact": [hit("id1", 1, "exact", doc="d2", identity=True), hit("id2", 2, "exact", doc="d3", identity=True)],
    }
    out = fuse(branches, k=K, weights=W, per_document_cap=2, limit=10)
    assert [f.hit.chunk_id for f in out.hits] == ["id2", "id1", "lex"]  # id2 has more support than id1
    assert [f.identity for f in out.hits] == [True, True, False]
    assert out.hits[0].hit.identity
    again = fuse(branches, k=K, weights=W, per_document_cap=2, limit=10)
    assert [f.hit.chunk_id for f in again.hits] == [f.hit.chunk_id for f in out.hits]


def test_per_document_cap_then_limit_and_parent_aggregation() -> None:
    branches = {"bm25": [hit("a1", 1, doc="A"), hit("a2", 2, doc="A"), hit("a3", 3, doc="A"),
                         hit("b1", 4, doc="B"), hit("c1", 5, doc="C")]}
    out = fuse(branches, k=K, weights=W, per_document_cap=2, limit=3)
    assert [f.hit.chunk_id for f in out.hits] == ["a1", "a2", "b1"]
    assert out.capped == 1
    docs = out.documents
    assert [d.document_id for d in docs] == ["A", "B"]
    assert docs[0].chunk_ids == ("a1", "a2")
    assert docs[0].score == pytest.approx(1 / 61)  # best chunk's fused score
    assert docs[1].score == pytest.approx(1 / 64)


def test_failed_branch_degrades_but_others_fuse() -> None:
    out = fuse({"bm25": [hit("a", 1)], "vector": []}, k=K, weights=W, per_document_cap=2, limit=10,
               failed={"vector": "Transient: postgres unavailable"})
    assert [f.hit.chunk_id for f in out.hits] == ["a"]
    assert len(out.gaps) == 1
    gap = out.gaps[0]
    assert gap.kind == "degraded" and gap.step is None
    assert gap.detail == "vector branch failed: Transient: postgres unavailable"


def test_empty_input_gives_empty_fusion() -> None:
    out = fuse({}, k=K, weights=W, per_document_cap=2, limit=10)
    assert out.hits == () and out.documents == () and out.gaps == ()


def test_short_rows_sharing_most_characters_are_not_duplicates() -> None:
    assert not overlaps(hit("r1", 1, text="PRD-482 | sensor | 120.50"), hit("r2", 2, text="PRD-483 | sensor | 310.00"))



@settings(max_examples=300, deadline=None)
@given(base=st.text(alphabet="abcde .", min_size=1, max_size=400), cut=st.integers(0, 400),
       keep=st.integers(0, 400), noise=st.text(alphabet="xyz", max_size=120), need=st.integers(1, 400))
def test_the_prefilter_never_rejects_a_real_common_run(base: str, cut: int, keep: int, noise: str,
                                                       need: int) -> None:
    # a window of `base` with noise around it: the pre-filter may only say "no" when the longest
    # common run (SequenceMatcher, as `overlaps` then uses) is shorter than `need`
    from difflib import SequenceMatcher

    other = noise + base[cut:cut + keep] + noise[::-1]
    short, long_ = sorted((base, other), key=len)
    if short and not may_share_run(short, long_, need):
        run = SequenceMatcher(None, short, long_, autojunk=False).find_longest_match(0, len(short), 0, len(long_))
        assert run.size < need


# ---- normalised score fusion --------------------------------------------------------------------

def scored(chunk: str, rank: int, score: float | None, source: str = "bm25", *, doc: str) -> TextHit:
    return hit(chunk, rank, source, doc=doc).model_copy(update={"score": score})


def test_minmax_fusion_is_a_convex_combination_of_rescaled_branch_scores() -> None:
    branches = {
        "bm25": [scored("a", 1, 30.0, doc="d1"), scored("b", 2, 20.0, doc="d2"), scored("c", 3, 10.0, doc="d3")],
        "vector": [scored("c", 1, 0.9, "vector", doc="d3"), scored("b", 2, 0.7, "vector", doc="d2"),
                   scored("d", 3, 0.5, "vector", doc="d4")],
    }
    out = fuse(branches, k=K, weights={"bm25": 0.3, "vector": 0.7}, per_document_cap=1, limit=10, method="minmax")
    got = {f.hit.chunk_id: f.score for f in out.hits}
    # bm25: a 1, b 0.5, c 0; vector: c 1, b 0.5, d 0; absent from a branch = 0
    assert got == pytest.approx({"a": 0.3, "b": 0.3 * 0.5 + 0.7 * 0.5, "c": 0.7, "d": 0.0})
    assert [f.hit.chunk_id for f in out.hits] == ["c", "b", "a", "d"]


def test_zscore_fusion_standardises_each_branch() -> None:
    branches = {"bm25": [scored("a", 1, 3.0, doc="d1"), scored("b", 2, 1.0, doc="d2")],
                "vector": [scored("b", 1, 0.8, "vector", doc="d2"), scored("c", 2, 0.2, "vector", doc="d3")]}
    out = fuse(branches, k=K, weights={"bm25": 0.5, "vector": 0.5}, per_document_cap=1, limit=10, method="zscore")
    got = {f.hit.chunk_id: f.score for f in out.hits}
    # each branch: z = +1 / -1; an absent candidate takes the branch minimum (-1)
    assert got == pytest.approx({"a": 0.5 * 1 + 0.5 * -1, "b": 0.5 * -1 + 0.5 * 1, "c": 0.5 * -1 + 0.5 * -1})


def test_normalised_fusion_keeps_identity_hits_first_and_equal_scores_at_one() -> None:
    branches = {"exact": [scored("x", 1, None, "exact", doc="d9").model_copy(update={"identity": True})],
                "bm25": [scored("a", 1, 5.0, doc="d1"), scored("b", 2, 5.0, doc="d2")]}
    out = fuse(branches, k=K, weights={"exact": 1.0, "bm25": 0.5}, per_document_cap=1, limit=10, method="minmax")
    assert [f.hit.chunk_id for f in out.hits][0] == "x"
    assert {f.hit.chunk_id: f.score for f in out.hits}["a"] == pytest.approx(0.5)  # all equal -> 1.0 each


def test_unknown_fusion_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fusion method"):
        fuse({"bm25": [hit("a", 1)]}, k=K, weights=W, per_document_cap=1, limit=1, method="borda")


def test_fusion_choice_reads_the_class_then_the_default() -> None:
    from manifold.query.executors.hybrid import fusion_choice
    from manifold.shared.config import QuerySettings

    q = QuerySettings(fusion_method={"default": "minmax", "exact": "rrf"},
                      score_weights={"default": {"bm25": 0.4, "vector": 0.6}},
                      rrf_weights={"default": {"bm25": 1.0, "vector": 1.0}, "exact": {"exact": 2.0}})
    assert fusion_choice(q, "semantic") == ("minmax", {"bm25": 0.4, "vector": 0.6})
    assert fusion_choice(q, "exact") == ("rrf", {"exact": 2.0})


# ---- document support ---------------------------------------------------------------------------

def _split_document() -> dict[str, list[TextHit]]:
    """d1 is found by BM25 through its title chunk t and by the vector branch through its body
    chunk b; d2's chunk x is a close second in both branches; d1's chunk w is last in BM25."""
    return {
        "bm25": [scored("t", 1, 9.0, doc="d1"), scored("x", 2, 8.5, doc="d2"), scored("w", 3, 5.0, doc="d1")],
        "vector": [scored("b", 1, 0.9, "vector", doc="d1"), scored("x", 2, 0.85, "vector", doc="d2"),
                   scored("z", 3, 0.5, "vector", doc="d3")],
    }


def test_without_support_a_document_found_by_two_chunks_is_split_into_weak_candidates() -> None:
    out = fuse(_split_document(), k=K, weights={"bm25": 0.5, "vector": 0.5}, per_document_cap=1, limit=10,
               method="minmax")
    # x is close behind in both branches; t and b each count in one branch only
    assert [d.document_id for d in out.documents] == ["d2", "d1", "d3"]


@pytest.mark.parametrize("method", ["minmax", "zscore", "rrf"])
def test_full_support_ranks_the_document_by_both_branches(method: str) -> None:
    out = fuse(_split_document(), k=K, weights={"bm25": 0.5, "vector": 0.5}, per_document_cap=1, limit=10,
               method=method, document_support=1.0)
    # d1 leads both branches (represented by t or b: equal score and rank), d2 is second in both
    assert [d.document_id for d in out.documents] == ["d1", "d2", "d3"]
    assert out.hits[0].hit.chunk_id in ("t", "b")


def test_support_lifts_only_a_documents_lead_chunks_and_scales_with_its_strength() -> None:
    branches = _split_document()
    weights = {"bm25": 0.5, "vector": 0.5}
    full = fuse(branches, k=K, weights=weights, per_document_cap=3, limit=10, method="minmax", document_support=1.0)
    scores = {f.hit.chunk_id: f.score for f in full.hits}
    # bm25 min-max: t 1, x 0.875, w 0; vector: b 1, x 0.875, z 0. The leads t and b carry d1's best
    # of both branches; w, a weaker chunk of d1, keeps its own evidence
    assert scores == pytest.approx({"t": 1.0, "b": 1.0, "x": 0.875, "w": 0.0, "z": 0.0})
    half = fuse(branches, k=K, weights=weights, per_document_cap=3, limit=10, method="minmax", document_support=0.5)
    got = {f.hit.chunk_id: f.score for f in half.hits}
    assert got == pytest.approx({"t": 0.75, "b": 0.75, "x": 0.875, "w": 0.0, "z": 0.0})
    none = fuse(branches, k=K, weights=weights, per_document_cap=3, limit=10, method="minmax")
    got = {f.hit.chunk_id: f.score for f in none.hits}
    assert got == pytest.approx({"t": 0.5, "b": 0.5, "x": 0.875, "w": 0.0, "z": 0.0})


def test_support_never_comes_from_the_exact_branch_and_is_bounded() -> None:
    branches = {"exact": [scored("id", 1, None, "exact", doc="d1").model_copy(update={"identity": True})],
                "bm25": [scored("other", 1, 4.0, doc="d1"), scored("y", 2, 2.0, doc="d2")]}
    out = fuse(branches, k=K, weights={"exact": 1.0, "bm25": 0.5}, per_document_cap=2, limit=10, method="minmax",
               document_support=1.0)
    got = {f.hit.chunk_id: f.score for f in out.hits}
    assert got["other"] == pytest.approx(0.5)  # its own BM25 score only: the exact hit lends nothing
    with pytest.raises(ValueError, match="document_support"):
        fuse(branches, k=K, weights=W, per_document_cap=1, limit=1, document_support=1.5)


def test_support_flows_only_within_a_chunks_neighbourhood_of_its_document() -> None:
    # a long manual: its BM25 lead is chunk 0, its vector lead chunk 40 (another topic)
    far = {"bm25": [scored("t", 1, 9.0, doc="d1"), scored("x", 2, 8.5, doc="d2")],
           "vector": [scored("b", 1, 0.9, "vector", doc="d1").model_copy(update={"ordinal": 40}),
                      scored("x", 2, 0.85, "vector", doc="d2")]}
    out = fuse(far, k=K, weights={"bm25": 0.5, "vector": 0.5}, per_document_cap=3, limit=10, method="minmax",
               document_support=1.0)
    scores = {f.hit.chunk_id: f.score for f in out.hits}
    assert (scores["t"], scores["b"]) == pytest.approx((0.5, 0.5))  # each keeps its own branch only
    near = {b: [h.model_copy(update={"ordinal": 1}) if h.chunk_id == "b" else h for h in hits]
            for b, hits in far.items()}
    out = fuse(near, k=K, weights={"bm25": 0.5, "vector": 0.5}, per_document_cap=3, limit=10, method="minmax",
               document_support=1.0)
    scores = {f.hit.chunk_id: f.score for f in out.hits}
    assert (scores["t"], scores["b"]) == pytest.approx((1.0, 1.0))  # neighbours: the document's both branches
