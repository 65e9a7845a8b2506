"""Which media type a file is: from its name, else from its first bytes (pure functions).

Guarantees: `guess_media_type` only ever answers with a member of `SUPPORTED_MEDIA_TYPES` or
None (binary content of an unknown kind, or an empty file without a known suffix); it never
reads the file itself (the caller passes the name and the first bytes, a few KB
are enough) and the same inputs always give the same answer. The extension wins over the
content (gzip's magic bytes aside: compressed bytes are never text); sniffing is only a fallback
for names without a known extension.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from manifold.ingest.parse_roff import looks_like_roff

TEXT = "text/plain"
MARKDOWN = "text/markdown"
HTML = "text/html"
CSV = "text/csv"
TSV = "text/tab-separated-values"
JSON = "application/json"
EMAIL = "message/rfc822"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
PDF = "application/pdf"
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"
TROFF = "text/troff"
"""A man page's source: troff with the man(7) or mdoc(7) macros (`ls.1`, `ssh_config.5`)."""
GZIP = "application/gzip"
"""A gzip-compressed document (`ls.1.gz`, `README.md.gz`): the parse stage inflates it and reads
what is inside by the name without `.gz` and its first bytes (`parse.resolve_media_type`)."""

SUPPORTED_MEDIA_TYPES: frozenset[str] = frozenset(
    {TEXT, MARKDOWN, HTML, CSV, TSV, JSON, EMAIL, DOCX, XLSX, PPTX, PDF, ODT, ODS, ODP, TROFF, GZIP}
)

_BY_EXTENSION: dict[str, str] = {
    ".txt": TEXT,
    ".text": TEXT,
    ".log": TEXT,
    # lightweight markup and configuration files: read as the plain text they are
    ".rst": TEXT,
    ".rest": TEXT,
    ".adoc": TEXT,
    ".asciidoc": TEXT,
    ".org": TEXT,
    ".conf": TEXT,
    ".cfg": TEXT,
    ".ini": TEXT,
    ".yaml": TEXT,
    ".yml": TEXT,
    ".toml": TEXT,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".html": HTML,
    ".htm": HTML,
    ".csv": CSV,
    ".tsv": TSV,
    ".tab": TSV,
    ".json": JSON,
    ".eml": EMAIL,
    ".docx": DOCX,
    ".xlsx": XLSX,
    ".pptx": PPTX,
    ".pdf": PDF,
    ".odt": ODT,
    ".ods": ODS,
    ".odp": ODP,
    ".man": TROFF,
    ".mdoc": TROFF,
    ".roff": TROFF,
    ".troff": TROFF,
}
_GZIP_MAGIC = b"\x1f\x8b"
_NOT_DOCUMENTS = frozenset({".css", ".js", ".mjs", ".cjs", ".map", ".svg", ".xsl", ".xslt", ".dtd", ".xsd"})
"""Text files that style, script or describe documents rather than being one: never read as
plain text by the fallback below (a manual's folder is full of them)."""

_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>]", re.IGNORECASE | re.DOTALL)
_HEADER_LINE = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*):[ \t]", re.MULTILINE)
_MAIL_HEADERS = {b"from", b"to", b"cc", b"subject", b"date", b"message-id", b"received", b"mime-version",
                 b"return-path"}
_UTF8_BOM = b"\xef\xbb\xbf"


def guess_media_type(path: PurePath, head: bytes) -> str | None:
    """The media type of a file named `path` whose content starts with `head`, or None if unknown.

    gzip's magic bytes make a gzip-compressed document, whatever the name. Otherwise known
    extensions (case-insensitive) decide, and without one the head is sniffed: `%PDF-` is a PDF,
    a zip whose head names `word/` parts is a DOCX (`xl/` an XLSX, `ppt/` a PPTX: the first
    such part name in the zip's local headers decides), a zip whose first member is an
    OpenDocument `mimetype` is that ODT, ODS or ODP, a leading `<html>`/`<!doctype html>` is
    HTML, and at least two RFC 822 headers (From, To, Subject, Date, ...) in the opening header
    block make an email; a text whose first requests include `.TH` or `.Dd` is a man page source
    (troff: `ls.1`, `ssh_config.5`, `.man`). Last, a head that is text (`_is_text`: UTF-8, no NUL, almost no control
    characters, some letters) is plain text, so an export with a suffix of its own (`.ged`,
    `.srt`, `.ics`, `.bib`, `.properties`) is read rather than refused, unless its suffix names a
    stylesheet, script or schema (`_NOT_DOCUMENTS`).
    """
    suffix = path.suffix.lower()
    if head.startswith(_GZIP_MAGIC):
        return GZIP
    by_name = _BY_EXTENSION.get(suffix)
    if by_name is not None:
        return by_name
    sniffed = _sniff(head)
    if sniffed is None and _is_text(head) and looks_like_roff(head.decode("utf-8", "replace")):
        return TROFF
    if sniffed is None and suffix not in _NOT_DOCUMENTS and _is_text(head):
        return TEXT
    return sniffed


def _sniff(head: bytes) -> str | None:
    if head.startswith(b"%PDF-"):
        return PDF
    if head.startswith(b"PK\x03\x04"):
        return _opendocument_type(head) or _office_type(head)
    body = head[len(_UTF8_BOM) :] if head.startswith(_UTF8_BOM) else head
    if _HTML_START.match(body[:4096]):
        return HTML
    if _looks_like_email(body):
        return EMAIL
    return None


_OFFICE_PARTS: tuple[tuple[bytes, str], ...] = ((b"word/", DOCX), (b"xl/", XLSX), (b"ppt/", PPTX))


def _office_type(head: bytes) -> str | None:
    """The Office Open XML type of a zip from the member names in its local file headers (each
    `PK\\x03\\x04` header holds the name length at offset 26 and the name at offset 30); when no
    header names one, the earliest of `word/`, `xl/`, `ppt/` anywhere in the head."""
    start = 0
    while (at := head.find(b"PK\x03\x04", start)) >= 0 and at + 30 <= len(head):
        length = int.from_bytes(head[at + 26 : at + 28], "little")
        name = head[at + 30 : at + 30 + length]
        for prefix, media_type in _OFFICE_PARTS:
            if name.startswith(prefix):
                return media_type
        start = at + 4
    found = [(at, media_type) for prefix, media_type in _OFFICE_PARTS if (at := head.find(prefix)) >= 0]
    return min(found)[1] if found else None  # a name cut off by the head's end: the earliest mention


_OPENDOCUMENT = {b"application/vnd.oasis.opendocument.text": ODT,
                 b"application/vnd.oasis.opendocument.spreadsheet": ODS,
                 b"application/vnd.oasis.opendocument.presentation": ODP}


def _opendocument_type(head: bytes) -> str | None:
    """ODF stores its media type uncompressed as the archive's first member, `mimetype` (the
    local header gives the member's stored size at offset 18, its name's length at 26 and the
    extra field's at 28)."""
    size = int.from_bytes(head[18:22], "little")
    length = int.from_bytes(head[26:28], "little")
    extra = int.from_bytes(head[28:30], "little")
    if head[30:30 + length] != b"mimetype":
        return None
    start = 30 + length + extra
    return _OPENDOCUMENT.get(head[start:start + size].strip())


_CONTROL = frozenset(range(32)) - {9, 10, 12, 13}


def _is_text(head: bytes) -> bool:
    """Whether `head` reads as text: UTF-8 (a character cut at the end allowed), no NUL, at most
    1 % other control characters, and at least one letter."""
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:
            return False
        text = head[:err.start].decode("utf-8")
    controls = sum(1 for ch in text if ord(ch) in _CONTROL)
    return controls <= len(text) / 100 and any(ch.isalpha() for ch in text)


def _looks_like_email(head: bytes) -> bool:
    """At least two well-known mail headers at the start, before the first blank line."""
    block = re.split(rb"\r?\n\r?\n", head.lstrip(b"\r\n"), maxsplit=1)[0]
    lines = block.splitlines()
    if not lines or _HEADER_LINE.match(lines[0]) is None:
        return False
    names = {m.group(1).lower() for m in _HEADER_LINE.finditer(block)}
    return len(names & _MAIL_HEADERS) >= 2
