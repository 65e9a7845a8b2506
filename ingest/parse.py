"""Parse stage: one document version's bytes -> layout elements in reading order (pure handler).

Guarantees:
- Pure and deterministic: the same (doc, bytes, versions) always gives the same `ParsedDocument`;
  no I/O beyond reading installed packages, no network, no clock.
- Every supported media type (`manifold.ingest.media.SUPPORTED_MEDIA_TYPES`) is read by its
  reader (`READERS`: `parse_formats`, Office Open XML in `parse_office`, PDF in `parse_pdf`, man
  page sources in `parse_roff`); a gzip document is inflated (at most `MAX_GUNZIPPED_BYTES`)
  and read as what it holds, by its name without `.gz` and its first bytes;
  `application/octet-stream` is sniffed from the document name
  (metadata `filename`, else the document id) and the first bytes.
- Failures are typed: an unknown media type raises `UnsupportedMediaType`; corrupt, truncated,
  binary-as-text or undecodable content raises `BadInput` with the reason. Empty content (no
  bytes, or only whitespace) is an empty document: zero elements, not an error.
- Element text is whitespace-normalised (runs collapse to one space, zero-width characters and
  soft hyphens go, ligatures are expanded); table cells likewise, and a table's text is its rows
  rendered as ` | `-joined lines, header first. Empty elements are dropped; indexes are 0..n-1.
- Bounded: at most `MAX_ELEMENTS` elements, and tables at most `parse_formats.MAX_TABLE_COLUMNS`
  wide; anything larger is `BadInput` naming the limit.
- The `versions` passed in are recorded as given; `PARSER_VERSION` is what this code produces.
- Bounded memory in a long-running worker: the spaCy model unstructured classifies short
  paragraphs with is released once its vocabulary (which keeps every word it has seen) passes
  `nlp_memory.VOCABULARY_LIMIT`; the elements are the same either side of a release.
"""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Callable
from pathlib import Path

from manifold.ingest import media, nlp_memory, parse_formats, parse_odf, parse_office, parse_pdf
from manifold.ingest.media import SUPPORTED_MEDIA_TYPES, guess_media_type
from manifold.ingest.parse_formats import Draft
from manifold.shared.artifacts import DocRef, Element, ParsedDocument, PipelineVersions
from manifold.shared.errors import BadInput, UnsupportedMediaType

PARSER_VERSION = "unstructured-0.27.35+p6"
MAX_GUNZIPPED_BYTES = 256 * 1024 * 1024
"""The most a gzip document may inflate to (as for Office files, `parse_office`)."""
MAX_ELEMENTS = 200_000
"""A document that parses into more layout elements than this is rejected (`BadInput`): every
later stage holds its elements (and their chunks, vectors and postings) in memory at once."""

_ALIASES = {
    "text/x-markdown": "text/markdown",
    "application/xhtml+xml": "text/html",
    "application/csv": "text/csv",
    "text/x-csv": "text/csv",
    "text/json": "application/json",
    "text/tsv": "text/tab-separated-values",
    "text/x-tab-separated-values": "text/tab-separated-values",
}
_OPAQUE = {"application/octet-stream", "binary/octet-stream"}
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None) | {
    ord("\ufb00"): "ff", ord("\ufb01"): "fi", ord("\ufb02"): "fl", ord("\ufb03"): "ffi", ord("\ufb04"): "ffl",
}

READERS: dict[str, Callable[[bytes], list[Draft]]] = {
    media.TEXT: parse_formats.read_text,
    media.MARKDOWN: parse_formats.read_markdown,
    media.HTML: parse_formats.read_html,
    media.CSV: parse_formats.read_csv,
    media.TSV: parse_formats.read_tsv,
    media.JSON: parse_formats.read_json,
    media.EMAIL: parse_formats.read_email,
    media.DOCX: parse_office.read_docx,
    media.XLSX: parse_office.read_xlsx,
    media.PPTX: parse_office.read_pptx,
    media.PDF: parse_pdf.read_pdf,
    media.ODT: parse_odf.read_odt,
    media.ODS: parse_odf.read_ods,
    media.ODP: parse_odf.read_odp,
    media.TROFF: parse_formats.read_troff,
}
"""The reader of each supported media type (the keys are exactly `SUPPORTED_MEDIA_TYPES` but
gzip, whose content is inflated and read by the reader of what it holds)."""


def handle(doc: DocRef, content: bytes, versions: PipelineVersions) -> ParsedDocument:
    """Parse `content` (the bytes of `doc`) into elements; see the module docstring for guarantees."""
    media_type = resolve_media_type(doc, content)
    if media_type == media.GZIP:
        content = gunzip(content)
        media_type = _inner_media_type(doc, content)
    drafts = [] if not content.strip() else READERS[media_type](content)
    nlp_memory.after_document()  # bounded memory in a long-running worker; same elements
    return ParsedDocument(doc=doc, versions=versions, elements=_elements(drafts))


def resolve_media_type(doc: DocRef, content: bytes) -> str:
    """The supported media type `doc` is read as; raises `UnsupportedMediaType` otherwise."""
    declared: str = doc.media_type.split(";", 1)[0].strip().lower()
    media_type: str = _ALIASES.get(declared, declared)
    if media_type in _OPAQUE:
        name = doc.metadata.get("filename")
        sniffed = guess_media_type(Path(name if isinstance(name, str) else doc.document_id), content[:8192])
        if sniffed is None:
            raise UnsupportedMediaType(
                f"media type {doc.media_type!r}: neither the name nor the content identify a supported format"
            )
        return sniffed
    if media_type not in SUPPORTED_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"no parser for media type {doc.media_type!r}; supported: {', '.join(sorted(SUPPORTED_MEDIA_TYPES))}"
        )
    return media_type


def gunzip(content: bytes) -> bytes:
    """The inflated bytes of a gzip document; `BadInput` when corrupt, truncated or larger than
    `MAX_GUNZIPPED_BYTES` (checked while inflating, so a small bomb never fills memory)."""
    inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
    try:
        out = inflater.decompress(content, MAX_GUNZIPPED_BYTES + 1)
    except zlib.error as err:
        raise BadInput(f"corrupt gzip data: {err}") from None
    if len(out) > MAX_GUNZIPPED_BYTES or inflater.unconsumed_tail:
        raise BadInput(f"gzip document inflates to more than {MAX_GUNZIPPED_BYTES} bytes; the limit is "
                       f"{MAX_GUNZIPPED_BYTES}")
    if not inflater.eof:
        raise BadInput("truncated gzip data")
    return out


def _inner_media_type(doc: DocRef, content: bytes) -> str:
    """What a gzip document holds: by its name without `.gz` (metadata `filename`, else the
    document id) and the inflated first bytes; a gzip inside a gzip is refused."""
    name = doc.metadata.get("filename")
    path = Path(name if isinstance(name, str) else doc.document_id)
    inner = path.with_suffix("") if path.suffix.lower() in (".gz", ".z", ".gzip") else path
    media_type = guess_media_type(inner, content[:8192]) if content.strip() else media.TEXT
    if media_type is None or media_type == media.GZIP:
        raise UnsupportedMediaType(f"gzip document {doc.document_id!r}: what it holds is not a supported format")
    return media_type


def _elements(drafts: list[Draft]) -> list[Element]:
    elements: list[Element] = []
    for draft in drafts:
        rows = None
        if draft.rows is not None:
            rows = [[_clean(cell) for cell in row] for row in draft.rows]
            rows = [row for row in rows if any(row)] or None
            text = "\n".join(" | ".join(row) for row in rows or [])
        else:
            text = _clean(draft.text)
        if not text:
            continue
        if len(elements) >= MAX_ELEMENTS:
            raise BadInput(f"document has more than {MAX_ELEMENTS} layout elements; the limit is {MAX_ELEMENTS}")
        elements.append(
            Element(index=len(elements), kind=draft.kind, text=text, depth=draft.depth, page=draft.page, rows=rows)
        )
    return elements


def _clean(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).translate(_INVISIBLE).split())
