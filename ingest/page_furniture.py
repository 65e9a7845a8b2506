"""Page furniture: the running headers, footers and page numbers of paginated text (pure functions).

A PDF manual prints "Network UPS Tools User Manual 28 / 123" on every page; `man` and `nroff`
output, RFCs and other typeset plain text print "NetHack Guidebook        58" and "RFC 791
Internet Protocol     September 1981" at each page break. Read as text, such a line lands in
the middle of a sentence or a definition ("Valid settings are:" … "NetHack Guidebook 58" …
"0 - move by letters"), becomes a heading that starts a new section there, and repeats the
document's name in every chunk. These functions find it so the readers can drop it.

Guarantees:
- `key(line)`: the line's shape, lower case, whitespace collapsed, every run of digits `#`
  (page 28 and page 29 have the same key).
- `pdf_furniture(pages)`: among the `EDGE_LINES` top-most and bottom-most lines of each page, the
  keys that occur on at least `MIN_PAGES` pages and on at least `PDF_SHARE` of the pages; a line
  of body text repeated at a page's edge by chance on a few pages is not furniture.
- `text_without_furniture(text)`: the text with its furniture lines removed (the blank lines
  around them stay, so paragraphs stay apart). In plain text a furniture line stands alone
  between blank lines, holds a digit and a letter, is at most `MAX_CHARS` long and is laid out
  in columns (a run of five or more spaces inside it: "NetHack Guidebook        58",
  "Postel      [Page 5]", "NetHack 3.6      March 8, 2020"); its key repeats at least
  `MIN_PAGES` times, by the median at least `MIN_GAP_LINES` lines apart (a page; a short title
  page may come first). Headings such as "Step 1", "Step 2" and repeated notes ("> Stability:
  1 - Experimental") are not laid out in columns, and stay.
- A rendered man page's title line and closing line (`LS(1)   User Commands   LS(1)` first, a
  line in columns ending in the same `LS(1)` last) are furniture too, though printed once each:
  the closing line, joined to the last section, made a chunk of its own that matched every
  question naming the program.
- Deterministic; nothing else in the text changes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

EDGE_LINES = 2
MIN_PAGES = 3
PDF_SHARE = 0.25
MAX_CHARS = 100
MIN_GAP_LINES = 20
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_COLUMNS = re.compile(r"\S {5,}\S")


def key(line: str) -> str:
    """The shape of a line: lower case, whitespace collapsed, each run of digits `#`."""
    return _DIGITS.sub("#", _SPACES.sub(" ", line.strip().casefold()))


def pdf_furniture(pages: Sequence[Sequence[str]]) -> set[str]:
    """The keys of furniture lines, given each page's lines from top to bottom (module docstring)."""
    seen: Counter[str] = Counter()
    for lines in pages:
        edge = [*lines[:EDGE_LINES], *lines[-EDGE_LINES:]] if len(lines) > EDGE_LINES else list(lines)
        seen.update({key(line) for line in edge if line.strip() and len(line.strip()) <= MAX_CHARS})
    floor = max(MIN_PAGES, PDF_SHARE * len(pages))
    return {k for k, n in seen.items() if n >= floor}


def text_without_furniture(text: str) -> str:
    """`text` without the lines that are page furniture (module docstring)."""
    lines = text.split("\n")
    drop = _man_title_lines(lines)
    places: dict[str, list[int]] = defaultdict(list)
    for i, line in enumerate(lines):
        body = line.strip()
        if not body or len(body) > MAX_CHARS or not any(c.isdigit() for c in body) \
                or not any(c.isalpha() for c in body):
            continue
        if (i > 0 and lines[i - 1].strip()) or (i + 1 < len(lines) and lines[i + 1].strip()):
            continue  # furniture stands alone between blank lines
        places[key(body)].append(i)
    for at in places.values():
        gaps = sorted(b - a for a, b in zip(at, at[1:], strict=False))
        if len(at) < MIN_PAGES or gaps[len(gaps) // 2] < MIN_GAP_LINES:
            continue
        if all(_COLUMNS.search(lines[i].strip()) for i in at):
            drop.update(at)
    if not drop:
        return text
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


_MAN_HEADER = re.compile(r"(\S+\([0-9A-Za-z]+\)) {3,}\S.* {3,}(\S+\([0-9A-Za-z]+\))")


def _man_title_lines(lines: Sequence[str]) -> set[int]:
    """A rendered man page's title line and closing line (`LS(1)   User Commands   LS(1)` first,
    `GNU coreutils 9.1   September 2022   LS(1)` last): the page's name, section and dates, which
    a page rendered without page breaks prints once each. Both are dropped only when the first
    non-blank line has that shape and the last non-blank line is in columns and ends with the
    same `NAME(SECTION)`; nothing is dropped otherwise."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < 3:
        return set()
    header = _MAN_HEADER.fullmatch(lines[filled[0]].strip())
    if header is None or header.group(1) != header.group(2):
        return set()
    last = lines[filled[-1]].strip()
    if not (last.endswith(header.group(1)) and _COLUMNS.search(last)):
        return set()
    return {filled[0], filled[-1]}


__all__ = ["key", "pdf_furniture", "text_without_furniture"]
