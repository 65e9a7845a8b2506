"""A sentence that says what is asked (pure functions, no I/O).

Both branches score a chunk whole: a long passage about the right subject outranks a short
mention, and in a manual whose every section names the same things, the chunk holding the one
sentence that answers ("High-voltage programming requires the target voltage to be set to at
least 4.5 V in order to work") can rank below five others of the same manual and miss the
evidence. The hybrid step asks `sentence_hit(hits, question, shown)` for the prose chunk, among
the first `SCAN` hits of each branch, whose best sentence holds most of the question's words,
and lifts it into the pool at `SENTENCE_AT`. It is the prose counterpart of `query.rows`.

Guarantees:
- A sentence is a piece of a chunk's text cut at a sentence end (`.`, `!`, `?` before white
  space) or a line break; a table chunk (`query.rows`) is left to `query.rows`.
- A sentence's *match* is the number of the question's content stems
  (`query.rows.content_stems`) that begin one of its words ("voltag" in "voltage"; a stem the
  stemmer does not cut from the word's start, "happi" for "happy", is missed, and "work" counts
  in "workers" too: a string test, so that reading 60 chunks costs a few milliseconds, where
  analysing every sentence cost 20-40 ms); a chunk's is its best sentence's.
- `sentence_hit` returns the chunk with the highest match, ties by branch order, when that match
  is at least `MIN_MATCH` and at least `MIN_SHARE` of the question's content stems, and the chunk
  is not among `shown` (already in the evidence); else None.
- Deterministic; the hits are not changed; at most `SCAN` hits per branch are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from manifold.query.rows import MIN_ROWS, branch_order, content_stems, table_rows
from manifold.query.types import TextHit

__all__ = ["MIN_MATCH", "MIN_SHARE", "SCAN", "SENTENCE_AT", "sentence_hit", "sentence_match"]

SENTENCE_AT = 3
"""Where the chunk joins the pool (0-based): fourth, after the three best (a table row's third)."""
MIN_MATCH = 4
"""A sentence must hold at least this many of the question's content stems ..."""
MIN_SHARE = 0.5
"""... and at least half of them."""
SCAN = 30
"""Hits read per branch (the branches return up to 100 each)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _starts(stems: set[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![^\W_])(" + "|".join(sorted(map(re.escape, stems), key=len, reverse=True)) + ")",
                      re.IGNORECASE)


def sentence_match(text: str, stems: set[str], starts: re.Pattern[str] | None = None) -> int:
    """The best sentence's match of a prose chunk's `text` for `stems`; 0 for a table chunk."""
    if not stems or len(table_rows(text)) >= MIN_ROWS:
        return 0
    starts = starts or _starts(stems)
    if len({m.casefold() for m in starts.findall(text)}) < MIN_MATCH:
        return 0  # not enough in the whole chunk: no sentence can have more
    return max((len({m.casefold() for m in starts.findall(s)}) for s in _SENTENCE_END.split(text)), default=0)


def sentence_hit(branches: Sequence[Sequence[TextHit]], question: str, shown: Iterable[str]) -> TextHit | None:
    """The prose chunk whose sentence best says what is asked, or None (module docstring)."""
    stems = content_stems(question)
    if not stems:
        return None
    seen = set(shown)
    floor = max(MIN_MATCH, MIN_SHARE * len(stems))
    starts = _starts(stems)
    best: tuple[int, TextHit] | None = None
    done: set[str] = set()
    for hit in branch_order([b[:SCAN] for b in branches]):
        if hit.chunk_id in seen or hit.chunk_id in done:
            continue
        done.add(hit.chunk_id)
        match = sentence_match(hit.text or "", stems, starts)
        if match >= floor and (best is None or match > best[0]):
            best = (match, hit)
    return best[1] if best else None
