"""Constraints of a question: currency, statuses, and the topic left after the anchors (pure)."""

from __future__ import annotations

import re

from manifold.query.routing.lexicon import (
    CURRENCY_WORDS,
    QUESTION_WORDS,
    RECORD_NOUN,
    STATUS_STRONG,
    STATUS_WEAK,
    STOPWORDS,
)
from manifold.query.routing.tokens import Token
from manifold.shared.identifiers import normalize_identifier


def find_currency(question: str) -> str | None:
    """The first currency named by an ISO code, a symbol or a word, as an ISO code."""
    best: tuple[int, str] | None = None
    for pattern, code in CURRENCY_WORDS:
        match = pattern.search(question)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), code or match.group(1).upper())
    return best[1] if best else None


def find_statuses(question: str) -> tuple[str, ...]:
    """Canonical status words; weak ones ("open", "paid", "late") only next to a record noun."""
    found: dict[str, None] = {}
    for match in re.finditer(r"[A-Za-z]+", question):
        word = match.group(0).casefold()
        if word in STATUS_STRONG:
            found.setdefault(STATUS_STRONG[word], None)
        elif word in STATUS_WEAK and _near_record_noun(question, match.start(), match.end()):
            found.setdefault(STATUS_WEAK[word], None)
    return tuple(found)


def _near_record_noun(question: str, start: int, end: int) -> bool:
    after = question[end:end + 40]
    before = question[max(0, start - 40):start]
    return bool(re.match(r"\s+(?:\w+\s+)?" + RECORD_NOUN.pattern, after, re.I)
                or re.search(RECORD_NOUN.pattern
                             + r"\s+(?:that\s+|which\s+)?(?:are|were|is|was)\s+(?:still\s+)?$", before, re.I))


def find_topic(question: str, tokens: list[Token], removed: list[tuple[int, int]]) -> str | None:
    """What is left of the question after removing the `removed` spans (anchors, identifiers, time
    phrases), identifiers, stop words and question words; None when nothing is left."""
    words = [t.raw for t in tokens
             if not any(t.start < e and t.end > s for s, e in removed)
             and normalize_identifier(t.raw) is None
             and t.norm not in STOPWORDS and t.norm not in QUESTION_WORDS]
    return " ".join(words) or None
