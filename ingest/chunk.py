"""Chunk stage: parsed layout elements -> sections and retrievable chunks (pure handler).

Guarantees:
- Pure and deterministic: the same `ParsedDocument` always yields the same sections, chunks and
  ids. Ids are `child_id("sec"|"chk", scope, ordinal)` with `scope = version_scope(tenant,
  document, version, content hash, config fingerprint)`, so a replay upserts onto the same ids
  and any change of content, version or configuration gives new ones.
- Parent map: every chunk names its section; every section has its path of titles from the
  document root down. Content before the first heading (or in a document without headings)
  lives in a root section titled by metadata `title`, else the document id and the words of its
  file name (`file_title`). A title heads a
  section only if something other than a same-or-higher-level title follows it; otherwise it is
  kept as text, so no words are lost to empty sections.
- Chunk text is raw document text (no synthetic prefixes): paragraphs, list items and table rows
  are joined by newlines, sentences by one space.
- Boundaries follow layout: an identifier block always starts a new chunk, and so do a new
  section and a table unless one side is small; within a section, consecutive text and list
  pieces are packed together while they fit in `chunk_max_chars` (`chunk_pack.pack_neighbours`), and a
  lone short lead-in (one element of at most `LEAD_IN_MAX_CHARS`, such as a definition-list term)
  always goes with what follows it. A small piece (under `chunk_max_chars // chunk_pack.SMALL_PIECE_SHARE`:
  a man page's NAME line, a one-line option or example, a four-row table) joins its neighbour
  across a section boundary or a table edge while the result fits, the other section's heading
  kept as a line of the text; the chunk belongs to the section of its longest part. Sections
  titled by a business identifier are never joined with another. Every table-kind chunk starts
  with the header row (of its columns) and is at most
  `chunk_max_chars` long: rows are packed whole while they fit; a row that does not fit with the
  header alone is split into column slices (`header slice` newline `cell slice`), and a single cell
  too long for a slice is cut into pieces each under its (shortened) column header, so no input
  row, however wide or long, makes a chunk larger than the limit. A table of JSON records is
  chunked as JSON writes its objects: one line per record, `key: value` pairs joined by ` | `
  (empty values left out), no header line, records packed whole while they fit, a record too
  long for one chunk split between pairs (a single pair too long is cut under its key), so every
  value stays next to the key that names it. Identifier blocks (text that is mostly
  business identifiers) are never split. List items are kept whole and together; a list splits
  only between items (an item longer than the limit alone is split at sentences). A numbered
  clause ("1.", "1.2", "§ 3", "Article 4") starts a unit kept whole when it fits; other narrative
  text packs sentence by sentence.
- Bounded: at most `MAX_CHUNKS` chunks per document, else `BadInput` naming the limit.
- Text and list chunks are at most `chunk_max_chars` long; consecutive text chunks of one
  section (except at a clause boundary) overlap by whole trailing sentences of up to
  `chunk_overlap_chars` (at most half the limit), or by a word-aligned tail when no whole
  sentence fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from manifold.ingest.chunk_pack import ChunkKind, pack_neighbours
from manifold.shared import ids
from manifold.shared.artifacts import Chunk, ChunkedDocument, DocRef, Element, ParsedDocument, Section
from manifold.shared.errors import BadInput
from manifold.shared.identifiers import find_identifiers, normalize_identifier

CHUNKER_VERSION = "layout-7"
MAX_CHUNKS = 35_000
"""A document that makes more chunks than this is rejected (`BadInput`): the embed, extract and
load stages hold every chunk's text and vector at once, so this bounds their memory for any
accepted file (measured by bench/wide_rows.py). About twice what an ordinary document at the
20 MiB size limit makes at the default `chunk_max_chars`, so only inputs that multiply their
text (a very wide table, whose header is repeated over every column slice) reach it."""


_CLAUSE = re.compile(
    r"^(?:§+\s*\d+|(?:Article|Art\.|Section|Clause)\s+(?:\d+|[IVXLC]+)\b|\d{1,3}(?:\.\d{1,3})+\.?(?=\s)|\d{1,3}\.(?=\s))",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "e.g i.e cf vs approx no nr art sec para fig mr mrs ms dr prof st inc ltd co corp ca pp vol ref".split()
)
_TOKEN_SPLIT = re.compile(r"[\s,;|]+")
_TOKEN_TRIM = ".,;:()[]{}\"'"
_IDENTIFIER_SHARE = 0.6


@dataclass
class _Unit:
    """Paragraphs packed as one unit of text; a clause unit starts a new chunk unless it fits."""

    paragraphs: list[str]
    clause: bool


@dataclass
class _Run:
    kind: ChunkKind
    section: int
    elements: list[Element] = field(default_factory=list)


def handle(parsed: ParsedDocument) -> ChunkedDocument:
    """Sections and chunks of `parsed`; see the module docstring for the guarantees."""
    doc, versions = parsed.doc, parsed.versions
    scope = ids.version_scope(doc.tenant_id, doc.document_id, doc.version, doc.content_sha256, versions.fingerprint())
    title = doc.metadata.get("title")
    root_title = title.strip() if isinstance(title, str) and title.strip() else file_title(doc.document_id)
    sections, runs = _layout(parsed.elements, scope, root_title)
    max_chars = versions.chunk_max_chars
    overlap = max(0, min(versions.chunk_overlap_chars, max_chars // 2))
    chunks: list[Chunk] = []
    labelled = _labelled_tables(doc)
    pieces = [(run.section, run.kind, text) for run in runs
              for text in _render(run, max_chars, overlap, labelled) if text.strip()]
    for section, kind, text in pack_neighbours(pieces, max_chars, sections, root_title):
        if len(chunks) >= MAX_CHUNKS:
            raise BadInput(f"document makes more than {MAX_CHUNKS} chunks of at most {max_chars} characters; "
                           f"the limit is {MAX_CHUNKS} chunks per document")
        chunks.append(
            Chunk(
                chunk_id=ids.child_id("chk", scope, len(chunks)),
                section_id=sections[section].section_id,
                ordinal=len(chunks),
                kind=kind,
                text=text,
                content_sha256=ids.sha256_text(text),
                identifiers=find_identifiers(text),
            )
        )
    return ChunkedDocument(doc=doc, versions=versions, elements=parsed.elements, sections=sections, chunks=chunks)


# ----------------------------------------------------------------------------- layout


def _layout(elements: list[Element], scope: str, root_title: str) -> tuple[list[Section], list[_Run]]:
    """Sections from headings, and the elements grouped into runs of one kind within a section."""
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    runs: list[_Run] = []

    def open_section(title: str, path: list[str]) -> None:
        ordinal = len(sections)
        sections.append(Section(section_id=ids.child_id("sec", scope, ordinal), ordinal=ordinal, title=title,
                                path=path))

    for i, element in enumerate(elements):
        following = elements[i + 1] if i + 1 < len(elements) else None
        if element.kind == "Title" and _heads_content(element, following):
            while stack and stack[-1][0] >= element.depth:
                stack.pop()
            stack.append((element.depth, element.text))
            open_section(element.text, [t for _, t in stack])
            continue
        if not sections:
            open_section(root_title, [root_title])
        kind = _run_kind(element)
        current = len(sections) - 1
        if _introduces(runs[-1] if runs else None, kind, current):
            runs[-1].kind = kind  # a lone short lead-in ("max_wal_size (integer)") joins what it introduces
        elif not runs or runs[-1].kind != kind or runs[-1].section != current or kind == "table":
            runs.append(_Run(kind, current))
        runs[-1].elements.append(element)
    return sections, runs


def file_title(document_id: str) -> str:
    """The root title of a document without a title of its own: its id, followed by the words of
    its file name when they differ (`data/debian.csv` -> `data/debian.csv (debian)`,
    `git/git-clone.html` -> `git/git-clone.html (git clone)`), so a search for the name finds it
    (the text analysis keeps `debian.csv` as one term)."""
    name = document_id.rstrip("/").rsplit("/", 1)[-1]
    if "." not in name.strip("."):
        return document_id  # no extension: the id's own words are already searchable
    words = " ".join(w for w in re.split(r"[\W_]+", name.rsplit(".", 1)[0]) if w)
    return f"{document_id} ({words})" if words else document_id


LEAD_IN_MAX_CHARS = 120
"""A run of one element at most this long that is not a sentence (a definition-list term, a label line such as
`checkpoint_timeout (integer)` or `-x, --exclude`) is a lead-in: it is chunked with the text or
list that follows it in the same section, not alone, so the term and its definition are one
retrievable passage."""


def _introduces(previous: _Run | None, kind: ChunkKind, section: int) -> bool:
    return (previous is not None and previous.section == section and previous.kind != kind
            and previous.kind in ("text", "list") and kind in ("text", "list") and len(previous.elements) == 1
            and len(previous.elements[0].text) <= LEAD_IN_MAX_CHARS
            and not previous.elements[0].text.rstrip().endswith((".", "!", "?")))


def _heads_content(title: Element, following: Element | None) -> bool:
    return following is not None and not (following.kind == "Title" and following.depth <= title.depth)


def _run_kind(element: Element) -> ChunkKind:
    if element.kind == "Table":
        return "table"
    if element.kind == "Identifier" or is_identifier_block(element.text):
        return "identifiers"
    if element.kind == "ListItem" and not _CLAUSE.match(element.text):
        return "list"
    return "text"


def is_identifier_block(text: str) -> bool:
    """True when at least 60% of the words in `text` are business identifiers
    (e.g. "Products: PRD-482, PRD-483, SKU-991")."""
    tokens = [t.strip(_TOKEN_TRIM) for t in _TOKEN_SPLIT.split(text)]
    tokens = [t for t in tokens if t]
    hits, i = 0, 0
    while i < len(tokens):
        if normalize_identifier(tokens[i]):
            hits, i = hits + 1, i + 1
        elif i + 1 < len(tokens) and normalize_identifier(f"{tokens[i]} {tokens[i + 1]}"):
            hits, i = hits + 2, i + 2
        else:
            i += 1
    return hits > 0 and hits >= _IDENTIFIER_SHARE * len(tokens)


# ----------------------------------------------------------------------------- rendering


def _labelled_tables(doc: DocRef) -> bool:
    """True when the document's tables are JSON records (objects name each value by its key)."""
    declared = doc.media_type.split(";", 1)[0].strip().lower()
    if declared in _JSON_TYPES:
        return True
    name = doc.metadata.get("filename")
    path = PurePath(name if isinstance(name, str) else doc.document_id)
    return declared in _OPAQUE_TYPES and path.suffix.lower() == ".json"


_JSON_TYPES = frozenset({"application/json", "text/json"})
_OPAQUE_TYPES = frozenset({"application/octet-stream", "binary/octet-stream"})


def _render(run: _Run, max_chars: int, overlap: int, labelled: bool = False) -> list[str]:
    if run.kind == "table":
        if labelled:
            return _record_chunks(run.elements[0], max_chars)
        return _table_chunks(run.elements[0], max_chars)
    texts = [e.text for e in run.elements]
    if run.kind == "identifiers":
        return _pack_whole(texts, max_chars)
    if run.kind == "list":
        chunks: list[str] = []
        for group in _pack_whole(texts, max_chars):
            oversize = len(group) > max_chars
            chunks += _pack_text([_Unit([group], clause=False)], max_chars, 0) if oversize else [group]
        return chunks
    return _pack_text(_units(run.elements), max_chars, overlap)


def _table_chunks(table: Element, max_chars: int) -> list[str]:
    grid = table.rows if table.rows else [[line] for line in table.text.split("\n")]
    header_cells, body = grid[0], grid[1:]
    header = " | ".join(header_cells)
    if len(header) > max_chars:  # too wide to head any chunk: every row goes out in column slices
        rows: Sequence[list[str] | None] = body or [None]  # no body: the header alone
        return [c for cells in rows for c in _row_slices(header_cells, cells, max_chars)]
    chunks: list[str] = []
    current, size = [header], len(header)
    for cells in body:
        row = " | ".join(cells)
        if len(header) + 1 + len(row) > max_chars:  # this row does not fit even alone: slice it
            if len(current) > 1:
                chunks.append("\n".join(current))
                current, size = [header], len(header)
            chunks += _row_slices(header_cells, cells, max_chars)
            continue
        if len(current) > 1 and size + 1 + len(row) > max_chars:
            chunks.append("\n".join(current))
            current, size = [header], len(header)
        current.append(row)
        size += 1 + len(row)
    if len(current) > 1 or not chunks:
        chunks.append("\n".join(current))
    return chunks


RECORD_SEPARATOR = " | "


def _record_chunks(table: Element, max_chars: int) -> list[str]:
    """A table of JSON records as `key: value | key: value` lines, one per record (module
    docstring): whole records packed while they fit in `max_chars`; a longer record split
    between pairs; a single pair too long for a chunk cut into pieces, each under its key."""
    grid = table.rows if table.rows else [[line] for line in table.text.split("\n")]
    header, body = grid[0], grid[1:]
    lines: list[str] = []
    for cells in body or [header]:
        pairs = [f"{key}: {value}" if body else key for key, value in zip(header, cells, strict=False) if value]
        if not pairs:
            continue
        record = RECORD_SEPARATOR.join(pairs)
        if len(record) <= max_chars:
            lines.append(record)
            continue
        for group in _pack_joined(pairs, max_chars):
            if len(group) <= max_chars:
                lines.append(group)
                continue
            key, _, value = group.partition(": ")
            label = key[:max_chars // 4]
            lines += [f"{label}: {piece}" for piece in _pieces(value, max_chars - len(label) - 2)]
    return _pack_whole(lines, max_chars)


def _pack_joined(parts: list[str], max_chars: int) -> list[str]:
    """`parts` joined by `RECORD_SEPARATOR` into groups of at most `max_chars` (a part longer
    than that alone is its own group)."""
    groups: list[str] = []
    for part in parts:
        if groups and len(groups[-1]) + len(RECORD_SEPARATOR) + len(part) <= max_chars:
            groups[-1] += RECORD_SEPARATOR + part
        else:
            groups.append(part)
    return groups


def _row_slices(header: list[str], cells: list[str] | None, max_chars: int) -> list[str]:
    """One row (or, with `cells` None, the header alone) as chunks of consecutive columns, each
    `header slice` + newline + `cell slice`, at most `max_chars`; a column whose header and cell
    do not fit together is cut: its header shortened to a quarter of the limit, its cell split into
    pieces that each fit under that header. A header alone is the table's only content (a one-row
    table), so a header cell too long for a chunk is split into pieces, never shortened."""
    label_max = max_chars // 4
    chunks: list[str] = []
    heads: list[str] = []
    values: list[str] = []

    def flush() -> None:
        if heads:
            chunks.append(" | ".join(heads) + ("" if cells is None else "\n" + " | ".join(values)))
            heads.clear()
            values.clear()

    for i, head in enumerate(header):
        value = "" if cells is None or i >= len(cells) else cells[i]
        size = len(" | ".join(heads)) + len(" | ".join(values)) + 1
        if len(head) + len(value) + 1 > max_chars:
            flush()
            if cells is None:  # a header alone is content: split, never cut
                chunks += _pieces(head, max_chars)
                continue
            label = head[:label_max]
            for piece in _pieces(value, max_chars - len(label) - 1):
                chunks.append(f"{label}\n{piece}")
            continue
        if heads and size + 2 * len(" | ") + len(head) + len(value) > max_chars:
            flush()
        heads.append(head)
        values.append(value)
    flush()
    return chunks


def _pack_whole(texts: list[str], max_chars: int) -> list[str]:
    """Whole texts joined by newlines, a new group when the next one would pass the limit."""
    groups: list[list[str]] = []
    size = 0
    for text in texts:
        if groups and size + 1 + len(text) <= max_chars:
            groups[-1].append(text)
            size += 1 + len(text)
        else:
            groups.append([text])
            size = len(text)
    return ["\n".join(g) for g in groups]


def _units(elements: list[Element]) -> list[_Unit]:
    units: list[_Unit] = []
    for element in elements:
        if _CLAUSE.match(element.text):
            units.append(_Unit([element.text], clause=True))
        elif units and units[-1].clause:
            units[-1].paragraphs.append(element.text)
        else:
            units.append(_Unit([element.text], clause=False))
    return units


class _Packer:
    """Accumulates (joiner, piece) pairs into chunks of at most `max_chars`."""

    def __init__(self, max_chars: int, overlap: int) -> None:
        self.max_chars, self.overlap = max_chars, overlap
        self.pieces: list[tuple[str, str]] = []
        self.chunks: list[str] = []

    def text(self, pieces: list[tuple[str, str]] | None = None) -> str:
        pieces = self.pieces if pieces is None else pieces
        return "".join(j + p if k else p for k, (j, p) in enumerate(pieces))

    def add(self, joiner: str, piece: str) -> None:
        if self.pieces and len(self.text()) + len(joiner) + len(piece) > self.max_chars:
            carry = self._tail()
            self.flush()
            self.pieces = carry
            while self.pieces and len(self.text()) + len(joiner) + len(piece) > self.max_chars:
                self.pieces.pop(0)
        self.pieces.append((joiner, piece))

    def flush(self) -> None:
        if self.pieces:
            self.chunks.append(self.text())
        self.pieces = []

    def _tail(self) -> list[tuple[str, str]]:
        """Trailing whole sentences within the overlap budget (never the whole chunk), else the
        word-aligned tail of the last sentence."""
        if self.overlap <= 0:
            return []
        carry: list[tuple[str, str]] = []
        for joiner, piece in reversed(self.pieces[1:]):
            if len(self.text([("", piece), *carry])) > self.overlap:
                break
            carry.insert(0, (joiner, piece))
        if carry:
            return carry
        words = self.pieces[-1][1].split(" ")
        tail: list[str] = []
        for word in reversed(words[1:]):
            if len(" ".join([word, *tail])) > self.overlap:
                break
            tail.insert(0, word)
        return [("", " ".join(tail))] if tail else []


def _pack_text(units: list[_Unit], max_chars: int, overlap: int) -> list[str]:
    packer = _Packer(max_chars, overlap)
    limit = max_chars - overlap
    for unit in units:
        if unit.clause and packer.pieces and len(packer.text()) + 1 + len("\n".join(unit.paragraphs)) > max_chars:
            packer.flush()  # a clause starts a new chunk unless it fits whole; no overlap across it
        for paragraph in unit.paragraphs:
            for k, piece in enumerate(_pieces(paragraph, limit)):
                packer.add(" " if k else "\n", piece)
    packer.flush()
    return packer.chunks


def _pieces(paragraph: str, limit: int) -> list[str]:
    """Sentences of `paragraph`, each cut at spaces (or hard, for one giant word) to `limit`."""
    out: list[str] = []
    for sentence in sentences(paragraph):
        if len(sentence) <= limit:
            out.append(sentence)
            continue
        current = ""
        for word in sentence.split(" "):
            while len(word) > limit:
                if current:
                    out.append(current)
                    current = ""
                out.append(word[:limit])
                word = word[limit:]
            if current and len(current) + 1 + len(word) > limit:
                out.append(current)
                current = ""
            current = f"{current} {word}" if current else word
        if current:
            out.append(current)
    return out


def sentences(text: str) -> list[str]:
    """Split at `.`, `!` or `?` followed by space and a capital or digit, except after common
    abbreviations, single initials and a leading clause number ("1. The ...")."""
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        before = text[start : match.start()]
        word = before.rsplit(None, 1)[-1].lower() if before.strip() else ""
        if text[match.start()] == "." and (
            word in _ABBREVIATIONS
            or (len(word) == 1 and word.isalpha())
            or (word.replace(".", "").isdigit() and before.strip() == word)
        ):
            continue
        out.append(text[start : match.end()].strip())
        start = match.end()
    if text[start:].strip():
        out.append(text[start:].strip())
    return out
