"""Packing rendered pieces into chunks across section and table edges (pure, no I/O; used by
`ingest.chunk`). See `pack_neighbours` for the guarantees."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from manifold.shared.artifacts import Section
from manifold.shared.identifiers import find_identifiers

ChunkKind = Literal["text", "list", "identifiers", "table"]

SMALL_PIECE_SHARE = 4
"""A piece shorter than `chunk_max_chars // SMALL_PIECE_SHARE` (300 characters by default) is
small: it joins its neighbour across a section boundary, or a small table joins the text beside it."""


def pack_neighbours(pieces: list[tuple[int, ChunkKind, str]], max_chars: int,
                     sections: Sequence[Section] = (), root_title: str | None = None,
                     ) -> list[tuple[int, ChunkKind, str]]:
    """Neighbouring pieces joined (newline) while the result fits in `max_chars`, so a manual's
    definition lists, short paragraphs and one-line sections make passages of a readable size
    instead of many fragments:

    - consecutive text and list pieces of one section always;
    - across a section boundary, or with a table, only when one side is small
      (`SMALL_PIECE_SHARE`): a man page's NAME line, a one-line example or option, a
      directive's four-row summary table, a table's lead-in paragraph. The joined piece belongs
      to the section of its longest part (that title is the chunk's title); every other
      section's heading stays in the text, as a paragraph of its own before its part (a blank
      line on each side, so no sentence or name runs across it), so no words are lost; parts of
      different sections are separated by a blank line too. A root section titled by metadata
      or the file name (`root_title`) adds no line: that title is not document text.

    Identifier blocks are never joined, nor two table pieces, nor any piece across the boundary
    of a section whose title holds a business identifier (a product's own section stays its own chunk). The joined
    piece is `text` when any part is text or a table. Overlap-carrying pieces of one long run
    are not joined again (each of those is already near the limit)."""
    small = max_chars // SMALL_PIECE_SHARE
    titles = [sec.title for sec in sections]
    synthetic = {0} if sections and root_title is not None and sections[0].path == [root_title] else set()
    anchored = {i for i, title in enumerate(titles) if find_identifiers(title)}

    def joined(group: list[tuple[int, ChunkKind, str]], home: int | None) -> str:
        out = ""
        for k, (section, _, text) in enumerate(group):
            starts = k == 0 or section != group[k - 1][0]
            if k:
                out += "\n\n" if starts else "\n"  # a section boundary is a paragraph break
            if starts and section != home and section not in synthetic and section < len(titles):
                out += titles[section] + "\n\n"  # a heading is a paragraph of its own
            out += text
        return out

    def joinable(group: list[tuple[int, ChunkKind, str]], section: int, kind: ChunkKind, text: str) -> bool:
        last_section, last_kind, _ = group[-1]
        if "identifiers" in (kind, last_kind) or kind == last_kind == "table":
            return False  # a table's own pieces are already packed row by row
        if len(joined([*group, (section, kind, text)], None)) > max_chars:  # every heading kept: a bound
            return False
        if section == last_section and "table" not in (kind, last_kind):
            return True
        if section != last_section and (section in anchored or last_section in anchored):
            return False
        return min(len(joined(group, None)), len(text)) < small

    groups: list[list[tuple[int, ChunkKind, str]]] = []
    for section, kind, text in pieces:
        if groups and joinable(groups[-1], section, kind, text):
            groups[-1].append((section, kind, text))
        else:
            groups.append([(section, kind, text)])
    out: list[tuple[int, ChunkKind, str]] = []
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        kinds = {kind for _, kind, _ in group}
        home = max(group, key=lambda piece: len(piece[2]))[0]
        out.append((home, "list" if kinds == {"list"} else "text", joined(group, home)))
    return out
