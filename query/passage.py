"""The sentence, clause or table row of retrieved chunks that answers a question (pure
functions, no I/O): `best_passage` picks it (see `_score` for the rule), `units` splits a
chunk into quotable units, `quote` cuts one for the answer line, `term_pattern` matches a
technical term however it is spelled (`max_connections`, `max connections`). A unit that asks
or introduces (an FAQ's question, a line ending `:`, a head line) is quoted with the unit that
follows it, which holds its answer, and any other sentence with the next one of its paragraph
when both fit in one quote; a heading's `~~~~` underline is never quoted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.shared import analysis

_SNIPPET = 240
"""Longest quote, in characters."""

_CELL_BREAK = re.compile(r"[\s,;|\t]")


def term_pattern(term: str) -> re.Pattern[str] | None:
    """A case-insensitive pattern for `term` as a whole word, its parts joined by up to three
    separators (`max_connections`, `max connections`, `max-connections`); None without parts.
    An option (`-x`, `--depth`) keeps its case."""
    parts = [p for p in re.split(r"[\W_]+", term) if p]
    if not parts:
        return None
    flags = 0 if term.startswith("-") else re.IGNORECASE  # options are case-sensitive: -x is not -X
    return re.compile(r"(?<![^\W_])" + r"[\W_]{0,3}".join(map(re.escape, parts)) + r"(?![^\W_])", flags)


def units(text: str) -> list[tuple[int, int]]:
    """(start, end) of each quotable unit of `text`: a table row (a line with cell separators) as
    it is, any other line split into sentences and `;` clauses, so a quote names one fact."""
    out: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", text):
        body = line.group(0)
        if "|" in body or "\t" in body or body.count(",") >= 3 and not re.search(r"[.!?;]\s", body):
            out.append((line.start(), line.end()))
            continue
        start = line.start()
        for stop in re.finditer(r"(?<=[.!?;])\s+", body):
            out.append((start, line.start() + stop.start()))
            start = line.start() + stop.end()
        out.append((start, line.end()))
    return [(s, e) for s, e in out if text[s:e].strip()]


def quote(text: str, start: int, end: int, first: int, limit: int = _SNIPPET) -> str:
    """`text[start:end]`, cut to `limit` characters from `first` (the first matched term) at a
    cell or word break, so no number is ever cut in two. A table row under a header line with
    the same cells is quoted as `header: value` pairs (empty cells left out)."""
    line = text[start:end].strip()
    head = text[:text.find("\n")].strip() if "\n" in text else ""
    if _labelled(head):
        head = ""  # a record that names its own fields: quoted as it is
    for sep in ("|", "\t", ";", ","):
        if start > 0 and sep in head and head.count(sep) == line.count(sep):
            pairs = [f"{h.strip()}: {v.strip()}" for h, v in zip(head.split(sep), line.split(sep), strict=True)
                     if v.strip()]
            return " ".join("; ".join(pairs).split())
    if len(line) <= limit:
        return _RULE.sub(" ", " ".join(line.split())).strip()
    lo = max(0, first - start - limit // 3)
    hi = min(len(line), lo + limit)
    while lo > 0 and lo < len(line) and not _CELL_BREAK.match(line[lo - 1]):
        lo += 1
    while hi < len(line) and hi > lo and not _CELL_BREAK.match(line[hi]):
        hi -= 1
    body = _RULE.sub(" ", " ".join(line[lo:hi].split())).strip()
    return ("…" if lo > 0 else "") + body + ("…" if hi < len(line) else "")


_QUANTITY_ASKED = re.compile(r"\b(?:how\s+(?:many|much|long|often|big|large|old)|default|maximum|minimum|max|min|"
                             r"limit|value|size|number|port|version|when|what\s+year|how\s+soon)\b", re.I)
"""A question that asks for a quantity, a date or a setting's value: a unit holding a digit is
likelier to state it."""
_DIGIT = re.compile(r"\d")


_LABELLED_CELL = re.compile(r"^\s*[^\s:|\t][^:|\t]{0,79}: \S")
"""A `key: value` cell: a line of such cells is a record that names its own fields (a JSON
record as the chunker writes it), not a header row."""


def _table_header(text: str) -> str | None:
    """The header row of a table chunk (its first line, with cell separators, above other rows);
    None when the first line is a record of `key: value` cells."""
    first, _, rest = text.partition("\n")
    if not rest.strip() or not ("|" in first or "\t" in first):
        return None
    return None if _labelled(first) else first


def _labelled(line: str) -> bool:
    """Whether every cell of a `|`- or tab-separated line is a `key: value` pair."""
    if "|" not in line and "\t" not in line:
        return False
    return all(_LABELLED_CELL.match(c) for c in (line.split("|") if "|" in line else line.split("\t")))


def best_passage(question: str, hits: Sequence[Any], terms: Sequence[str] = ()) -> tuple[Any, str] | None:
    """(hit, quote) of the sentence, clause or table row among `hits` that best matches the
    question (`_score`), an earlier hit winning a tie. In a table chunk the header row is never
    quoted; each row is scored with the header's words (and quoted as `header: value` pairs).
    None when no unit holds a term or a content word of the question (the caller then quotes the
    first hit's opening)."""
    patterns = [p for t in terms if (p := term_pattern(t)) is not None]
    words = question
    for p in patterns:  # a term counts once, as a term, not again through its words
        words = p.sub(" ", words)
    ask = _Asked(
        patterns=patterns,
        wanted=frozenset(analysis.terms(" ".join(
            w for w in re.findall(r"[^\W_][\w.'-]*", words)
            if w.casefold() not in QUESTION_WORDS and w.casefold() not in STOPWORDS))),
        quantity=bool(_QUANTITY_ASKED.search(question)),
        definition=bool(_DEFINITION_ASKED.search(question)))
    best: tuple[float, Any, int, int, int] | None = None
    for rank, hit in enumerate(hits):
        header = _table_header(hit.text)
        heads = _heads(hit.text) if header is None else []
        spans = units(hit.text)
        for k, (start, end) in enumerate(spans):
            if header is not None and start == 0:
                continue  # a table's header row names the columns, not a fact: its rows are quoted
            score, named = _score(ask, hit, header, heads, start, end)
            if score is None:
                continue
            score -= 0.01 * rank  # an earlier hit wins a tie
            if score > 0 and (best is None or score > best[0]):
                stop = _answer_end(hit.text, spans, k, heads) if header is None else end
                best = (score, hit, start, stop, start + min((m.start() for m in named), default=0))
    if best is None:
        return None
    _, hit, start, stop, first = best
    return hit, quote(hit.text, start, stop, first)


def _answer_end(text: str, spans: Sequence[tuple[int, int]], k: int, heads: Sequence[tuple[int, int]]) -> int:
    """Where the quote of unit `k` ends: a unit that asks (an FAQ's question, ending `?`), one that
    introduces what follows (ending `:`) or a head line is quoted with the unit after it, which
    holds its answer ("Can I run two copies at once?" then "Yes: give each its own
    directory ..."); any other unit with the next sentence of its paragraph when both fit in one
    quote ("... defined by _PATH_SERVICES." then "This is usually set to /etc/services."), so
    the sentence that completes it is not cut off; else it ends where it ends."""
    start, end = spans[k]
    if text[start:end].rstrip().endswith(("?", ":")) or (start, end) in heads:
        after = [e for s, e in spans[k + 1:k + 3] if _ALNUM.search(text[s:e])]  # past a `~~~~` underline
        return after[0] if after else end
    if k + 1 < len(spans):
        following, stop = spans[k + 1]
        if "\n" not in text[end:following] and stop - start <= _SNIPPET:
            return stop
    return end


_ALNUM = re.compile(r"[^\W_]")
_RULE = re.compile(r"\s*(?<!\S)([~=_*#-])\1{3,}(?!\S)\s*")
"""A word made of four or more of one rule character (a heading's `~~~~` or `====` underline);
not such a run inside a word (`-----BEGIN`)."""


@dataclass(frozen=True)
class _Asked:
    patterns: list[re.Pattern[str]]
    wanted: frozenset[str]
    quantity: bool
    definition: bool


def _score(ask: _Asked, hit: Any, header: str | None, heads: Sequence[tuple[int, int]], start: int,
           end: int) -> tuple[float | None, list[re.Match[str]]]:
    """A unit's score, and the matches of the terms it holds (None: it holds nothing asked):

    - each technical term it holds counts 3; a term it does not hold but the *head* of its block
      names counts 2 (a definition list: "max_connections (integer)" on its own line, or the
      section title before the chunk's first head line, then the sentences that describe it);
    - the first unit under such a head gains 0.5, or 2 when the question asks what something
      is, does or means (a definition is the first sentence under its term);
    - each distinct content word of the question outside its terms (by stem) counts 1;
    - a digit or a number word counts 2 when the question asks for a quantity, date or value;
    - a head line itself, or a command synopsis (three or more `[...]` groups), loses 2: it
      names a subject; the sentences under it state the facts."""
    text = hit.text
    unit = text[start:end]
    named = [m for p in ask.patterns if (m := p.search(unit))]
    before = [h for h in heads if h[1] < start]
    if before:
        head_text, block_start = text[before[-1][0]:before[-1][1]], before[-1][1]
    else:
        head_text, block_start = hit.section_title or "", 0
    inherited = sum(1 for p in ask.patterns if not p.search(unit) and p.search(head_text))
    first_of_block = bool(inherited) and not text[block_start:start].strip()
    overlap = len(ask.wanted & set(analysis.terms(f"{header}\n{unit}" if header else unit)))
    if not (named or inherited or overlap):
        return None, named
    score = 3.0 * len(named) + 2 * inherited + overlap
    if first_of_block:
        score += 2 if ask.definition else 0.5
    if ask.quantity and (_DIGIT.search(unit) or _NUMBER_WORD.search(unit)):
        score += 2
    if (start, end) in heads or len(_OPTION_GROUP.findall(unit)) >= 3:
        score -= 2
    return score, named


_DEFINITION_ASKED = re.compile(
    r"^\W*(?:what\s+(?:does|do)\b.*\b(?:do|mean|give|return|control|set)s?\W*$"
    r"|what\s+(?:is|are)\b.*\bfor\W*$|what\s+(?:is|are)\s+(?:an?\s+|the\s+)?\S+\W*$|(?:describe|explain|define)\b)",
    re.IGNORECASE)
"""A question that asks what something is, does or means."""
_NUMBER_WORD = re.compile(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
                          r"thirty|forty|fifty|sixty|hundred|thousand|million|billion|once|twice)\b", re.IGNORECASE)
_OPTION_GROUP = re.compile(r"\[[^\]\n]{1,60}\]")


_HEAD_LINE = re.compile(r"[^\n|\t]{1,80}")
_HEAD_END = re.compile(r"[.;,!?:]\s*$")


def _heads(text: str) -> list[tuple[int, int]]:
    """(start, end) of the *head lines* of a chunk: short lines (at most 80 characters and 10
    words, no cell separator, not ending like a sentence or an introduction) followed by another
    line, such as a definition list's term ("max_connections (integer)", "--depth <depth>")."""
    out = []
    for line in re.finditer(r"[^\n]+", text):
        body = line.group(0).strip()
        if (line.end() < len(text.rstrip()) and _HEAD_LINE.fullmatch(body) and len(body.split()) <= 10
                and not _HEAD_END.search(body)):
            out.append((line.start(), line.end()))
    return out


