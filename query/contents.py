"""Following a table of contents to the section it lists (pure functions, no I/O).

A table of contents often ranks high for a question because one of its entries says what the
question asks ("27 How do you make upsd reload the config file?"), in fewer and closer words than
the section itself, whose body may use others ("send it a SIGHUP"). The pool sorts navigation
after content (`query.pool`), so without help the entry only says where the answer is. The
hybrid step asks `leads(fused, query)` which entries to follow, searches each entry's words
within its document, and `section_for(hits, entry)` picks the chunk that holds the entry as
text: that chunk joins the pool at the table of contents' place (`placed`).

Guarantees:
- Only navigation chunks (`pool.is_navigation`) among the first `LEAD_DEPTH` fused hits lead,
  at most `MAX_LEADS`, one per document.
- An entry is one line of the table of contents without its numbering, dot leaders and page
  number. It leads when it shares at least `MIN_SHARED` content terms with the question
  (stemmed; stop and question words excluded) and those are at least a third of its own
  content terms; the entry sharing the most leads, and a tie between two entries leads nowhere (the
  contents do not say which section).
- `section_for` returns the first hit that is not navigation and whose section title or text
  holds the entry (case, punctuation and spacing ignored), else None: a search hit that does not
  hold the heading is not the section the entry names.
- `placed` puts the section just before the table of contents, with its score and the ranks it
  already had plus `contents`; a section already ranked higher stays where it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from manifold.query.fusion import Fused
from manifold.query.pool import is_navigation, lift
from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.query.types import TextHit
from manifold.shared import analysis

__all__ = ["LEAD_DEPTH", "MAX_LEADS", "MIN_SHARED", "entry_text", "leads", "placed", "section_for"]

LEAD_DEPTH = 10
"""How many of the best fused hits are looked at for a table of contents."""
MAX_LEADS = 2
"""At most this many tables of contents are followed per step (each costs one search)."""
MIN_SHARED = 2
"""An entry leads only when it shares at least this many content terms with the question."""

_NUMBER = re.compile(r"^\s*(?:[-*•·]\s*)?(?:[0-9]+(?:\.[0-9]+)*\.?|[A-Z]\.(?:[0-9]+\.?)*|[ivxlc]+\.)\s+",
                     re.IGNORECASE)
_TRAILER = re.compile(r"(?:\s*(?:\.\s?){2,}\s*(?:[0-9]+|[ivxlc]+)?|\s+[0-9]+)?\s*$", re.IGNORECASE)
_SPACE = re.compile(r"[\W_]+")
_NOISE = frozenset(analysis.terms(" ".join(STOPWORDS | QUESTION_WORDS)))


def _content(text: str) -> set[str]:
    return {t for t in analysis.terms(text) if t not in _NOISE and not t.isdigit()}


def entry_text(line: str) -> str:
    """A contents line without its numbering, dot leaders and page number."""
    return _TRAILER.sub("", _NUMBER.sub("", line, count=1)).strip()


def _best_entry(text: str, question: set[str]) -> str | None:
    scored: list[tuple[int, str]] = []
    for line in text.split("\n"):
        entry = entry_text(line)
        own = _content(entry)
        shared = len(own & question)
        if shared >= MIN_SHARED and 3 * shared >= len(own):
            scored.append((shared, entry))
    if not scored:
        return None
    scored.sort(key=lambda s: -s[0])
    if len(scored) > 1 and scored[1][0] == scored[0][0] and scored[1][1] != scored[0][1]:
        return None  # two entries match as well: the contents do not say which section
    return scored[0][1]


def leads(fused: Sequence[Fused], query: str) -> list[tuple[Fused, str]]:
    """(table of contents, entry) pairs to follow, best fused first (module guarantees)."""
    question = _content(query)
    out: list[tuple[Fused, str]] = []
    docs: set[str] = set()
    for f in fused[:LEAD_DEPTH]:
        if len(out) >= MAX_LEADS:
            break
        if f.identity or f.hit.document_id in docs or not is_navigation(f.hit.section_title, f.hit.text):
            continue
        entry = _best_entry(f.hit.text, question)
        if entry is not None:
            docs.add(f.hit.document_id)
            out.append((f, entry))
    return out


def _flat(text: str) -> str:
    return " ".join(_SPACE.sub(" ", text.casefold()).split())


def section_for(hits: Sequence[TextHit], entry: str) -> TextHit | None:
    """The first hit that holds `entry` and is not navigation (module guarantees)."""
    want = _flat(entry)
    if not want:
        return None
    for hit in hits:
        if is_navigation(hit.section_title, hit.text):
            continue
        if want in _flat(f"{hit.section_title or ''}\n{hit.text}"):
            return hit
    return None


def placed(fused: Sequence[Fused], contents: Fused, section: TextHit) -> list[Fused]:
    """`fused` with `section` just before `contents` (module guarantees)."""
    at = next(i for i, f in enumerate(fused) if f is contents)
    return lift(fused, at, section, "contents")
