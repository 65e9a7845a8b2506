"""Question tokens and the catalog's name forms that mentions are matched against (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from manifold.query.routing.lexicon import GENERIC, TRADE_KINDS, TRADE_WORDS
from manifold.query.types import CatalogEntry
from manifold.shared.identifiers import normalize_identifier
from manifold.shared.vocabulary import LEGAL_SUFFIXES

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9&]*(?:[-.'’][A-Za-z0-9&]+)*")
_POSSESSIVE = re.compile(r"['’]s$|['’]$")
_PUNCT = re.compile(r"[^\w\s&]|_")


@dataclass(frozen=True)
class Token:
    index: int
    start: int
    end: int
    raw: str
    norm: str

    @property
    def capitalised(self) -> bool:
        return self.raw[:1].isupper()


@dataclass(frozen=True)
class Form:
    entry: CatalogEntry
    text: str
    tokens: tuple[str, ...]
    distinctive: tuple[str, ...]
    ignored: frozenset[str] = GENERIC
    """Words that are not distinctive of this form (a window is compared without them)."""

    def distinct(self, words: Sequence[str]) -> str:
        return " ".join(w for w in words if w not in self.ignored)


def tokenize(question: str) -> list[Token]:
    """The word tokens of `question` with their offsets; `norm` is casefolded without a possessive."""
    out = []
    for i, match in enumerate(_TOKEN.finditer(question)):
        raw = match.group(0)
        norm = _POSSESSIVE.sub("", raw.casefold()).replace("’", "'")
        out.append(Token(i, match.start(), match.end(), raw, norm))
    return out


def norm_tokens(text: str, organisation: bool) -> tuple[str, ...]:
    """Casefolded words of a name without punctuation, a leading "the" and (for organisations)
    trailing legal suffixes."""
    tokens = _PUNCT.sub(" ", _POSSESSIVE.sub("", text.casefold().replace("’", "'"))).split()
    if len(tokens) > 1 and tokens[0] == "the":
        tokens = tokens[1:]
    while organisation and len(tokens) > 1 and tokens[-1] in LEGAL_SUFFIXES:
        tokens.pop()
    return tuple(tokens)


def catalog_forms(catalog: Sequence[CatalogEntry]) -> list[Form]:
    """One form per distinct (entity, normalised surface) of the names, aliases and non-identifier
    keys, with its distinctive words (see `Form`)."""
    forms: dict[tuple[str, str], Form] = {}
    for entry in catalog:
        organisation = entry.kind in ("company", "supplier")
        for surface in (entry.name, *entry.aliases, entry.key):
            if not surface or normalize_identifier(surface) is not None:
                continue
            tokens = norm_tokens(surface, organisation)
            if not tokens:
                continue
            ignored = GENERIC | TRADE_WORDS if entry.kind in TRADE_KINDS else GENERIC
            distinctive = tuple(t for t in tokens if t not in ignored)
            if not distinctive:  # a name made only of trade words ("General Supplies")
                ignored = GENERIC
                distinctive = tuple(t for t in tokens if t not in ignored)
            forms.setdefault((entry.entity_id, " ".join(tokens)),
                             Form(entry, " ".join(tokens), tokens, distinctive, ignored))
    return list(forms.values())


def identifier_entries(catalog: Sequence[CatalogEntry]) -> dict[str, list[CatalogEntry]]:
    """Normalised identifier → the entries whose key, alias or name it is."""
    index: dict[str, list[CatalogEntry]] = {}
    for entry in catalog:
        for surface in (entry.key, *entry.aliases, entry.name):
            normalised = normalize_identifier(surface) if surface else None
            if normalised and entry not in index.get(normalised, []):
                index.setdefault(normalised, []).append(entry)
    return index
