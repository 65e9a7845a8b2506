"""Table rows that answer a question (pure functions, no I/O).

A table's chunk is a header and rows ("Property | Description", "noplaintext | Don't use
mechanisms that transmit unencrypted username and password information"). Both branches score
it whole: BM25 over every row's words, the embedding over a grid of cells, so a table whose one
row says what is asked ranks below the prose around it, and the fused pool's per-document cap
then leaves it out. The hybrid step asks `row_hit(hits, question, shown)` for the table chunk,
among the branches' hits, whose best row holds the question's words, and lifts it into the pool
at `ROW_AT`.

Guarantees:
- A table chunk is one with at least `MIN_ROWS` lines holding a cell separator (` | `, a tab).
- A row's *match* is the number of the question's content stems (`shared.analysis.terms`
  without stop and question words) that its cells hold and the table's header line does not
  (a header names the columns every row has); the chunk's match is its best row's.
- `row_hit` returns the table chunk with the highest match, ties by branch order, when that
  match is at least `MIN_MATCH` and at least `MIN_SHARE` of the question's content stems, and
  the chunk is not among `shown` (already in the evidence); else None.
- Deterministic; the hits are not changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.query.types import TextHit
from manifold.shared import analysis

__all__ = ["MIN_MATCH", "MIN_ROWS", "MIN_SHARE", "ROW_AT", "branch_order", "content_stems", "row_hit", "row_match",
           "table_rows"]

ROW_AT = 2
"""Where the table chunk joins the pool (0-based): third, after the two best fused chunks."""
MIN_ROWS = 2
MIN_MATCH = 3
"""A row must hold at least this many of the question's content stems ..."""
MIN_SHARE = 0.3
"""... and at least this share of the question's content stems (so a long question needs a fuller row)."""
_WORD = re.compile(r"[^\W_][\w.'’-]*")


def content_stems(question: str) -> set[str]:
    """The question's content stems: `shared.analysis.terms` of its words without stop and
    question words."""
    words = [w for w in _WORD.findall(question) if w.casefold() not in STOPWORDS | QUESTION_WORDS]
    return set(analysis.terms(" ".join(words)))


def table_rows(text: str) -> list[str]:
    """The lines of `text` that hold a cell separator (` | `, a tab)."""
    return [line for line in text.split("\n") if " | " in line or "\t" in line]


def row_match(text: str, stems: set[str]) -> int:
    """The best row's match of a table chunk's `text` for `stems` (module docstring); 0 when the
    text is not a table."""
    rows = table_rows(text)
    if len(rows) < MIN_ROWS:
        return 0
    header = set(analysis.terms(rows[0])) & stems
    return max((len((set(analysis.terms(row)) & stems) - header) for row in rows[1:]), default=0)


def row_hit(hits: Iterable[TextHit], question: str, shown: Iterable[str]) -> TextHit | None:
    """The table chunk whose row best answers the question, or None (module docstring)."""
    stems = content_stems(question)
    if not stems:
        return None
    seen = set(shown)
    floor = max(MIN_MATCH, MIN_SHARE * len(stems))
    best: tuple[int, TextHit] | None = None
    done: set[str] = set()
    for hit in hits:
        if hit.chunk_id in seen or hit.chunk_id in done:
            continue
        done.add(hit.chunk_id)
        match = row_match(hit.text or "", stems)
        if match >= floor and (best is None or match > best[0]):
            best = (match, hit)
    return best[1] if best else None


def branch_order(branches: Sequence[Sequence[TextHit]]) -> list[TextHit]:
    """The branches' hits interleaved by rank (the first of each, then the second of each, ...)."""
    out: list[TextHit] = []
    for i in range(max((len(b) for b in branches), default=0)):
        out += [b[i] for b in branches if i < len(b)]
    return out
