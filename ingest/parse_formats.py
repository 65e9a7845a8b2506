"""Format readers: bytes of one media type -> layout `Draft`s in reading order (pure functions).

Guarantees:
- Same bytes, same drafts (no clocks, no randomness; language detection is switched off).
- Every failure of a third-party library (unstructured, csv, json, email) leaves as `BadInput`
  with a readable reason; a bug in this module stays a plain exception.
- Nothing touches the network: unstructured telemetry is opted out before its first import and
  its spaCy model comes from the installed `en_core_web_sm` package.

unstructured partitions text, Markdown, HTML and email bodies (HTML after its navigation is
removed: `html_boilerplate`). CSV, TSV and JSON are read here because unstructured cannot do them
faithfully offline: `partition_csv` truncates single-column files and rejects ragged rows,
`partition_json` reads only its own element format. Office files are read in `parse_office`,
PDF in `parse_pdf`; the shared helpers (`Draft`, `library_errors`, `from_unstructured`, ...) live
here.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from email import policy
from email.parser import BytesParser
from typing import Any, Literal

from manifold.ingest.html_boilerplate import strip_boilerplate
from manifold.ingest.page_furniture import text_without_furniture
from manifold.ingest.text_tables import split_box_tables
from manifold.shared.artifacts import ElementKind
from manifold.shared.errors import BadInput

MAX_TABLE_COLUMNS = 1024
"""A table (CSV, JSON records, HTML/DOCX table) wider than this is rejected as `BadInput`: no
retrieval or record use needs more, and a million-column row would otherwise become one huge
header repeated in every chunk (SECURITY.md, wide table rows)."""
_RECORD_KEYS = ("records", "items", "rows")
_WRAPPED_LINE = 40  # a line at least this long, followed by more text, is a wrapped paragraph
_EMAIL_HEADERS = ("From", "To", "Cc", "Subject", "Date")
PARAGRAPH_START = re.compile(
    r"^(?:[-*•▪‣◦–]\s|\(?\d{1,3}(?:\.\d{1,3})*[.)]\s|\d{1,3}(?:\.\d{1,3})+\s|§|(?:Article|Section|Clause)\s+\d)",
    re.IGNORECASE,
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


@dataclass(frozen=True)
class Draft:
    """One element before indexing and whitespace normalisation (done by the parse handler)."""

    kind: ElementKind
    text: str
    depth: int = 0
    page: int | None = None
    rows: list[list[str]] | None = None


# ----------------------------------------------------------------------------- shared helpers


@contextmanager
def library_errors(what: str) -> Iterator[None]:
    """Turn any failure inside a third-party parser into `BadInput` naming the format."""
    try:
        yield
    except BadInput:
        raise
    except Exception as err:  # noqa: BLE001 - the library's failure is the input's fault
        detail = _ADDRESS.sub("", f"{type(err).__name__}: {err}")[:300]
        raise BadInput(f"cannot parse {what}: {detail}") from err


def decode_text(content: bytes, declared: str | None = None, *, terminal: bool = False) -> str:
    """Text of `content`: BOM, then the declared charset, then UTF-8, then Windows-1252.

    Raises `BadInput` for binary content (NUL or many control bytes) and for bytes no candidate
    decodes strictly; nothing is ever decoded with replacement characters. With `terminal`,
    terminal formatting (`man` output) is removed before that check: backspace overstrike
    (`c\\bc` bold, `_\\bx` underline: the visible character stays) and ANSI SGR escapes.
    """
    checked = (lambda text: _checked_text(_plain_terminal_text(text))) if terminal else _checked_text
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if content.startswith(bom):
            with library_errors(f"text ({codec} with byte-order mark)"):
                return checked(content.decode(codec))
    if b"\x00" in content:
        raise BadInput("content looks binary (NUL bytes), not text")
    candidates = [c for c in (_codec(declared), "utf-8", "cp1252") if c is not None]
    first_error: UnicodeDecodeError | None = None
    for codec in dict.fromkeys(candidates):
        try:
            return checked(content.decode(codec))
        except UnicodeDecodeError as err:
            first_error = first_error or err
    assert first_error is not None
    raise BadInput(
        f"content is not decodable text: invalid {first_error.encoding} byte at offset {first_error.start}"
    )


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        codec = codecs.lookup(name).name
        "x".encode(codec)  # LookupError for codecs that are not text encodings (base64, zlib, ...)
    except LookupError:
        return None
    if codec.startswith(("utf-16", "utf-32")):
        return "utf-8"  # a declaration inside the bytes cannot be UTF-16 without a BOM (HTML5 rule)
    return "cp1252" if codec in {"latin-1", "iso8859-1", "ascii"} else codec  # as browsers do


_UNDERLINED_AFTER = re.compile(r"([^\x08\n])\x08_")
_OVERSTRUCK = re.compile(r"[^\x08\n]\x08")
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _plain_terminal_text(text: str) -> str:
    """`text` without backspace overstrike and ANSI colour/bold escapes (as `col -b` would)."""
    if "\x1b" in text:
        text = _SGR.sub("", text)
    if "\x08" not in text:
        return text
    text = _UNDERLINED_AFTER.sub(r"\1", text)  # x\b_ (underline written second) keeps x
    while True:  # c\bc and _\bx keep the last character; bold underline stacks several
        plain = _OVERSTRUCK.sub("", text)
        if plain == text:
            return plain.replace("\x08", "")
        text = plain


def _checked_text(text: str) -> str:
    controls = len(_CONTROL.findall(text[:65536]))
    if "\x00" in text or controls > max(2, len(text[:65536]) // 100):
        raise BadInput("content looks binary (NUL bytes or control characters), not text")
    return text


def rows_from_html(html: str | None) -> list[list[str]] | None:
    """Cells of an HTML table (`colspan` repeated, rows padded to one width), or None if empty."""
    if not html:
        return None
    import lxml.html

    rows: list[list[str]] = []
    for tr in lxml.html.fromstring(html).iter("tr"):
        cells: list[str] = []
        for cell in tr:
            if isinstance(cell, lxml.html.HtmlElement) and cell.tag in ("td", "th"):  # not a comment
                span = int(cell.get("colspan", "1")) if cell.get("colspan", "1").isdigit() else 1
                cells.extend([" ".join(cell.text_content().split())] * max(1, min(span, 50)))
        if any(cells):
            check_width(len(cells), "HTML table")
            rows.append(cells)
    return padded(rows) or None


def check_width(columns: int, what: str) -> None:
    if columns > MAX_TABLE_COLUMNS:
        raise BadInput(f"{what} has {columns} columns; the limit is {MAX_TABLE_COLUMNS}")


def padded(rows: list[list[str]]) -> list[list[str]]:
    width = max((len(r) for r in rows), default=0)
    return [r + [""] * (width - len(r)) for r in rows]


# ----------------------------------------------------------------------------- unstructured


def unstructured_env() -> None:
    """Opt out of unstructured's telemetry ping and banner before it is first imported."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "1")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")


_KINDS: dict[str, ElementKind] = {
    "Title": "Title", "NarrativeText": "NarrativeText", "ListItem": "ListItem", "Table": "Table",
    "Address": "Address", "UncategorizedText": "Text", "Text": "Text", "EmailAddress": "Text",
    "FigureCaption": "Text", "CodeSnippet": "Text", "Formula": "Text",
}
_DROPPED = {"PageBreak", "PageNumber"}


def from_unstructured(
    elements: Iterable[Any], *, list_base: int = 0, demote_titles: bool = False, page: int | None = None
) -> list[Draft]:
    """Map unstructured elements to drafts: titles get a 1-based heading level, list items their
    nesting (0 = top level; `list_base` is what the partitioner calls top level), tables rows."""
    drafts: list[Draft] = []
    for el in elements:
        category = str(el.category)
        if category in _DROPPED:
            continue
        kind: ElementKind = _KINDS.get(category, "Other")
        depth = el.metadata.category_depth or 0
        if kind == "Title" and demote_titles:
            kind, depth = "Text", 0
        elif kind == "Title":
            depth += 1
        elif kind == "ListItem":
            depth = max(0, depth - list_base)
        else:
            depth = 0
        rows = rows_from_html(el.metadata.text_as_html) if kind == "Table" else None
        if kind == "Table" and rows is None:
            rows = [[str(el.text)]]
        drafts.append(Draft(kind, str(el.text or ""), depth, page or el.metadata.page_number, rows))
    return drafts


def read_text(content: bytes) -> list[Draft]:
    """Plain text, including rendered man pages (overstrike and ANSI escapes removed)."""
    return text_drafts(decode_text(content, terminal=True))


_BROKEN_WORD = re.compile(r"(?:^|[^\w-])([a-z]{2,})([-\u2010\u00ad])$")
"""A line ending in a lowercase word and a hyphen: ASCII `-`, or U+2010 HYPHEN / U+00AD SOFT
HYPHEN, which groff and other typesetters emit only where they broke a word at the line's end
(`man` under a UTF-8 locale writes `vari‐` / `ables`)."""
_CONTINUATION = re.compile(r"[a-z]+[.,;:!?)\]'\"]*")
_HYPHEN_PREFIXES = frozenset({"self", "non", "well", "all", "half", "cross", "ill", "built", "case", "ex"})
"""Prefixes written with a hyphen (`self-contained`): a line break after one keeps the hyphen."""


def _hyphen_joined(previous: str, line: str) -> str | None:
    """`previous` + `line` as one word when `previous` ends in a line-break hyphen: a lowercase
    word of two or more letters then a hyphen (`_BROKEN_WORD`), and `line` opens with a
    lowercase word (`config-` + `uration` -> `configuration`, `de‐` + `crypt` -> `decrypt`);
    None otherwise. After a hyphenated prefix (`self-`) the hyphen stays (as ASCII `-`); a soft
    hyphen never does. Dashes inside a line (`x-y`, `--option`) are never touched."""
    match = _BROKEN_WORD.search(previous)
    first = line.split(maxsplit=1)[0] if line else ""
    if match is None or not _CONTINUATION.fullmatch(first):
        return None
    kept = "-" if match.group(2) != "\u00ad" and match.group(1) in _HYPHEN_PREFIXES else ""
    return previous[:-1] + kept + line


def text_drafts(text: str, *, demote_titles: bool = False) -> list[Draft]:
    """Plain text: running page headers, footers and page numbers are dropped
    (`page_furniture`); a table drawn with box-drawing characters (`man`'s rendering of `tbl`) is
    a `Table` with its rows (`text_tables.split_box_tables`); paragraphs are blank-line
    separated (a form feed is a break too); a line opening with a bullet or a numbered clause
    starts its own paragraph; other line breaks inside a paragraph are joined, and a word
    hyphenated across a line break is joined into one (`_hyphen_joined`)."""
    text = text_without_furniture(text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n\n"))
    return parts_drafts(split_box_tables(text), demote_titles=demote_titles)


def read_troff(content: bytes) -> list[Draft]:
    """A man page's troff source, rendered as `man` shows it (`parse_roff`), then read like a
    rendered man page: paragraphs, headings and tables."""
    from manifold.ingest.parse_roff import render

    return parts_drafts(render(decode_text(content)))


def parts_drafts(parts: Iterable[str | list[list[str]]], *, demote_titles: bool = False) -> list[Draft]:
    """Text (blank-line separated paragraphs) and tables (rows of cells) in reading order as
    drafts; a table wider than `MAX_TABLE_COLUMNS` is kept as the text it was."""
    drafts: list[Draft] = []
    for part in parts:
        if isinstance(part, str):
            drafts += _paragraph_drafts(part, demote_titles)
        elif len(part[0]) <= MAX_TABLE_COLUMNS:
            drafts.append(Draft("Table", "", rows=part))
        else:  # too wide for a table: kept as the text it was
            drafts += _paragraph_drafts("\n".join(" | ".join(row) for row in part), demote_titles)
    return drafts


def _paragraph_drafts(text: str, demote_titles: bool) -> list[Draft]:
    unstructured_env()
    from unstructured.partition.text import partition_text

    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        previous = ""
        for line in (raw.strip() for raw in block.split("\n")):
            if not line:
                continue
            joined = _hyphen_joined(paragraphs[-1], line) if previous else None
            if joined is not None:
                paragraphs[-1] = joined
            elif len(previous) >= _WRAPPED_LINE and not PARAGRAPH_START.match(line):
                paragraphs[-1] += " " + line  # a hard-wrapped line continues its paragraph
            else:
                paragraphs.append(line)
            previous = line
    drafts: list[Draft] = []
    pending: list[str] = []  # consecutive paragraphs unstructured classifies, in one call

    def classify_pending() -> None:
        if pending:
            with library_errors("text"):
                elements = partition_text(text="\n".join(pending), paragraph_grouper=False, languages=[""])
            drafts.extend(from_unstructured(elements, demote_titles=demote_titles))
            pending.clear()

    for paragraph in paragraphs:
        if _is_prose(paragraph):
            classify_pending()
            drafts.append(Draft("NarrativeText", paragraph))
        else:
            pending.append(paragraph)
    classify_pending()
    return drafts


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def _is_prose(paragraph: str) -> bool:
    """True for a paragraph that unstructured would call narrative text whatever its sentence
    splitter says: no bullet, numbering, e-mail or address shape; at least two sentences of three
    or more words; mostly letters; at most half its words capitalised.

    unstructured decides narrative text with a spaCy pipeline run per paragraph (sentence count,
    part-of-speech tags), which was 90 % of parse time on abstracts. Its capitalisation and verb
    checks apply only to text of one sentence, so a paragraph of several ordinary sentences is
    narrative under its rules; such paragraphs are classified here and everything else (headings,
    short lines, list items, shouting text) still goes through unstructured."""
    from unstructured.partition.text_type import (
        is_bulleted_text,
        is_email_address,
        is_possible_numbered_list,
        is_us_city_state_zip,
        under_non_alpha_ratio,
    )

    if PARAGRAPH_START.match(paragraph) or is_bulleted_text(paragraph) or is_possible_numbered_list(paragraph):
        return False
    if is_email_address(paragraph) or is_us_city_state_zip(paragraph) or under_non_alpha_ratio(paragraph):
        return False
    sentences = [s for s in _SENTENCE_END.split(paragraph) if len(s.split()) >= 3]
    if len(sentences) < 2:
        return False
    words = [w for w in paragraph.split() if w.isalpha()]
    capitalised = sum(w.istitle() or w.isupper() for w in words)
    return bool(words) and capitalised <= len(words) / 2


def read_markdown(content: bytes) -> list[Draft]:
    unstructured_env()
    from unstructured.partition.md import partition_md

    text = decode_text(content)
    with library_errors("Markdown"):
        return from_unstructured(partition_md(text=text, languages=[""]), list_base=1)


def read_html(content: bytes) -> list[Draft]:
    declared = _META_CHARSET.search(content[:4096])
    return html_drafts(decode_text(content, declared.group(1).decode() if declared else None))


def html_drafts(text: str) -> list[Draft]:
    """HTML via unstructured, after navigation and page furniture are removed
    (`html_boilerplate.strip_boilerplate`: nav, header/footer, sidebars, link bars, scripts).

    A page that is essentially preformatted text (`preformatted_body`: a man page or an RFC
    rendered into one `<pre>`) is read as plain text (`text_drafts`), so its paragraphs,
    headings and words hyphenated across lines come out as they do from the `.txt` rendering.
    A line break inside a table cell is a space, as a browser shows it (unstructured's table
    markup drops it and glues the words: "transmit\nunencrypted" became "transmitunencrypted")."""
    unstructured_env()
    from unstructured.partition.html import partition_html

    if not text.strip():
        return []
    text = strip_boilerplate(text)
    preformatted = preformatted_body(text)
    if preformatted is not None:
        return text_drafts(preformatted)
    text = _TABLE.sub(lambda m: _CELL_BREAK.sub(" ", m.group(0)), text)
    with library_errors("HTML"):
        return from_unstructured(partition_html(text=text, languages=[""]), list_base=1)


_TABLE = re.compile(r"<table\b.*?</table\s*>", re.IGNORECASE | re.DOTALL)
_CELL_BREAK = re.compile(r"[ \t]*\r?\n\s*")
PREFORMATTED_SHARE = 0.8
"""A page whose `<pre>` text is at least this share of its body text is preformatted text."""


def preformatted_body(html: str) -> str | None:
    """The body text of a page that is essentially preformatted (`<pre>` holds at least
    `PREFORMATTED_SHARE` of its non-blank characters, and at least 200), line breaks kept; None
    for any other page (or one lxml cannot read, which unstructured then reports)."""
    import lxml.etree
    import lxml.html

    try:
        root = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return None
    found = root.find("body") if root.tag == "html" else root
    body: Any = root if found is None else found

    def chars(el: Any) -> int:
        return len("".join(el.text_content().split()))

    total = chars(body)
    pre = sum(chars(p) for p in body.iter("pre"))
    if total < 200 or pre < PREFORMATTED_SHARE * total:
        return None
    return str(body.text_content())


# ----------------------------------------------------------------------------- CSV and JSON


def read_csv(content: bytes) -> list[Draft]:
    """One `Table`: every row as read (header first), ragged rows padded; cells kept verbatim.
    A row wider than `MAX_TABLE_COLUMNS` rejects the file as it is read (before padding)."""
    text = decode_text(content)
    if not text.strip():
        return []
    try:  # only the delimiter is sniffed; quoting stays RFC 4180 (a guessed quote char misreads prose)
        delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
    except csv.Error:
        delimiter = ","
    with library_errors("CSV"):
        rows = _delimited_rows(text, delimiter, "CSV", quoting=csv.QUOTE_MINIMAL)
    return [Draft("Table", "", rows=rows)] if rows else []


def read_tsv(content: bytes) -> list[Draft]:
    """Tab-separated values (`.tsv`, `.tab`): one `Table` exactly as `read_csv` makes it, the
    delimiter always a tab. Quoted fields (as spreadsheet exports write them) are honoured; a
    file whose quotes do not parse as CSV quoting is read unquoted (IANA TSV has no quoting)."""
    text = decode_text(content)
    if not text.strip():
        return []
    with library_errors("TSV"):
        try:
            rows = _delimited_rows(text, "\t", "TSV", quoting=csv.QUOTE_MINIMAL)
        except csv.Error:
            rows = _delimited_rows(text, "\t", "TSV", quoting=csv.QUOTE_NONE)
    return [Draft("Table", "", rows=rows)] if rows else []


def _delimited_rows(text: str, delimiter: str, what: str, *, quoting: Literal[0, 3]) -> list[list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True, quoting=quoting)
    rows = []
    for row in reader:
        check_width(len(row), f"{what} row {reader.line_num}")
        if any(c.strip() for c in row):
            rows.append(row)
    return padded([[" ".join(c.split()) for c in r] for r in rows])


def read_json(content: bytes) -> list[Draft]:
    """A list of objects (or {"records"|"items"|"rows": [...]}) -> one `Table`; any other JSON
    -> one `Text` per leaf, `key.path[0]: value`, with lists of objects inside it as tables."""
    text = decode_text(content)
    if not text.strip():
        return []
    try:
        value = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as err:
        raise BadInput(f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise BadInput("invalid JSON: nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal beyond Python's digit limit
        raise BadInput(f"invalid JSON: {err}") from None
    if _holds_nul(value):  # no store keeps a NUL in text: refuse it here, with the reason
        raise BadInput("invalid JSON: a string holds a NUL character (\\u0000)")
    if value == {} or value == []:
        return []
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _RECORD_KEYS:
        inner = next(iter(value.values()))
        value = inner if _is_records(inner) else value
    try:
        return list(_json_drafts(value, ""))
    except RecursionError:
        raise BadInput("JSON is nested too deeply to flatten") from None


def _holds_nul(value: object) -> bool:
    """True when any key or string inside `value` contains U+0000 (iterative: any depth)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def _is_records(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _json_drafts(value: object, path: str) -> Iterator[Draft]:
    if _is_records(value):
        assert isinstance(value, list)
        header = list(dict.fromkeys(k for record in value for k in record))
        check_width(len(header), f"JSON records at {path or '<root>'}")
        rows = [[_scalar(r[k]) if k in r else "" for k in header] for r in value]
        yield Draft("Table", "", rows=[header, *rows])
    elif isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _json_drafts(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _json_drafts(item, f"{path}[{i}]")
    else:
        yield Draft("Text", f"{path}: {_scalar(value)}" if path else _scalar(value))


def _scalar(value: object) -> str:
    """A cell: strings as they are, numbers as written, containers as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_encoded(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_encoded(v) for v in value) + "]"
    return json.dumps(value)


def _encoded(value: object) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else _scalar(value)


# ----------------------------------------------------------------------------- email


def read_email(content: bytes) -> list[Draft]:
    """Headers (From, To, Cc, Subject, Date) as `EmailHeader`s, then the body (plain text
    preferred over HTML), then one `Other` per attachment name. Body titles become `Text`
    (a signature line is not a heading)."""
    with library_errors("email"):
        message = BytesParser(policy=policy.default).parsebytes(content)
        if not message.keys():
            raise BadInput("not an RFC 822 message: no header block")
        drafts = [Draft("EmailHeader", f"{name}: {message[name]}") for name in _EMAIL_HEADERS if message[name]]
        body = message.get_body(preferencelist=("plain", "html"))
        body_text = body.get_content() if body is not None else ""
        is_html = body is not None and body.get_content_subtype() == "html"
        attachments = [part.get_filename() for part in message.iter_attachments()] if message.is_multipart() else []
    drafts += html_drafts(body_text) if is_html else text_drafts(body_text, demote_titles=True)
    drafts += [Draft("Other", f"Attachment: {name}") for name in attachments if name]
    return drafts
