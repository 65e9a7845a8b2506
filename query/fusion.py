"""Fusion of ranked text branches (exact, BM25, vector) into one ranking: pure functions, no I/O.

`fuse(branches, ...)` guarantees, in order:

1. **Union.** Every hit of every branch that did not fail is a candidate. A branch that failed
   (named in `failed`) contributes nothing and yields one `Gap(kind="degraded")`; the others
   still fuse.
2. **Deduplication.** Candidates are merged, in this order, when they have the same `chunk_id`;
   the same `content_sha256` (identical text, e.g. a replicated document); or they *overlap*:
   same document and section and one text is contained in the other, or their longest common
   run of characters (at least `MIN_OVERLAP_CHARS`) covers more than `OVERLAP_SHARE` of the
   shorter text (chunk overlap windows). The merged candidate keeps the better-ranked hit as its representative (best
   branch rank, then branch order exact < bm25 < vector, then chunk id) and remembers every
   merged chunk id in `merged_ids`. Per branch it keeps the *best* rank only, so a duplicate
   never adds support from the same branch twice.
3. **Scoring**, by `method`:
   - `"rrf"` (weighted reciprocal rank fusion): `score = sum over branches b of
     weights[b] / (k + rank_b)`;
   - `"minmax"` / `"zscore"` (normalised score fusion, convex when the weights sum to 1):
     `score = sum over branches b of weights[b] * norm_b(s_b)`, where `s_b` is the candidate's
     best store score in branch b and `norm_b` rescales branch b's scores over that branch's own
     hits: min-max to [0, 1] (every score 1 when they are all equal), or the z-score
     `(s - mean) / std` (0 when std is 0). A candidate absent from a branch gets that branch's
     lowest normalised value (0 for min-max). A hit without a store score (exact identity hits)
     normalises to the branch maximum.
   A branch missing from `weights` has weight 0.
   **Document support** (`document_support` = s in [0, 1], default 0): a document's *lead*
   chunks (its best candidate in the BM25 or the vector branch; never the exact branch) also
   draw on the best showing in the other branch of their *neighbourhood* (the document's
   candidates at most `SUPPORT_WINDOW` chunks away, by `TextHit.ordinal`), scaled by s. A lead's contribution
   from branch b is the larger of its own and s times its document's best: for RRF
   `max(w_b / (k + rank_b), s * w_b / (k + doc_rank_b))`, for normalised fusion
   `w_b * max(norm_b, absent_b + s * (doc_norm_b - absent_b))`, where doc_rank_b / doc_norm_b
   are the best rank / normalised score of any candidate of the lead's neighbourhood in branch b.
   With s = 0 this is plain chunk-level fusion. With s = 1 a document that one branch finds by
   its title chunk and the other by its body is ranked by both (as document-level fusion would
   rank it), instead of being split into two weak candidates; a chunk that leads no branch
   keeps only its own evidence, so a weak chunk of a strong document does not ride on it; and in
   a long manual a lead does not ride on a passage about something else far away in it.
4. **Identity boost (deterministic).** Candidates carrying an exact identity hit
   (`TextHit.identity`) sort before every other candidate; within each group the order is fused
   score descending, then best rank, then chunk id. So an exact id match is never outranked by
   a lexical or semantic neighbour, and the order is total (reproducible).
5. **Per-document cap, then parent aggregation.** Walking that order, at most
   `per_document_cap` chunks per document are kept; then at most `limit`. `documents` groups the
   kept chunks by document (document score = its best chunk's fused score), best first.

The output hits are copies of the representatives with `rank` = fused rank (1..n) and `score` =
fused score; each `Fused` keeps every branch's original rank in `ranks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from manifold.query.types import Gap, TextHit

FUSION_METHODS = ("rrf", "minmax", "zscore")
BRANCH_ORDER = ("exact", "bm25", "vector")
OVERLAP_SHARE = 0.8
MIN_OVERLAP_CHARS = 40
"""The share rule needs a common run at least this long: short rows such as table lines share
most of their characters without being the same evidence."""


@dataclass(frozen=True)
class Fused:
    """One fused chunk: the representative hit (fused rank and score) and its provenance."""

    hit: TextHit
    score: float
    ranks: dict[str, int]
    """branch -> that branch's original (best) rank for this chunk or any of its duplicates."""
    identity: bool
    merged_ids: tuple[str, ...] = ()
    """Chunk ids folded into this one by deduplication (not including `hit.chunk_id`)."""


@dataclass(frozen=True)
class DocumentGroup:
    document_id: str
    version: int
    score: float
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True)
class Fusion:
    hits: tuple[Fused, ...]
    documents: tuple[DocumentGroup, ...]
    gaps: tuple[Gap, ...] = ()
    candidates: int = 0
    """Branch hits that entered the union (the same chunk from two branches counts twice)."""
    deduplicated: int = 0
    """Branch hits folded into another candidate (same chunk id, content hash or overlap)."""
    capped: int = 0
    """Candidates dropped by the per-document cap."""


@dataclass
class _Candidate:
    hit: TextHit
    branch: str
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)
    identity: bool = False
    merged: list[str] = field(default_factory=list)

    def sort_key(self) -> tuple[int, int, str]:
        """Better-ranked first: best rank over branches, then branch order, then chunk id."""
        best = min(self.ranks.values())
        branch = min((b for b, r in self.ranks.items() if r == best), key=_branch_index)
        return (best, _branch_index(branch), self.hit.chunk_id)

    def absorb(self, other: _Candidate) -> None:
        """Merge `other` into self; the better-ranked hit stays the representative."""
        ids = {self.hit.chunk_id, other.hit.chunk_id, *self.merged, *other.merged}
        if other.sort_key() < self.sort_key():
            self.hit, self.branch = other.hit, other.branch
        for branch, rank in other.ranks.items():
            self.ranks[branch] = min(rank, self.ranks.get(branch, rank))
        for branch, score in other.scores.items():
            mine = self.scores.get(branch, score)
            self.scores[branch] = None if score is None or mine is None else max(score, mine)
        self.identity = self.identity or other.identity
        self.merged = sorted(ids - {self.hit.chunk_id})


def _branch_index(branch: str) -> int:
    return BRANCH_ORDER.index(branch) if branch in BRANCH_ORDER else len(BRANCH_ORDER)


def union(branches: Mapping[str, Sequence[TextHit]]) -> list[_Candidate]:
    """Every hit of every branch, merged by chunk id (best rank per branch)."""
    by_id: dict[str, _Candidate] = {}
    for branch in sorted(branches, key=_branch_index):
        for hit in branches[branch]:
            cand = _Candidate(hit=hit, branch=branch, ranks={branch: hit.rank}, scores={branch: hit.score},
                              identity=hit.identity)
            if hit.chunk_id in by_id:
                by_id[hit.chunk_id].absorb(cand)
            else:
                by_id[hit.chunk_id] = cand
    return sorted(by_id.values(), key=_Candidate.sort_key)


def overlaps(a: TextHit, b: TextHit, share: float = OVERLAP_SHARE) -> bool:
    """Same document and section, and one text contains the other or their longest common run of
    characters (at least `MIN_OVERLAP_CHARS`) covers more than `share` of the shorter text."""
    if a.document_id != b.document_id or a.section_id != b.section_id:
        return False
    short, long_ = sorted((a.text, b.text), key=len)
    if not short:
        return False
    if short in long_:
        return True
    need = max(MIN_OVERLAP_CHARS, math.floor(share * len(short)) + 1)  # the run length that counts
    if need > len(short) or not may_share_run(short, long_, need):
        return False
    match = SequenceMatcher(None, short, long_, autojunk=False).find_longest_match(0, len(short), 0, len(long_))
    return match.size >= need


def may_share_run(short: str, long_: str, need: int) -> bool:
    """False only if `short` and `long_` have no common run of `need` characters (a necessary
    condition, checked without SequenceMatcher, which costs far more on two long chunks and runs
    for every pair of candidates of one section): such a run contains one of `short`'s aligned
    blocks of `need // 2` characters, so if no block occurs in `long_` there is no run."""
    step = max(1, need // 2)
    return any(short[i:i + step] in long_ for i in range(0, len(short) - step + 1, step))


def deduplicate(candidates: list[_Candidate], share: float = OVERLAP_SHARE) -> list[_Candidate]:
    """Merge candidates with the same content hash, then overlapping ones (see module docstring)."""
    by_hash: dict[str, _Candidate] = {}
    for cand in sorted(candidates, key=_Candidate.sort_key):
        key = cand.hit.content_sha256
        if key in by_hash:
            by_hash[key].absorb(cand)
        else:
            by_hash[key] = cand
    kept: list[_Candidate] = []
    for cand in sorted(by_hash.values(), key=_Candidate.sort_key):
        for other in kept:
            if overlaps(other.hit, cand.hit, share):
                other.absorb(cand)
                break
        else:
            kept.append(cand)
    return kept


def rrf_score(ranks: Mapping[str, int], weights: Mapping[str, float], k: int) -> float:
    """Weighted reciprocal rank fusion: sum of weights[b] / (k + rank_b)."""
    return sum(weights.get(branch, 0.0) / (k + rank) for branch, rank in ranks.items())


def normaliser(scores: Sequence[float | None], method: str) -> tuple[dict[float, float], float]:
    """For one branch's store scores: (score -> normalised score, value for an absent candidate).
    `None` scores (no store score) normalise to the branch maximum."""
    known = [s for s in scores if s is not None]
    if not known:
        return {}, 0.0
    if method == "minmax":
        low, high = min(known), max(known)
        span = high - low
        return {s: (s - low) / span if span > 0 else 1.0 for s in known}, 0.0
    if method == "zscore":
        mean = sum(known) / len(known)
        std = math.sqrt(sum((s - mean) ** 2 for s in known) / len(known))
        table = {s: (s - mean) / std if std > 0 else 0.0 for s in known}
        return table, min(table.values())
    raise ValueError(f"unknown score normalisation {method!r} (expected one of {FUSION_METHODS})")


SUPPORTING_BRANCHES = ("bm25", "vector")
"""Branches whose evidence a chunk may share with its document (an exact hit is the chunk's own)."""


def rrf_scores(candidates: Sequence[_Candidate], weights: Mapping[str, float], k: int,
               support: float = 0.0) -> list[float]:
    """Weighted RRF per candidate, with document support `support` (module docstring, step 3)."""
    def own(cand: _Candidate, branch: str) -> float:
        return rrf_score({branch: cand.ranks[branch]}, weights, k) if branch in cand.ranks else 0.0

    best, leads = _document_best(candidates, own)
    out = []
    for cand in candidates:
        total = 0.0
        for branch in weights:
            value = own(cand, branch)
            if support and id(cand) in leads:
                value = max(value, support * (best(branch, cand) or 0.0))
            total += value
        out.append(total)
    return out


def normalised_scores(candidates: Sequence[_Candidate], branches: Mapping[str, Sequence[TextHit]],
                      weights: Mapping[str, float], method: str, support: float = 0.0) -> list[float]:
    """Convex combination of per-branch normalised store scores, with document support `support`
    (module docstring, step 3)."""
    tables = {}
    for branch, hits in branches.items():
        table, absent = normaliser([h.score for h in hits], method)
        top = max(table.values()) if table else 1.0
        tables[branch] = (table, absent, top)

    def own(cand: _Candidate, branch: str) -> float:
        table, absent, top = tables[branch]
        if branch not in cand.ranks:
            return absent
        score = cand.scores.get(branch)
        return top if score is None else table[score]

    best, leads = _document_best(candidates, own)
    out = []
    for cand in candidates:
        total = 0.0
        for branch, (_, absent, _) in tables.items():
            w = weights.get(branch, 0.0)
            if not w:
                continue
            value = own(cand, branch)
            doc = best(branch, cand) if id(cand) in leads else None
            if support and doc is not None and id(cand) in leads:
                value = max(value, absent + support * (doc - absent))
            total += w * value
        out.append(total)
    return out


SUPPORT_WINDOW = 2
"""Document support flows only between chunks at most this many positions apart in their document
(`TextHit.ordinal`): a short document (an abstract: its title chunk and its body) is supported as
a whole, while in a long manual a chunk draws only on its own neighbourhood, not on a passage
about something else fifty chunks away."""


def _document_best(candidates: Sequence[_Candidate], value: Callable[[_Candidate, str], float],
                   ) -> tuple[Callable[[str, _Candidate], float | None], set[int]]:
    """(support, leads): `support(branch, cand)` is the largest `value` in that supporting
    branch of the candidates of `cand`'s document at most `SUPPORT_WINDOW` chunks away from it
    (None when there is none); the leads are `id()` of each document's best candidate per
    supporting branch (the first in candidate order on a tie)."""
    shown: dict[tuple[str, str], list[tuple[int, float]]] = {}
    best: dict[tuple[str, str], float] = {}
    lead: dict[tuple[str, str], int] = {}
    for cand in candidates:
        for branch in cand.ranks:
            if branch in SUPPORTING_BRANCHES:
                key = (branch, cand.hit.document_id)
                v = value(cand, branch)
                shown.setdefault(key, []).append((cand.hit.ordinal, v))
                if key not in best or v > best[key]:
                    best[key], lead[key] = v, id(cand)

    def support(branch: str, cand: _Candidate) -> float | None:
        near = [v for ordinal, v in shown.get((branch, cand.hit.document_id), ())
                if abs(ordinal - cand.hit.ordinal) <= SUPPORT_WINDOW]
        return max(near) if near else None

    return support, set(lead.values())


def fuse(branches: Mapping[str, Sequence[TextHit]], *, k: int, weights: Mapping[str, float],
         per_document_cap: int, limit: int, failed: Mapping[str, str] | None = None,
         method: str = "rrf", document_support: float = 0.0) -> Fusion:
    """Union, deduplicate, score (`method`: weighted RRF or normalised score fusion),
    identity-first order, per-document cap, parent aggregation (see the module docstring)."""
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion method {method!r} (expected one of {FUSION_METHODS})")
    if not 0.0 <= document_support <= 1.0:
        raise ValueError(f"document_support must be within [0, 1], got {document_support}")
    failed = dict(failed or {})
    gaps = tuple(Gap(kind="degraded", step=None, detail=f"{branch} branch failed: {reason}")
                 for branch, reason in sorted(failed.items(), key=lambda kv: _branch_index(kv[0])))
    live = {b: hits for b, hits in branches.items() if b not in failed}
    candidates = union(live)
    total = sum(len(h) for h in live.values())
    merged = deduplicate(candidates)
    if method == "rrf":
        scores = rrf_scores(merged, weights, k, document_support)
    else:
        scores = normalised_scores(merged, live, weights, method, document_support)
    scored = list(zip(merged, scores, strict=True))
    scored.sort(key=lambda cs: (not cs[0].identity, -cs[1], min(cs[0].ranks.values()), cs[0].hit.chunk_id))
    per_doc: dict[str, int] = {}
    kept: list[tuple[_Candidate, float]] = []
    capped = 0
    for cand, score in scored:
        doc = cand.hit.document_id
        if per_doc.get(doc, 0) >= per_document_cap:
            capped += 1
            continue
        per_doc[doc] = per_doc.get(doc, 0) + 1
        kept.append((cand, score))
    kept = kept[:limit]
    hits = tuple(
        Fused(hit=cand.hit.model_copy(update={"rank": i, "score": score, "identity": cand.identity}), score=score,
              ranks=dict(sorted(cand.ranks.items(), key=lambda kv: _branch_index(kv[0]))),
              identity=cand.identity, merged_ids=tuple(cand.merged))
        for i, (cand, score) in enumerate(kept, start=1)
    )
    return Fusion(hits=hits, documents=aggregate(hits), gaps=gaps, candidates=total,
                  deduplicated=total - len(merged), capped=capped)


def aggregate(hits: Sequence[Fused]) -> tuple[DocumentGroup, ...]:
    """Group fused chunks by parent document; a document's score is its best chunk's score.
    Documents are ordered by their best chunk's position in `hits`."""
    groups: dict[str, list[Fused]] = {}
    for f in hits:
        groups.setdefault(f.hit.document_id, []).append(f)
    return tuple(
        DocumentGroup(document_id=doc, version=fs[0].hit.version, score=max(f.score for f in fs),
                      chunk_ids=tuple(f.hit.chunk_id for f in fs))
        for doc, fs in groups.items()
    )
