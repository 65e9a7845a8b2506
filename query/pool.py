"""The candidate pool after fusion: how the fused chunks of a text search are ordered before the
step keeps its `limit` (pure functions, no I/O).

`arrange(fused, terms, limit=..., per_document_cap=..., query=...)` guarantees, in order:

1. **Navigation last.** A chunk that is navigation rather than content (`is_navigation`: a table
   of contents, its lines ending in dot leaders and page numbers, or a section titled
   "Contents") sorts after every content chunk of the pool, unless it is an exact identity hit.
   It stays in the pool: when nothing else matched, it is still evidence of where a topic is.
2. **Identifiers first.** With `terms` (technical identifiers the question names), identity hits
   come first, then the chunks holding more of the terms literally (`routing.terms.occurs`, in
   the section title or the text), in fused order otherwise (`promote_terms`); at most
   `per_document_cap` chunks per document; a chunk that *defines* a term (`defines`: the term
   heads its section title or one of its lines, as a definition-list entry, or is a whole cell
   of a table row) goes before one that only mentions it. A term that is a document's *topic* (`topics`: it
   occurs in the document's id, as `CURLOPT_BUFFERSIZE` in `curl/CURLOPT_BUFFERSIZE.3.txt`, or
   at least `TOPIC_CHUNKS` and half of the document's fused chunks in the pool hold it) counts as held by every
   chunk of that document: it says which document, not which passage, so the document's chunks
   keep their fused order instead of its NAME line and examples going before the passage that
   answers.
3. **Named headings first.** With the question (`query`), a chunk whose own section heading the
   question names (`heading_named`: the heading, without its numbering or a trailing
   qualifier, occurs in the question as written; it is identifier-like, such as `KillMode=` or
   `checkpoint_timeout (integer)`, or has at least two content words, such as "max
   connections"; never an all-capitals manual section such as EXIT STATUS), ranks before the
   others, after identity hits: in a manual or a reference, the entry headed by what is asked
   is where its answer is. A heading that chunks of two or more documents of the pool share is
   their common structure ("Environment variables"), not an entry, and is not promoted. Within
   each group the order of 2 holds.
4. **Consensus kept.** The first `KEEP_FUSED` content chunks of the fused order are among the
   `limit` returned even when they hold no term: a question that mentions an identifier in
   passing ("in a debian/copyright file, which fields ...") keeps the passages both branches
   agreed on, after the ones that hold the identifier.

The order is total and deterministic (stable sorts over the fused order).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from manifold.query.fusion import Fused
from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.query.routing.terms import occurs, technical_terms
from manifold.query.types import TextHit

KEEP_FUSED = 2
"""How many of the best fused content chunks always stay within the step's `limit`."""

_LEADER = re.compile(r"(?:\.[ \t]?){4,}[ \t]*\d*")
"""Dot leaders: at least four dots, optionally spaced, optionally followed by a page number."""
_LEADER_LINE = re.compile(r"(?:\.[ \t]?){4,}[ \t]*[0-9ivxlc]+[ \t]*$", re.IGNORECASE | re.MULTILINE)
_CONTENTS_TITLE = re.compile(r"^\s*(?:table\s+of\s+)?contents\s*$", re.IGNORECASE)
NAVIGATION_SHARE = 0.15
"""A chunk whose dot leaders take at least this share of its characters is navigation."""
NAVIGATION_LINES = 3
"""... as is one with at least this many lines ending in dot leaders and a page number."""


def is_navigation(section_title: str | None, text: str) -> bool:
    """Whether a chunk is a table of contents rather than content (see the module docstring)."""
    if section_title and _CONTENTS_TITLE.match(section_title):
        return True
    if not text:
        return False
    if len(_LEADER_LINE.findall(text)) >= NAVIGATION_LINES:
        return True
    leaders = sum(len(m.group(0)) for m in _LEADER.finditer(text))
    return leaders >= NAVIGATION_SHARE * len(text)


_NUMBERING = re.compile(r"^\s*(?:[0-9]+(?:\.[0-9]+)*\.?|[A-Z]\.(?:[0-9]+\.?)*|[ivxlc]+\.)\s+", re.IGNORECASE)
_QUALIFIER = re.compile(r"\s*\([^)]{1,40}\)\s*$")
_HEAD_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def heading_named(section_title: str | None, query: str) -> bool:
    """Whether `query` names the heading `section_title` (see the module docstring, 3): after
    its numbering ("6.2.2") and a trailing qualifier ("(integer)") or `=` are dropped, the
    heading must occur in the query as written (`routing.terms.occurs`) and be identifier-like
    (one `routing.terms.technical_terms` finds, or a word with `=`, `_` or an inner capital) or
    hold at least two content words (not stop or question words) without being all capitals.
    One plain word ("OPTIONS", "Security") is never enough."""
    if not section_title or not query:
        return False
    head = _QUALIFIER.sub("", _NUMBERING.sub("", section_title.strip())).strip().rstrip("=:").strip()
    if len(head) < 3 or len(head) > 120:
        return False
    if technical_terms(head) or re.fullmatch(r"\S*(?:[=_]|[a-z][A-Z])\S*", head):
        return occurs(head, query)
    if head.isupper():
        return False  # a manual's structural section (EXIT STATUS, ENVIRONMENT), not an entry's name
    content = [w for w in _HEAD_WORD.findall(head) if w.casefold() not in STOPWORDS | QUESTION_WORDS]
    return len(content) >= 2 and occurs(head, query)


def _heading_key(f: Any) -> str:
    return (f.hit.section_title or "").strip().casefold()


def held(hit: TextHit, terms: Sequence[str]) -> int:
    """How many of `terms` occur literally in the hit's section title or text."""
    text = f"{hit.section_title}\n{hit.text}"
    return sum(occurs(t, text) for t in terms)


_LINE_START = re.compile(r"^[ \t]*(?:[-*•·][ \t]+)?", re.MULTILINE)


def defines(hit: TextHit, term: str) -> bool:
    """Whether the hit *defines* `term` rather than mentions it: the term heads its section title
    or one of its lines (a definition-list term such as `--depth <depth>`, a `KEY=value` line), or
    is a whole cell of a table row (`10 | Buster | …`), as a manual, a reference or a table
    introduces what it then describes."""
    heads = [hit.section_title or "",
             *(hit.text[m.end():m.end() + len(term) + 2] for m in _LINE_START.finditer(hit.text))]
    if any(occurs(term, head[:len(term) + 1]) for head in heads if head.lower().startswith(term.lower())):
        return True
    want = term.casefold()
    return any(cell.strip().casefold() == want for line in hit.text.split("\n") if " | " in line
               for cell in line.split(" | "))


def weight(hit: TextHit, terms: Sequence[str], topics: dict[str, set[str]] | None = None) -> int:
    """The promotion weight of a hit for `terms`: per term, 2 when it defines it (`defines`), 1
    when it holds it otherwise or the term is its document's topic (`topics`), 0 else. A term
    that is the topic of some document of the pool is defined by none: it names a subject whole
    documents are about ("OpenSSL"), and a line elsewhere that starts with it ("OpenSSL 3.0" in
    a README's list of links) is a mention like any other."""
    mine = topics.get(hit.document_id, set()) if topics else set()
    subjects = set().union(*topics.values()) if topics else set()
    text = f"{hit.section_title}\n{hit.text}"
    total = 0
    for t in terms:
        if t in mine:
            total += 1  # every chunk of the document is about it: none defines it more than another
        elif occurs(t, text):
            total += 2 if t not in subjects and defines(hit, t) else 1
    return total


TOPIC_CHUNKS = 3
"""A term held by at least this many, and at least half, of one document's fused chunks in the
pool is that document's topic."""


def topics(hits: Sequence[Any], terms: Sequence[str]) -> dict[str, set[str]]:
    """document id -> the `terms` that are its topic (module docstring, 2): the term occurs in the
    document id, or at least `TOPIC_CHUNKS` and at least half of the document's fused chunks
    among `hits` hold it. Only chunks a question branch found count (`ranks` beyond the terms
    branch): the terms branch finds every chunk that repeats the term, so its extras say how
    often a document mentions it, not whether the document is about it."""
    holders: dict[tuple[str, str], int] = {}
    fused: dict[str, int] = {}
    out: dict[str, set[str]] = {}
    for f in hits:
        doc = f.hit.document_id
        for t in terms:
            if occurs(t, doc):
                out.setdefault(doc, set()).add(t)
        if not set(getattr(f, "ranks", {"fused": 0})) - {"terms"}:
            continue
        fused[doc] = fused.get(doc, 0) + 1
        text = f"{f.hit.section_title}\n{f.hit.text}"
        for t in terms:
            if occurs(t, text):
                holders[doc, t] = holders.get((doc, t), 0) + 1
    for (doc, t), n in holders.items():
        if n >= TOPIC_CHUNKS and 2 * n >= fused[doc]:
            out.setdefault(doc, set()).add(t)
    return out


def anchoring(term: str) -> bool:
    """Whether `term` is specific enough to bring a passage into the pool on its own: a technical
    identifier (`routing.terms.technical_terms`) or a phrase of several words. A plain word, an
    acronym or a name ("VM", "smarthost") is held by passages about anything."""
    return bool(technical_terms(term)) or " " in term.strip()


def with_term_hits(fused: Sequence[Fused], term_hits: Sequence[TextHit], terms: Sequence[str]) -> list[Fused]:
    """`fused`, then the hits of the terms branch (BM25 for the terms alone) that hold an
    anchoring term (`anchoring`) literally and are not already there (score: the lowest fused
    score): a passage that defines the identifier joins the pool even when the question's other
    words rank it low. A passage that holds only a plain word of the question, and that neither
    branch found for the whole question, is about something else and does not join."""
    seen = {f.hit.chunk_id for f in fused} | {m for f in fused for m in f.merged_ids}
    floor = min((f.score for f in fused), default=0.0)
    anchors = [t for t in terms if anchoring(t)]
    extra = [Fused(hit=h, score=floor, ranks={"terms": h.rank}, identity=False)
             for h in term_hits if anchors and h.chunk_id not in seen and held(h, anchors)]
    return [*fused, *extra]


def lift(fused: Sequence[Fused], at: int, hit: TextHit, branch: str) -> list[Fused]:
    """`fused` with `hit` at index `at`, scored as the chunk it displaces there, its ranks those it
    already had plus `branch` (rank `at + 1`); a hit already ranked at or above `at` stays where
    it is. Used by the follow-up searches of the hybrid step (`query.contents`, `query.named`)."""
    out = list(fused)
    at = min(at, len(out))
    score = out[at].score if at < len(out) else min((f.score for f in out), default=0.0)
    for i, f in enumerate(out):
        if f.hit.chunk_id == hit.chunk_id or hit.chunk_id in f.merged_ids:
            if i <= at:
                return out
            del out[i]
            out.insert(at, replace(f, score=score, ranks={**f.ranks, branch: at + 1}))
            return out
    out.insert(at, Fused(hit=hit, score=score, ranks={branch: at + 1}, identity=False))
    return out


def _navigation(f: Any) -> bool:
    return not f.hit.identity and is_navigation(f.hit.section_title, f.hit.text)


def _capped(hits: Sequence[Any], per_document_cap: int | None) -> list[Any]:
    if per_document_cap is None:
        return list(hits)
    kept, per_doc = [], dict[str, int]()
    for f in hits:
        if per_doc.get(f.hit.document_id, 0) < per_document_cap:
            per_doc[f.hit.document_id] = per_doc.get(f.hit.document_id, 0) + 1
            kept.append(f)
    return kept


def promote_terms(hits: Sequence[Any], terms: Sequence[str], per_document_cap: int | None = None) -> list[Any]:
    """Fused hits (`.hit.text`, `.hit.section_title`, `.hit.identity`) with identity hits first,
    then those holding more of `terms` literally (`routing.terms.occurs`), fused order otherwise
    (a stable sort), at most `per_document_cap` per document: the passage that holds the
    identifier a question names ranks first."""
    if not terms:
        return list(hits)
    topical = topics(hits, terms)
    return _capped(sorted(hits, key=lambda f: (not f.hit.identity, -weight(f.hit, terms, topical))), per_document_cap)


def arrange(fused: Sequence[Any], terms: Sequence[str], *, limit: int,
            per_document_cap: int | None = None, query: str = "") -> list[Any]:
    """The pool in the order the step keeps it, at most `limit` (see the module docstring)."""
    navigation = {id(f) for f in fused if _navigation(f)}  # the regexes run once per chunk
    ordered = sorted(fused, key=lambda f: id(f) in navigation)
    named = {id(f) for f in ordered if id(f) not in navigation and heading_named(f.hit.section_title, query)}
    if named:  # a heading several documents share is their structure ("Environment variables"), not an entry
        docs: dict[str, set[str]] = {}
        for f in ordered:
            if id(f) in named:
                docs.setdefault(_heading_key(f), set()).add(f.hit.document_id)
        named = {id(f) for f in ordered if id(f) in named and len(docs[_heading_key(f)]) == 1}
    if named:  # identity hits, then named headings, then the rest; the terms held decide within each
        topical = topics(ordered, terms)
        ranked = _capped(sorted(ordered, key=lambda f: (not f.hit.identity, id(f) not in named,
                                                        -weight(f.hit, terms, topical) if terms else 0)),
                         per_document_cap)
    else:
        ranked = promote_terms(ordered, terms, per_document_cap) if terms else _capped(ordered, per_document_cap)
    out = ranked[:limit]
    if not terms and not named:
        return out
    consensus = [f for f in ordered[:KEEP_FUSED] if id(f) not in navigation]
    protected = {f.hit.chunk_id for f in consensus}
    for f in consensus:
        if any(o.hit.chunk_id == f.hit.chunk_id for o in out):
            continue
        if per_document_cap is not None and \
                sum(o.hit.document_id == f.hit.document_id for o in out) >= per_document_cap:
            continue  # its document already has its share of the returned chunks
        if len(out) >= limit:  # make room: drop the last chunk that is not itself consensus
            drop = next((i for i in range(len(out) - 1, -1, -1) if out[i].hit.chunk_id not in protected), None)
            if drop is None:
                break
            del out[drop]
        out.append(f)
    return out
