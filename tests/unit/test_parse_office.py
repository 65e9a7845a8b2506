"""TSV, XLSX and PPTX through the parse handler: tables per sheet, slide headings, zip bounds."""

from __future__ import annotations

import hashlib
import io
import zipfile
from datetime import date, datetime
from pathlib import Path

import pytest
from factories import pipeline_versions

from manifold.ingest import parse, parse_office
from manifold.ingest.media import PPTX, TSV, XLSX, guess_media_type
from manifold.ingest.tables.reader import records_from_table
from manifold.shared.artifacts import DocRef, ParsedDocument
from manifold.shared.errors import BadInput

AP_HEADER = ["Invoice No", "Vendor", "Invoice Date", "Amount", "Currency"]


def _parse(media_type: str, content: bytes, **metadata: str) -> ParsedDocument:
    doc = DocRef(tenant_id="acme", document_id="doc-1", version=1, content_sha256=hashlib.sha256(content).hexdigest(),
                 media_type=media_type, metadata=dict(metadata))
    return parse.handle(doc, content, pipeline_versions(parser=parse.PARSER_VERSION))


def _xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _pptx(slides: list[tuple[str, list[str], str | None]]) -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for title, paragraphs, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        frame = slide.placeholders[1].text_frame
        frame.text = paragraphs[0]
        for text in paragraphs[1:]:
            frame.add_paragraph().text = text
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- TSV


def test_tsv_is_a_table_like_csv_and_its_rows_become_invoices() -> None:
    content = ("\t".join(AP_HEADER) + "\n10023\tAcme GmbH\t2026-01-15\t1234.50\tEUR\n"
               "10024\tGlobex, Inc.\t2026-02-03\t99.00\tEUR\n").encode()
    parsed = _parse(TSV, content)
    assert [e.kind for e in parsed.elements] == ["Table"]
    rows = parsed.elements[0].rows
    assert rows == [AP_HEADER, ["10023", "Acme GmbH", "2026-01-15", "1234.50", "EUR"],
                    ["10024", "Globex, Inc.", "2026-02-03", "99.00", "EUR"]]  # the comma is no delimiter
    records = records_from_table(rows).records
    assert [(r.record_type, r.number, r.supplier, str(r.total)) for r in records] == [
        ("invoice", "10023", "Acme GmbH", "1234.50"), ("invoice", "10024", "Globex, Inc.", "99.00")]


def test_tsv_with_unbalanced_quotes_is_read_unquoted_and_aliases_resolve() -> None:
    content = b'Name\tNote\n"Big" deal\t5" screen\n'
    parsed = _parse("text/tsv", content)
    assert parsed.elements[0].rows == [["Name", "Note"], ['"Big" deal', '5" screen']]
    assert guess_media_type(Path("ap-export.tab"), b"") == TSV
    assert _parse("application/octet-stream", content, filename="x.tsv").elements[0].rows is not None


# ----------------------------------------------------------------------------- XLSX


def test_xlsx_sheet_is_one_table_with_its_header_and_exact_values() -> None:
    content = _xlsx({
        "Payables": [["Accounts payable, January"], [], AP_HEADER,
                     ["10023", "Acme GmbH", datetime(2026, 1, 15), 1234.5, "EUR"],
                     [10024, "Globex", date(2026, 2, 3), 0.1 + 0.2, "EUR"],
                     [10025, "Initech", datetime(2026, 2, 3, 13, 5), 0.1234567, "USD"]],
        "Notes": [["Key", "Value"], ["owner", "finance"]],
    })
    assert guess_media_type(Path("blob"), content[:8192]) == XLSX
    parsed = _parse(XLSX, content)
    assert [(e.kind, e.page) for e in parsed.elements] == [
        ("Title", 1), ("Text", 1), ("Table", 1), ("Title", 2), ("Table", 2)]
    assert parsed.elements[0].text == "Payables" and parsed.elements[1].text == "Accounts payable, January"
    assert parsed.elements[2].rows == [
        AP_HEADER,
        ["10023", "Acme GmbH", "2026-01-15", "1234.5", "EUR"],
        ["10024", "Globex", "2026-02-03", "0.3", "EUR"],  # Excel's 15 digits, as the sheet shows it
        ["10025", "Initech", "2026-02-03 13:05:00", "0.1234567", "USD"],  # not pandas' 6 decimals
    ]
    records = records_from_table(parsed.elements[2].rows or []).records
    assert [(r.record_type, r.number, r.issued_on) for r in records][:2] == [
        ("invoice", "10023", date(2026, 1, 15)), ("invoice", "10024", date(2026, 2, 3))]


def test_xlsx_single_sheet_has_no_sheet_title_and_empty_sheets_give_nothing() -> None:
    parsed = _parse(XLSX, _xlsx({"Sheet1": [["a", "b"], [1, None, None], [None, 2]], "Empty": []}))
    assert [(e.kind, e.rows) for e in parsed.elements] == [("Table", [["a", "b"], ["1", ""], ["", "2"]])]


def _bomb(main_part: str, limit: int) -> bytes:
    """A zip whose member declares a small size but inflates to more than `limit`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(main_part, b"<x/>")
        archive.writestr("payload.xml", b"\0" * (limit + (1 << 20)))
    data = bytearray(buffer.getvalue())
    directory = data.rfind(b"PK\x01\x02")  # the central directory entry of payload.xml: size lies
    while directory >= 0:
        name_length = int.from_bytes(data[directory + 28:directory + 30], "little")
        if data[directory + 46:directory + 46 + name_length] == b"payload.xml":
            data[directory + 24:directory + 28] = (1000).to_bytes(4, "little")
            break
        directory = data.rfind(b"PK\x01\x02", 0, directory)
    return bytes(data)


@pytest.mark.parametrize(("media_type", "main_part", "what"), [
    (XLSX, "xl/workbook.xml", "XLSX"), (PPTX, "ppt/presentation.xml", "PPTX")])
def test_office_zips_are_bounded_like_docx(media_type: str, main_part: str, what: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse_office, "MAX_DOCX_UNPACKED_BYTES", 4 << 20)  # the check, not 256 MiB of zeros
    with pytest.raises(BadInput, match=f"not a {what} file: the archive has no {main_part}"):
        _parse(media_type, _xlsx({"S": [["a"]]}) if what == "PPTX" else _pptx([("T", ["x"], None)]))
    with pytest.raises(BadInput, match=f"not a {what} file: the zip archive is truncated"):
        _parse(media_type, b"PK\x03\x04 broken")
    with pytest.raises(BadInput, match=rf"({what} unpacks to more than|Bad CRC|CRC)"):
        _parse(media_type, _bomb(main_part, 4 << 20))


# ----------------------------------------------------------------------------- PPTX


def test_pptx_slide_titles_are_headings_with_text_and_notes_after() -> None:
    content = _pptx([
        ("Quarterly review", ["Revenue grew in every region this quarter.", "Costs fell"], "Mention the Acme deal."),
        ("Next steps", ["Renew the Globex contract CTR-2026-01 before March."], None),
    ])
    assert guess_media_type(Path("deck"), content[:8192]) == PPTX
    parsed = _parse(PPTX, content)
    got = [(e.kind, e.depth, e.page, e.text) for e in parsed.elements]
    assert got[0] == ("Title", 1, 1, "Quarterly review")
    assert ("Text", 0, 1, "Mention the Acme deal.") == got[3]
    assert got[4] == ("Title", 1, 2, "Next steps")
    assert [g[3] for g in got[1:3]] == ["Revenue grew in every region this quarter.", "Costs fell"]
    assert got[5][2:] == (2, "Renew the Globex contract CTR-2026-01 before March.")
