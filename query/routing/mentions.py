"""Anchors: the catalog entities a question names (pure; rapidfuzz over word n-grams).

Names, aliases and non-identifier keys are matched on word windows (case-insensitive, legal
suffixes and possessives ignored, small typos tolerated, `MATCH_CUTOFF`); a window must contain a
distinctive word of the name (not only `GENERIC` / `TRADE_WORDS`). Overlapping mentions keep the
best (then longest, then earliest). Identifiers anchor by exact normalised match. An anchor whose
best candidates are ≥ 2 entities within `AMBIGUITY_MARGIN` is ambiguous (unless exactly one is an
exact match); a capitalised name after a kind word that matches nothing is unresolved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz import fuzz, process

from manifold.query.routing.lexicon import DETERMINERS, GENERIC, KIND_WORDS, STOPWORDS
from manifold.query.routing.tokens import Form, Token, catalog_forms, identifier_entries, norm_tokens
from manifold.query.timephrases import time_spans
from manifold.query.types import CatalogEntry, EntityKind
from manifold.shared.identifiers import normalize_identifier

MATCH_CUTOFF = 85.0
AMBIGUITY_MARGIN = 0.05
PARTIAL_FULL = 0.92
PARTIAL_SOME = 0.80
MAX_WINDOW = 6


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Anchor(_Frozen):
    """One entity mention. Resolved when `resolved` is set; ambiguous when it is not and there are
    ≥ 2 `candidates`; unresolved when there are none. `score` is the match score in [0, 1]."""

    kind: EntityKind
    text: str
    candidates: tuple[CatalogEntry, ...] = ()
    resolved: CatalogEntry | None = None
    score: float = Field(0.0, ge=0.0, le=1.0)

    @property
    def needs_clarification(self) -> bool:
        return self.resolved is None


@dataclass(frozen=True)
class Mention:
    first: int
    last: int
    scores: dict[str, tuple[CatalogEntry, float]]
    hint: EntityKind | None

    @property
    def best(self) -> float:
        return max(score for _, score in self.scores.values())


def _joined(question: str, tokens: list[Token], first: int, last: int) -> bool:
    """True when tokens first..last are separated only by spaces (no comma, 'or', etc.)."""
    return all(question[tokens[k].end:tokens[k + 1].start].strip() == "" for k in range(first, last))


def _hint(tokens: list[Token], first: int, last: int) -> EntityKind | None:
    before = [t.norm for t in tokens[max(0, first - 2):first] if t.norm != "the"]
    after = [t.norm for t in tokens[last + 1:last + 3]]
    if before[-2:] == ["product", "group"] or after[:1] in (["group"], ["groups"]) \
            or after[:2] in (["product", "group"], ["product", "groups"]):
        return "product_group"
    for word in (before[-1:] + after[:1]):
        if word in KIND_WORDS:
            return KIND_WORDS[word]
    return None


def _full_scores(words: list[str], forms: list[Form], texts: list[str]) -> dict[int, float]:
    """Form index → score for forms the whole window names (typos tolerated), provided its
    distinctive words match too."""
    found: dict[int, float] = {}
    for _, score, i in process.extract(" ".join(words), texts, scorer=fuzz.ratio, score_cutoff=MATCH_CUTOFF,
                                       limit=None):
        form = forms[i]
        if form.distinctive:
            distinct = form.distinct(words)
            score = min(score, fuzz.ratio(distinct, " ".join(form.distinctive)) if distinct else 0.0)
        if score >= MATCH_CUTOFF:
            found[i] = score / 100.0
    return found


def _partial_scores(words: list[str], forms: list[Form]) -> dict[int, float]:
    """Form index → score for forms whose distinctive words include every word of the window; a
    trade word of the window may instead be one of the form's own words, but at least one word must
    be distinctive (the verb of "which suppliers supply X?" names no "… Supply AB")."""
    found: dict[int, float] = {}
    for i, form in enumerate(forms):
        if not form.distinctive:
            continue
        named = [w for w in words if not (w in form.ignored and w in form.tokens)]
        if not named:
            continue
        sims = [max(fuzz.ratio(w, d) for d in form.distinctive) for w in named]
        if min(sims) < MATCH_CUTOFF:
            continue
        share = PARTIAL_FULL if len(named) >= len(form.distinctive) else PARTIAL_SOME
        found[i] = share * (sum(sims) / len(sims)) / 100.0
    return found


def _is_stop(tok: Token) -> bool:
    """A stopword, except a capitalised single letter inside the question ("Company A")."""
    return tok.norm in STOPWORDS and not (len(tok.norm) == 1 and tok.capitalised and tok.index > 0)


def _window_ok(tokens: list[Token], first: int, last: int, masked: set[int]) -> bool:
    span = tokens[first:last + 1]
    if any(t.index in masked for t in span):
        return False
    if _is_stop(span[0]) or _is_stop(span[-1]):
        return False
    return any(t.norm not in GENERIC and not _is_stop(t) for t in span)


def _partial_allowed(tokens: list[Token], first: int, last: int, hint: EntityKind | None) -> bool:
    span = tokens[first:last + 1]
    if any(t.norm in GENERIC or t.norm in STOPWORDS or len(t.norm) < 3 for t in span):
        return False
    # "the sensor": a definite article before one word names one specific thing, even lower-case
    definite = first > 0 and first == last and tokens[first - 1].norm == "the"
    return hint is not None or definite or all(t.capitalised for t in span)


def _mentions(question: str, tokens: list[Token], forms: list[Form], masked: set[int]) -> list[Mention]:
    texts = [f.text for f in forms]
    longest = min(MAX_WINDOW, max((len(f.tokens) for f in forms), default=0) + 1)
    out = []
    for first in range(len(tokens)):
        for last in range(first, min(len(tokens), first + longest)):
            if not _joined(question, tokens, first, last) or not _window_ok(tokens, first, last, masked):
                continue
            words = list(norm_tokens(" ".join(t.norm for t in tokens[first:last + 1]), True))
            hint = _hint(tokens, first, last)
            scores = _full_scores(words, forms, texts)
            if last - first < 2 and _partial_allowed(tokens, first, last, hint):
                for i, score in _partial_scores(words, forms).items():
                    scores[i] = max(scores.get(i, 0.0), score)
            by_entity: dict[str, tuple[CatalogEntry, float]] = {}
            for i, score in scores.items():
                entry = forms[i].entry
                if score > by_entity.get(entry.entity_id, (entry, -1.0))[1]:
                    by_entity[entry.entity_id] = (entry, score)
            if by_entity:
                out.append(Mention(first, last, by_entity, hint))
    return out


def _bare_kind_mentions(tokens: list[Token], forms: list[Form], masked: set[int]) -> list[Mention]:
    """A capitalised kind word used as a name ("did the Supplier deliver?") names every entry of
    that kind whose name contains the word."""
    out = []
    for k, tok in enumerate(tokens):
        if k == 0 or tok.index in masked or not tok.capitalised or tok.norm not in KIND_WORDS:
            continue
        if tokens[k - 1].norm in DETERMINERS or (k + 1 < len(tokens) and tokens[k + 1].capitalised):
            continue
        kind = KIND_WORDS[tok.norm]
        hits = {f.entry.entity_id: (f.entry, 0.6) for f in forms
                if f.entry.kind == kind and tok.norm in f.tokens}
        if hits:
            out.append(Mention(k, k, hits, kind))
    return out


def _select(mentions: list[Mention]) -> list[Mention]:
    """Non-overlapping mentions: best score first, then longest, then earliest."""
    kept: list[Mention] = []
    for m in sorted(mentions, key=lambda m: (-m.best, m.first - m.last, m.first)):
        if all(m.last < k.first or m.first > k.last for k in kept):
            kept.append(m)
    return sorted(kept, key=lambda m: m.first)


def _anchor(question: str, tokens: list[Token], mention: Mention) -> Anchor:
    ranked = sorted(mention.scores.values(), key=lambda es: (-es[1], es[0].name))
    if mention.hint and any(e.kind == mention.hint for e, _ in ranked):
        ranked = [(e, s) for e, s in ranked if e.kind == mention.hint]
    top_score = ranked[0][1]
    close = [(e, s) for e, s in ranked if top_score - s <= AMBIGUITY_MARGIN]
    exact = [(e, s) for e, s in ranked if s >= 0.999]
    text = question[tokens[mention.first].start:tokens[mention.last].end]
    if len(close) >= 2 and len(exact) != 1:
        return Anchor(kind=mention.hint or close[0][0].kind, text=text,
                      candidates=tuple(e for e, _ in close), resolved=None, score=round(top_score, 4))
    best = ranked[0][0]
    return Anchor(kind=best.kind, text=text, candidates=tuple(e for e, _ in ranked[:5]),
                  resolved=best, score=round(top_score, 4))


_UNRESOLVED = re.compile(
    r"\b(?i:(?P<kind>product\s+group|supplier|vendor|manufacturer|company|customer|product))\s+"
    r"(?P<name>[A-Z][\w&'’.-]*(?:\s+[A-Z][\w&'’.-]*){0,3})")


def _unresolved(question: str, taken: list[tuple[int, int]]) -> list[tuple[int, Anchor]]:
    out = []
    for match in _UNRESOLVED.finditer(question):
        start, end = match.span("name")
        name = match.group("name").rstrip(".'’")
        words = [w.casefold() for w in name.split()]
        if all(w in STOPWORDS or w in GENERIC for w in words) or normalize_identifier(name):
            continue
        if any(start < e and end > s for s, e in taken):
            continue
        kind_word = match.group("kind").casefold().split()[-1]
        kind: EntityKind = "product_group" if kind_word == "group" else KIND_WORDS[kind_word]
        out.append((start, Anchor(kind=kind, text=name, candidates=(), resolved=None, score=0.0)))
    return out


def _identifier_anchors(question: str, tokens: list[Token], identifiers: list[str],
                        index: dict[str, list[CatalogEntry]]) -> list[tuple[int, Anchor]]:
    out = []
    upper = question.upper()
    for ident in identifiers:
        entries = index.get(ident, [])
        if not entries:
            continue
        position = upper.find(ident.split("-", 1)[0])
        resolved = entries[0] if len(entries) == 1 else None
        out.append((max(position, 0), Anchor(kind=entries[0].kind, text=ident, candidates=tuple(entries),
                                             resolved=resolved, score=1.0)))
    return out


def _masked(question: str, tokens: list[Token], as_of: date) -> set[int]:
    spans = time_spans(question, as_of)
    masked = {t.index for t in tokens if normalize_identifier(t.raw) is not None}
    masked |= {t.index for t in tokens if any(t.start < e and t.end > s for s, e in spans)}
    return masked


def resolve_anchors(question: str, tokens: list[Token], catalog: Sequence[CatalogEntry],
                     identifiers: list[str], as_of: date) -> tuple[list[Anchor], list[tuple[int, int]]]:
    """The anchors of `question` in question order, and the character spans they (and unresolved
    names) take; see the module rules."""
    forms = catalog_forms(catalog)
    masked = _masked(question, tokens, as_of)
    chosen = _select(_mentions(question, tokens, forms, masked) + _bare_kind_mentions(tokens, forms, masked))
    placed = [(tokens[m.first].start, _anchor(question, tokens, m)) for m in chosen]
    taken = [(tokens[m.first].start, tokens[m.last].end) for m in chosen]
    placed += _identifier_anchors(question, tokens, identifiers, identifier_entries(catalog))
    unresolved = _unresolved(question, taken)
    taken += [(s, s + len(a.text)) for s, a in unresolved]
    placed += unresolved
    return [a for _, a in sorted(placed, key=lambda p: p[0])], taken
