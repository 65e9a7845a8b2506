"""PDF reader: the text layer of a PDF -> layout `Draft`s with pdfminer.six (pure function).

Guarantees: same bytes, same drafts; any pdfminer failure is `BadInput`; a PDF with images but no
text is `BadInput` (no OCR); one with neither is an empty document. `unstructured[pdf]` is not
used: it needs the layout-inference stack, which text-layer PDFs do not.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from manifold.ingest import page_furniture
from manifold.ingest.parse_formats import PARAGRAPH_START, Draft, from_unstructured, library_errors, unstructured_env
from manifold.shared.errors import BadInput


@dataclass
class _Line:
    page: int
    text: str
    size: float
    top: float
    bottom: float
    end_page: int = 0
    """The page of the paragraph's last line, when it was carried over from `page` (0: `page`)."""


def read_pdf(content: bytes) -> list[Draft]:
    """The text layer of a PDF with pdfminer.six: lines grouped into paragraphs (by font size,
    spacing and bullets), larger-than-body paragraphs become titles ranked by size, the rest are
    classified by unstructured's text heuristics. A PDF with images but no text is `BadInput`
    (OCR is not supported); one with no text and no images is an empty document."""
    lines, has_images = _pdf_lines(content)
    if not lines:
        if has_images:
            raise BadInput("PDF has no text layer (scanned or image-only); OCR is not supported")
        return []
    paragraphs = _pdf_paragraphs(_without_furniture(lines))
    if not paragraphs:
        return []
    weights: Counter[float] = Counter()
    for para in paragraphs:
        weights[para.size] += len(para.text)
    body = weights.most_common(1)[0][0]
    heading_sizes = sorted({p.size for p in paragraphs if _is_heading(p, body)}, reverse=True)
    unstructured_env()
    from unstructured.partition.text import element_from_text

    drafts: list[Draft] = []
    for para in paragraphs:
        if para.size in heading_sizes and _is_heading(para, body):
            drafts.append(Draft("Title", para.text, min(heading_sizes.index(para.size) + 1, 6), para.page))
        else:
            with library_errors("PDF text"):
                element = element_from_text(para.text)
            drafts += from_unstructured([element], demote_titles=bool(heading_sizes), page=para.page)
    return drafts


def _is_heading(para: _Line, body: float) -> bool:
    return para.size >= body * 1.15 and len(para.text) <= 200


def _pdf_lines(content: bytes) -> tuple[list[_Line], bool]:
    """Text lines in reading order (text inside form XObjects included) and whether any page
    holds an image."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTFigure, LTImage, LTTextContainer, LTTextLine

    lines: list[_Line] = []
    has_images = False

    def walk(items: Iterable[Any], page_no: int) -> None:
        nonlocal has_images
        for item in items:
            if isinstance(item, LTImage):
                has_images = True
            elif isinstance(item, LTFigure):
                walk(item, page_no)
            elif isinstance(item, LTTextContainer):
                for line in item:
                    text = line.get_text().strip() if isinstance(line, LTTextLine) else ""
                    sizes = sorted(c.size for c in line if isinstance(c, LTChar)) if text else []
                    if sizes:
                        size = round(sizes[len(sizes) // 2] * 2) / 2  # median, to half a point
                        lines.append(_Line(page_no, text, size, line.y1, line.y0))

    with library_errors("PDF"):
        for page_no, page in enumerate(extract_pages(io.BytesIO(content), laparams=LAParams(all_texts=True)), start=1):
            walk(page, page_no)
    return lines, has_images


def _without_furniture(lines: list[_Line]) -> list[_Line]:
    """`lines` without the running headers, footers and page numbers (`page_furniture`): lines
    among the top-most or bottom-most `EDGE_LINES` of their page whose shape repeats there on
    enough pages."""
    pages: dict[int, list[_Line]] = {}
    for line in lines:
        pages.setdefault(line.page, []).append(line)
    ordered = [sorted(page, key=lambda ln: -ln.top) for page in pages.values()]
    furniture = page_furniture.pdf_furniture([[ln.text for ln in page] for page in ordered])
    if not furniture:
        return lines
    n = page_furniture.EDGE_LINES
    edge = {id(ln) for page in ordered for ln in (page[:n] + page[-n:] if len(page) > n else page)}
    return [ln for ln in lines if not (id(ln) in edge and page_furniture.key(ln.text) in furniture)]


_SENTENCE_OPEN = (".", ":", "!", "?")


def _continues(prev: _Line, line: _Line) -> bool:
    """A paragraph carried over to the next page: the page's first line opens in lower case, in
    the same font size, after a paragraph that did not end a sentence."""
    return (line.page == (prev.end_page or prev.page) + 1 and abs(prev.size - line.size) <= 0.1 * prev.size
            and line.text[:1].islower() and not prev.text.rstrip().endswith(_SENTENCE_OPEN))


def _pdf_paragraphs(lines: list[_Line]) -> list[_Line]:
    paragraphs: list[_Line] = []
    for line in lines:
        prev = paragraphs[-1] if paragraphs else None
        joins = prev is not None and not PARAGRAPH_START.match(line.text) and (
            ((prev.end_page or prev.page) == line.page
             and abs(prev.size - line.size) <= 0.1 * prev.size
             and -0.3 * line.size <= prev.bottom - line.top <= 0.7 * line.size)
            or _continues(prev, line))
        if prev is not None and joins:
            if (prev.end_page or prev.page) != line.page:
                prev.end_page = line.page  # carried over: later lines of this page may join it
            hyphenated = (prev.text[-1:] in ("-", "\u2010", "\u00ad")  # ASCII, typesetter's or soft hyphen
                          and prev.text[-2:-1].isalpha() and line.text[:1].islower())
            prev.text = prev.text[:-1] + line.text if hyphenated else f"{prev.text} {line.text}"
            prev.bottom = line.bottom
        else:
            paragraphs.append(_Line(line.page, line.text, line.size, line.top, line.bottom))
    return paragraphs


__all__ = ["read_pdf"]
