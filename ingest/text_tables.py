"""Tables drawn with box-drawing characters in plain text (pure).

`man` renders a page's `tbl` tables with box-drawing characters (systemd's and nftables' pages do):

    ┌─────────┬───────┐
    │Name     │ Value │
    ├─────────┼───────┤
    │security │ 50    │
    └─────────┴───────┘

Read as prose, such a table became one paragraph in which each value sat far from its name among
border characters. `split_box_tables(lines)` cuts a text into runs of ordinary lines and tables,
each table as rows of cells:

- a table is a run of at least three consecutive lines that each start (after indentation) with a
  box-drawing character, one of them a full border (`┌…┐`, `├…┤`, `└…┘`);
- cells are the text between vertical bars (`│`, or the `├ ┤ ┼` of a border line that carries
  text in another column); a cell that is only horizontal rule is empty;
- when full borders separate the body rows, the lines between two borders are one row, a cell's
  wrapped lines joined by spaces; otherwise every line is a row, except that a line whose first
  cell is empty continues the row above (its wrapped cells);
- nothing is dropped: a line whose cells do not match the table's width is kept as a row of its
  own (padded).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_START = re.compile(r"^\s*[┌├└│┏┣┗┃╭╰]")
_BORDER_CHARS = frozenset("─━┌┬┐├┼┤└┴┘┏┳┓┣╋┫┗┻┛╭╮╰╯ ")
_BAR = re.compile(r"[│┃├┤┼┣┫╋]")
_RULE = frozenset("─━")
MIN_LINES = 3


def _is_border(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) <= _BORDER_CHARS


def _cells(line: str) -> list[str]:
    parts = _BAR.split(line.strip())
    inner = parts[1:-1] if len(parts) > 2 else parts  # text outside the outer bars is not a cell
    return ["" if set(c.strip()) <= _RULE else " ".join(c.split()) for c in inner]


def box_table_rows(lines: list[str]) -> list[list[str]]:
    """The rows of one box-drawn table (module docstring), padded to one width."""
    borders = [i for i, line in enumerate(lines) if _is_border(line)]
    border_set = set(borders)
    content = [i for i in range(len(lines)) if i not in border_set]
    # two or more borders inside the content (more than the header's rule): rows span lines
    grouped = bool(content) and sum(content[0] < b < content[-1] for b in borders) >= 2
    rows: list[list[str]] = []
    current: list[list[str]] = []

    def flush() -> None:
        if current:
            row = [" ".join(p for p in parts if p) for parts in current]
            if not grouped and rows and not row[0] and len(row) == len(rows[-1]) and any(row):
                rows[-1] = [" ".join(p for p in (a, b) if p) for a, b in zip(rows[-1], row, strict=True)]
            elif any(row):
                rows.append(row)
            current.clear()

    for line in lines:
        if _is_border(line):
            flush()
            continue
        cells = _cells(line)
        if current and len(cells) != len(current):
            flush()
        if not current:
            current.extend([] for _ in cells)
        for parts, cell in zip(current, cells, strict=True):
            if cell:
                parts.append(cell)
        if not grouped:
            flush()
    flush()
    width = max((len(r) for r in rows), default=0)
    return [r + [""] * (width - len(r)) for r in rows]


def split_box_tables(text: str) -> Iterator[str | list[list[str]]]:
    """`text` as runs of ordinary text (str, newlines kept) and box-drawn tables (rows), in order."""
    lines = text.split("\n")
    plain: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and _START.match(lines[j]):
            j += 1
        block = lines[i:j]
        if len(block) >= MIN_LINES and any(_is_border(line) for line in block):
            rows = box_table_rows(block)
            if rows:
                if plain:
                    yield "\n".join(plain)
                    plain = []
                yield rows
                i = j
                continue
        plain.extend(block or [lines[i]])
        i = max(j, i + 1)
    if plain:
        yield "\n".join(plain)
