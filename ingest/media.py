"""Which media type a file is: from its name, else from its first bytes (pure functions).

Guarantees: `guess_media_type` only ever answers with a member of `SUPPORTED_MEDIA_TYPES` or
None; it never reads the file itself (the caller passes the name and the first bytes, a few KB
are enough) and the same inputs always give the same answer. The extension wins over the
content; sniffing is only a fallback for names without a known extension.
"""

from __future__ import annotations

import re
from pathlib import PurePath

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

SUPPORTED_MEDIA_TYPES: frozenset[str] = frozenset(
    {TEXT, MARKDOWN, HTML, CSV, TSV, JSON, EMAIL, DOCX, XLSX, PPTX, PDF}
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
}

_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>]", re.IGNORECASE | re.DOTALL)
_HEADER_LINE = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*):[ \t]", re.MULTILINE)
_MAIL_HEADERS = {b"from", b"to", b"cc", b"subject", b"date", b"message-id", b"received", b"mime-version",
                 b"return-path"}
_UTF8_BOM = b"\xef\xbb\xbf"


def guess_media_type(path: PurePath, head: bytes) -> str | None:
    """The media type of a file named `path` whose content starts with `head`, or None if unknown.

    Known extensions (case-insensitive) decide. Otherwise the head is sniffed: `%PDF-` is a PDF,
    a zip whose head names `word/` parts is a DOCX (`xl/` an XLSX, `ppt/` a PPTX: the first
    such part name in the zip's local headers decides), a leading `<html>`/`<!doctype html>` is HTML,
    and at least two RFC 822 headers (From, To, Subject, Date, ...) in the opening header block
    make an email.
    """
    by_name = _BY_EXTENSION.get(path.suffix.lower())
    if by_name is not None:
        return by_name
    return _sniff(head)


def _sniff(head: bytes) -> str | None:
    if head.startswith(b"%PDF-"):
        return PDF
    if head.startswith(b"PK\x03\x04"):
        return _office_type(head)
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


def _looks_like_email(head: bytes) -> bool:
    """At least two well-known mail headers at the start, before the first blank line."""
    block = re.split(rb"\r?\n\r?\n", head.lstrip(b"\r\n"), maxsplit=1)[0]
    lines = block.splitlines()
    if not lines or _HEADER_LINE.match(lines[0]) is None:
        return False
    names = {m.group(1).lower() for m in _HEADER_LINE.finditer(block)}
    return len(names & _MAIL_HEADERS) >= 2
