"""Documents a question names by their file name (pure functions, no I/O).

Users name the page they mean: "with openssl verify" (`tls/openssl-verify.1ssl.txt`), "the
Artistic license" (`legal/Artistic.txt`), "in chrony.conf" (`ntp/chrony.conf.5.txt`). Search
ranks a passage by the question's words, and a neighbouring page that repeats them (the shared
verification options, a guide that quotes the licence's name) can push every passage of the
named page out of the evidence. The hybrid step asks `named(question, document_ids)` which of the
documents its branches found the question names, searches the question within each, and
`passage_for` picks the passage that joins the pool at `NAMED_AT`.

Guarantees:
- A document's name is its file name without the directories, the format extensions and a
  manual-section suffix (`openssl-verify.1ssl.txt` -> `openssl-verify`, `chrony.conf.5.txt` ->
  `chrony.conf`), split into words at `-`, `_`, `.` and spaces.
- The question names it when those words occur consecutively in the question's words: case
  ignored for a name of two or more words; for a one-word name, only when the name has a capital
  letter or a digit and the question writes it the same way (`Artistic`, `FAQ`, `CC0`): a
  lowercase one-word file name (`limits`, `time`, `dns`) is an everyday word, not a name.
- Only documents among `document_ids` (what the branches found, best first) are considered, at
  most `MAX_NAMED`, in that order; the hybrid step searches only those with at most
  `SHOWN_ENOUGH` chunk among its first `limit` (a document already in the evidence needs no help).
- `passage_for` returns the first hit that is not navigation, not already shown (the pool's
  first `limit` chunks: a named document's passage that already ranks there needs no help, and
  its next best is the one to add) and holds a content word of the question besides the name's
  own words, else None (a passage that matches the name alone says nothing about the question).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from manifold.query.pool import is_navigation
from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.query.types import TextHit
from manifold.shared import analysis

__all__ = ["MAX_NAMED", "NAMED_AT", "SHOWN_ENOUGH", "document_name", "named", "passage_for"]

MAX_NAMED = 2
"""At most this many named documents are searched per step (each costs one search)."""
SHOWN_ENOUGH = 1
"""A named document with more than this many chunks among the step's first `limit` is not
searched: it is already in the evidence, and another of its passages would push out a better one."""
NAMED_AT = 2
"""The index the named document's passage takes in the fused pool: right after the two best
fused chunks (`pool.KEEP_FUSED`), which the step always keeps."""

_EXTENSIONS = re.compile(r"(?:\.(?:txt|html?|md|markdown|rst|pdf|csv|tsv|json|xml|docx|xlsx|pptx|gz))+$",
                         re.IGNORECASE)
_MAN_SECTION = re.compile(r"\.[0-9][a-z]*$")
_SPLIT = re.compile(r"[-_.\s]+")
_WORDS = re.compile(r"[^\W_]+")
_NOISE = frozenset(analysis.terms(" ".join(STOPWORDS | QUESTION_WORDS)))


def document_name(document_id: str) -> list[str]:
    """The words of a document's file name (module guarantees)."""
    base = document_id.rsplit("/", 1)[-1]
    base = _MAN_SECTION.sub("", _EXTENSIONS.sub("", base))
    return [w for w in _SPLIT.split(base) if w]


def _occurs(name: list[str], words: list[str]) -> bool:
    n = len(name)
    if n == 1:
        if not re.search(r"[A-Z0-9]", name[0]):
            return False
        return name[0] in words
    low = [w.casefold() for w in name]
    folded = [w.casefold() for w in words]
    return any(folded[i:i + n] == low for i in range(len(folded) - n + 1))


def named(question: str, document_ids: Iterable[str]) -> list[str]:
    """The documents among `document_ids` that the question names, in their order (guarantees)."""
    words = _WORDS.findall(question)
    out: list[str] = []
    for doc in document_ids:
        if len(out) >= MAX_NAMED:
            break
        name = document_name(doc)
        if doc not in out and name and _occurs(name, words):
            out.append(doc)
    return out


def passage_for(hits: Sequence[TextHit], question: str, document_id: str,
                shown: Iterable[str] = ()) -> TextHit | None:
    """The first hit that says something about the question besides the name and is not one of
    the `shown` chunk ids (guarantees)."""
    skip = set(shown)
    own = set(analysis.terms(" ".join(document_name(document_id))))
    wanted = {t for t in analysis.terms(question) if t not in _NOISE and t not in own}
    for hit in hits:
        if hit.chunk_id in skip or is_navigation(hit.section_title, hit.text):
            continue
        if wanted & set(analysis.terms(f"{hit.section_title or ''}\n{hit.text}")):
            return hit
    return None
