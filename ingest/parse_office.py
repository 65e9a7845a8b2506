"""Office Open XML readers: DOCX, XLSX and PPTX bytes -> layout `Draft`s (pure functions).

Guarantees (beyond those of `parse_formats`, whose helpers these readers use):
- Same bytes, same drafts; every library failure leaves as `BadInput` naming the format.
- Zip bombs are bounded before any library sees the file: the archive must open as a zip and
  hold its format's main part, its members may declare at most `MAX_DOCX_UNPACKED_BYTES` in
  total, and every member is inflated in 1 MiB reads with that limit enforced on what it really
  holds (`inflate_bounded`), so a member lying about its size fails cheaply.
- DOCX: unstructured's `partition_docx`.
- XLSX: openpyxl (read-only, streamed; the library unstructured's `xlsx` extra reads with), one
  `Table` per worksheet with its header row kept, so structured records come from it as from a
  CSV; with several worksheets each table is preceded by a `Title` naming its sheet. Cells are
  the stored values as text, exact to Excel's 15 significant digits (`_cell_text`): unstructured's
  `partition_xlsx` renders numbers through pandas at 6 decimals (`0.1234567` -> `0.123457`,
  `1e-9` -> `0.0`), which would change amounts, so it is not used for spreadsheets.
- PPTX: unstructured's `partition_pptx`: each slide's title is a level-1 heading, other title-like
  text a lower level, bullets list items, tables tables; `page` is the slide number. A slide's
  speaker notes follow its content as one `Text`.
"""

from __future__ import annotations

import io
import zipfile
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from manifold.ingest.parse_formats import (
    Draft,
    check_width,
    from_unstructured,
    library_errors,
    padded,
    unstructured_env,
)
from manifold.shared.errors import BadInput

MAX_DOCX_UNPACKED_BYTES = 256 * 1024 * 1024
"""What an Office file (DOCX, XLSX, PPTX) may unpack to; larger is `BadInput`."""

def checked_zip(content: bytes, what: str, main_part: str) -> None:
    """Raise `BadInput` unless `content` is a complete zip holding `main_part` whose members
    unpack to at most `MAX_DOCX_UNPACKED_BYTES` (declared and actually inflated)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except zipfile.BadZipFile as err:
        raise BadInput(f"not a {what} file: the zip archive is truncated or corrupt ({err})") from None
    with archive:
        names = set(archive.namelist())
        unpacked = sum(info.file_size for info in archive.infolist())
    if main_part not in names:
        raise BadInput(f"not a {what} file: the archive has no {main_part}")
    if unpacked > MAX_DOCX_UNPACKED_BYTES:
        raise BadInput(f"{what} unpacks to {unpacked} bytes; the limit is {MAX_DOCX_UNPACKED_BYTES}")
    inflate_bounded(content, what)


def inflate_bounded(content: bytes, what: str = "DOCX") -> None:
    """Inflate every member in 1 MiB reads (bounded memory) and check what it really holds.

    The header sizes checked above can lie (a zip bomb declaring 1,000 bytes that inflates to
    gigabytes): `zipfile` stops a member at its declared size and then fails its CRC, but a
    library reading a member whole inflates all of it in one call before truncating. Reading in
    bounded chunks first makes a lying archive fail (CRC) or exceed the limit cheaply."""
    total = 0
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                while chunk := member.read(1 << 20):
                    total += len(chunk)
                    if total > MAX_DOCX_UNPACKED_BYTES:
                        raise BadInput(f"{what} unpacks to more than {MAX_DOCX_UNPACKED_BYTES} bytes")


def read_docx(content: bytes) -> list[Draft]:
    """DOCX via unstructured, after checking it is a complete zip with a main document part."""
    unstructured_env()
    from unstructured.partition.docx import partition_docx

    with library_errors("DOCX"):
        checked_zip(content, "DOCX", "word/document.xml")
        elements = partition_docx(file=io.BytesIO(content), include_page_breaks=False, languages=[""])
    return from_unstructured(elements)


def read_xlsx(content: bytes) -> list[Draft]:
    """One `Table` per worksheet, header row first as in the sheet; leading rows of at most one
    filled cell (a report title above the header) become `Text` before it; with several sheets a
    `Title` names each sheet (several sheets with content). Empty sheets give nothing."""
    with library_errors("XLSX"):
        checked_zip(content, "XLSX", "xl/workbook.xml")
        sheets = _sheets(content)
    drafts: list[Draft] = []
    several = sum(bool(rows) for _, rows in sheets) > 1
    for number, (name, rows) in enumerate(sheets, start=1):
        if not rows:
            continue
        if several:
            drafts.append(Draft("Title", name, 1, number))
        while len(rows) > 1 and sum(bool(c) for c in rows[0]) <= 1:
            drafts.append(Draft("Text", next(c for c in rows[0] if c), page=number))
            rows = rows[1:]
        drafts.append(Draft("Table", "", page=number, rows=padded(rows)))
    return drafts


def _sheets(content: bytes) -> list[tuple[str, list[list[str]]]]:
    """Every worksheet's non-blank rows as text cells (trailing blank cells dropped), streamed
    with openpyxl in read-only mode with formulas as their cached values."""
    import openpyxl  # type: ignore[import-untyped]  # no stubs: used through this one function

    workbook = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    try:
        sheets: list[tuple[str, list[list[str]]]] = []
        for sheet in workbook.worksheets:
            rows: list[list[str]] = []
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()  # the stored <dimension> may claim 2^20 rows: read only real cells
            for values in sheet.iter_rows(values_only=True):
                cells = [_cell_text(v) for v in values]
                while cells and not cells[-1]:
                    cells.pop()
                if cells:
                    check_width(len(cells), f"XLSX sheet {sheet.title!r}")
                    rows.append(cells)
            sheets.append((str(sheet.title), rows))
        return sheets
    finally:
        workbook.close()


def _cell_text(value: object) -> str:
    """A cell as the sheet shows it without its number format: numbers to Excel's 15 significant
    digits in plain notation (`0.1 + 0.2` -> `0.3`, never an exponent), whole numbers without
    `.0`, a date-time at midnight as `YYYY-MM-DD`, booleans `TRUE`/`FALSE`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        text = format(Decimal(f"{value:.15g}"), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time() else value.isoformat(sep=" ")
    if isinstance(value, (date, time)):
        return value.isoformat()
    return " ".join(str(value).split())


def read_pptx(content: bytes) -> list[Draft]:
    """Slides in order: titles as level-1 headings, text, list items and tables; speaker notes
    after each slide's content."""
    unstructured_env()
    from unstructured.partition.pptx import partition_pptx

    with library_errors("PPTX"):
        checked_zip(content, "PPTX", "ppt/presentation.xml")
        elements = partition_pptx(file=io.BytesIO(content), include_page_breaks=False, include_slide_notes=False,
                                  infer_table_structure=True, languages=[""])
        notes = _slide_notes(content)
    drafts = from_unstructured(elements, list_base=0)
    by_slide: dict[int, list[Draft]] = {}
    for draft in drafts:
        by_slide.setdefault(draft.page or 0, []).append(draft)
    out: list[Draft] = []
    for slide in sorted(set(by_slide) | set(notes)):
        out.extend(by_slide.get(slide, []))
        if slide in notes:
            out.append(Draft("Text", notes[slide], page=slide))
    return out


def _slide_notes(content: bytes) -> dict[int, str]:
    """Speaker notes by slide number (1-based), for slides that have any."""
    from pptx import Presentation

    notes: dict[int, str] = {}
    presentation: Any = Presentation(io.BytesIO(content))
    for number, slide in enumerate(presentation.slides, start=1):
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            text = slide.notes_slide.notes_text_frame.text.strip()
            if text:
                notes[number] = text
    return notes


__all__ = ["MAX_DOCX_UNPACKED_BYTES", "checked_zip", "inflate_bounded", "read_docx", "read_pptx", "read_xlsx"]
