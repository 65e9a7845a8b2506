"""OpenDocument readers: ODT, ODS and ODP bytes -> layout `Draft`s (pure functions).

The formats LibreOffice and OpenOffice write by default. Each is a zip whose `content.xml` holds
the whole body in the OASIS OpenDocument vocabulary, read here with lxml (already installed for
the DOCX and PPTX readers) instead of unstructured's `partition_odt`, which converts through
pandoc, a program this deployment does not ship. ODS and ODP have no unstructured reader at all.

Guarantees:
- Same bytes, same drafts; anything malformed (not a zip, no `content.xml`, broken XML) leaves as
  `BadInput` naming the format. The archive is bounded before the XML is read, as for Office Open
  XML (`parse_office.checked_zip`: declared and actually inflated size), and the parser resolves
  no entities and loads nothing from the network.
- ODT: a heading (`text:h`) is a `Title` with its outline level; a paragraph is `NarrativeText`;
  a list item's paragraphs are `ListItem`s nested by list depth; a table is a `Table` whose rows
  hold each cell's paragraphs joined by a space (a cell a merge covers is empty, a repeated cell
  is repeated); sections, frames and text boxes are read in document order; a footnote's or
  endnote's text follows its paragraph as `Text`; tracked deletions and comments are left out.
- ODS: one `Table` per sheet with its rows as stored (a number's or date's stored value, not its
  display format, so amounts stay exact, as in the XLSX reader); blank rows and trailing blank
  cells are dropped, so a sheet's declared million empty rows cost nothing; with several
  non-empty sheets each is preceded by a `Title` naming it.
- ODP: each slide (`draw:page`) is a page: its title frame a level-1 `Title`, its other text
  paragraphs and list items, its tables `Table`s, then its speaker notes as one `Text`.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from lxml import etree

from manifold.ingest.parse_formats import Draft, check_width, library_errors, padded
from manifold.ingest.parse_office import checked_zip
from manifold.shared.errors import BadInput

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
}
_MAX_REPEAT = 1000
"""A repeated cell or row is expanded at most this many times (blank ones are dropped anyway)."""


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


_H, _P, _SPAN, _A = _q("text:h"), _q("text:p"), _q("text:span"), _q("text:a")
_LIST, _ITEM, _HEADER = _q("text:list"), _q("text:list-item"), _q("text:list-header")
_S, _TAB, _BREAK = _q("text:s"), _q("text:tab"), _q("text:line-break")
_NOTE, _NOTE_BODY, _SECTION = _q("text:note"), _q("text:note-body"), _q("text:section")
_TABLE, _ROW, _CELL, _COVERED = _q("table:table"), _q("table:table-row"), _q("table:table-cell"), \
    _q("table:covered-table-cell")
_ROWS_GROUPS = {_q("table:table-header-rows"), _q("table:table-rows"), _q("table:table-row-group")}
_FRAME, _TEXT_BOX, _PAGE, _NOTES = _q("draw:frame"), _q("draw:text-box"), _q("draw:page"), \
    _q("presentation:notes")
_SKIPPED = {_q("text:tracked-changes"), _q("office:annotation"), _q("office:annotation-end"),
            _q("text:sequence-decls"), _q("table:table-columns"), _q("table:table-column"),
            _q("office:forms")}
_COUNT, _LEVEL = _q("text:c"), _q("text:outline-level")
_COLS_REPEATED, _ROWS_REPEATED = _q("table:number-columns-repeated"), _q("table:number-rows-repeated")
_VALUE_TYPE = _q("office:value-type")
_STORED = {"float": _q("office:value"), "percentage": _q("office:value"), "currency": _q("office:value"),
           "date": _q("office:date-value"), "time": _q("office:time-value"),
           "boolean": _q("office:boolean-value")}


def read_odt(content: bytes) -> list[Draft]:
    """An OpenDocument text (see module docstring)."""
    return list(_walk(_body(content, "ODT", "office:text"), depth=0, page=None))


def read_ods(content: bytes) -> list[Draft]:
    """An OpenDocument spreadsheet: one `Table` per non-empty sheet (see module docstring)."""
    sheets = [(t.get(_q("table:name")) or f"Sheet {i}", _rows(t, stored=True))
              for i, t in enumerate(_body(content, "ODS", "office:spreadsheet").iter(_TABLE), start=1)]
    several = sum(bool(rows) for _, rows in sheets) > 1
    drafts: list[Draft] = []
    for number, (name, rows) in enumerate(sheets, start=1):
        if rows:
            if several:
                drafts.append(Draft("Title", name, 1, number))
            drafts.append(Draft("Table", "", page=number, rows=padded(rows)))
    return drafts


def read_odp(content: bytes) -> list[Draft]:
    """An OpenDocument presentation: slide by slide (see module docstring)."""
    drafts: list[Draft] = []
    for number, slide in enumerate(_body(content, "ODP", "office:presentation").iter(_PAGE), start=1):
        for child in slide:
            if child.tag == _NOTES:
                notes = " ".join(t for p in child.iter(_P) if (t := _text(p)))
                if notes:
                    drafts.append(Draft("Text", notes, page=number))
            elif child.tag == _FRAME and child.get(_q("presentation:class")) == "title":
                title = " ".join(t for p in child.iter(_P) if (t := _text(p)))
                if title:
                    drafts.append(Draft("Title", title, 1, number))
            else:
                drafts.extend(_walk(child, depth=0, page=number))
    return drafts


def _body(content: bytes, what: str, kind: str) -> Any:
    """The `office:body` child of `kind` in the archive's `content.xml`; `BadInput` otherwise."""
    checked_zip(content, what, "content.xml")
    with library_errors(what), zipfile.ZipFile(io.BytesIO(content)) as archive:
        xml = archive.read("content.xml")
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
        root = etree.fromstring(xml, parser)
    body = root.find(f"office:body/{kind}", _NS)
    if body is None:
        raise BadInput(f"not an {what} file: content.xml has no {kind} body")
    return body


def _walk(node: Any, *, depth: int, page: int | None) -> Iterator[Draft]:
    """The drafts of `node`'s children, in document order."""
    for child in node:
        tag = child.tag
        if tag in _SKIPPED or not isinstance(tag, str):
            continue
        if tag == _H:
            if text := _text(child):
                yield Draft("Title", text, max(1, int(child.get(_LEVEL) or 1)), page)
            yield from _notes(child, page)
        elif tag == _P:
            if text := _text(child):
                yield Draft("ListItem" if depth else "NarrativeText", text, depth, page)
            yield from _notes(child, page)
            for frame in child.iter(_FRAME):  # a frame anchored in the paragraph (a text box, a caption)
                yield from _walk(frame, depth=depth, page=page)
        elif tag == _LIST:
            for item in child:
                if item.tag in (_ITEM, _HEADER):
                    yield from _walk(item, depth=depth + 1, page=page)
        elif tag == _TABLE:
            rows = _rows(child, stored=False)
            if rows:
                yield Draft("Table", "", page=page, rows=padded(rows))
        else:  # sections, frames, text boxes, shapes, groups: their content in order
            yield from _walk(child, depth=depth, page=page)


def _notes(paragraph: Any, page: int | None) -> Iterator[Draft]:
    for body in paragraph.iter(_NOTE_BODY):
        text = " ".join(t for p in body.iter(_P) if (t := _text(p)))
        if text:
            yield Draft("Text", text, page=page)


def _text(node: Any) -> str:
    """A paragraph's text: spans and links inline, `text:s` as its spaces, tabs and line breaks as
    white space, notes left to `_notes`, surrounding white space trimmed."""
    parts: list[str] = [node.text or ""]
    for child in node:
        tag = child.tag
        if tag == _S:
            parts.append(" " * min(int(child.get(_COUNT) or 1), 100))
        elif tag == _TAB:
            parts.append("\t")
        elif tag == _BREAK:
            parts.append("\n")
        elif tag in _SKIPPED or tag == _NOTE or tag == _FRAME or not isinstance(tag, str):
            pass
        else:
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts).strip()


def _rows(table: Any, *, stored: bool) -> list[list[str]]:
    """A table's non-blank rows, repeated rows and cells expanded (bounded), trailing blank
    cells dropped. `stored`: a typed cell gives its stored value (ODS), else its paragraphs."""
    out: list[list[str]] = []
    for row in _table_rows(table):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (_CELL, _COVERED):
                continue
            value = _cell(cell, stored) if cell.tag == _CELL else ""
            repeat = int(cell.get(_COLS_REPEATED) or 1)
            cells.extend([value] * (min(repeat, _MAX_REPEAT) if value else min(repeat, _MAX_REPEAT + 1)))
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        check_width(len(cells), "table")
        out.extend([cells] * min(int(row.get(_ROWS_REPEATED) or 1), _MAX_REPEAT))
    return out


def _table_rows(node: Any) -> Iterator[Any]:
    for child in node:
        if child.tag == _ROW:
            yield child
        elif child.tag in _ROWS_GROUPS:
            yield from _table_rows(child)


def _cell(cell: Any, stored: bool) -> str:
    if stored and (attribute := _STORED.get(cell.get(_VALUE_TYPE) or "")) and cell.get(attribute) is not None:
        return str(cell.get(attribute))
    return " ".join(t for p in cell.iter(_P, _H) if (t := _text(p)))
