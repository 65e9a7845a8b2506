"""The parse handler against sample documents of every supported format, built here in memory."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import textwrap
import zipfile
from email.message import EmailMessage
from importlib.metadata import version as installed_version

import pytest
from factories import pipeline_versions

from manifold.ingest import parse
from manifold.shared.artifacts import DocRef, Element, ParsedDocument, PipelineVersions
from manifold.shared.errors import BadInput, UnsupportedMediaType
from manifold.shared.events import MetadataValue

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


# ----------------------------------------------------------------------------- fixtures


def _versions() -> PipelineVersions:
    return pipeline_versions(parser=parse.PARSER_VERSION)


def _doc(media_type: str, content: bytes, **metadata: MetadataValue) -> DocRef:
    return DocRef(
        tenant_id="acme",
        document_id="doc-1",
        version=1,
        content_sha256=hashlib.sha256(content).hexdigest(),
        media_type=media_type,
        metadata=dict(metadata),
    )


def _parse(media_type: str, content: bytes, **metadata: MetadataValue) -> ParsedDocument:
    return parse.handle(_doc(media_type, content, **metadata), content, _versions())


def _kinds(parsed: ParsedDocument) -> list[tuple[str, str]]:
    return [(e.kind, e.text) for e in parsed.elements]


def _only(parsed: ParsedDocument, kind: str) -> list[Element]:
    return [e for e in parsed.elements if e.kind == kind]


def _pdf(pages: list[list[tuple[float, float, str]]], image_only: bool = False, in_form: bool = False) -> bytes:
    """A minimal valid PDF: one Helvetica text object per (font size, y, text), correct xref;
    `in_form` draws each page's text through a form XObject, as many generators do."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    page_refs = []
    for lines in pages:
        if image_only:
            image = len(objects) + 1
            objects.append(
                b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
                b"/BitsPerComponent 8 /Length 1 >>\nstream\n\xff\nendstream"
            )
            stream = b"q 100 0 0 100 72 600 cm /Im1 Do Q"
            resources = f"<< /XObject << /Im1 {image} 0 R >> >>".encode()
        else:
            stream = "\n".join(f"BT /F1 {size} Tf 72 {y} Td ({text}) Tj ET" for size, y, text in lines).encode()
            resources = b"<< /Font << /F1 3 0 R >> >>"
        if len(objects) == 2:
            objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        if in_form:
            form = len(objects) + 1
            objects.append(
                b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources %s /Length %d >>\nstream\n"
                % (resources, len(stream)) + stream + b"\nendstream"
            )
            stream, resources = b"/Fm1 Do", f"<< /XObject << /Fm1 {form} 0 R >> >>".encode()
        content = len(objects) + 1
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_refs.append(len(objects) + 1)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources %s >>"
            % (content, resources)
        )
    kids = " ".join(f"{n} 0 R" for n in page_refs)
    objects[1] = f"<< /Type /Pages /Kids [{kids}] /Count {len(page_refs)} >>".encode()
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Framework Agreement", level=1)
    document.add_paragraph("This agreement governs the supply of fasteners by Supplier Beta to Company A.")
    document.add_heading("Pricing", level=2)
    document.add_paragraph("Prices are fixed for the whole of 2026.", style="List Bullet")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["Code", "Name", "Price"], ["PRD-482", "Bolt M8", "0.10"], ["PRD-483", "Nut M8", "0.05"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _email(html_only: bool = False) -> bytes:
    message = EmailMessage()
    message["From"] = "Alice Example <alice@example.com>"
    message["To"] = "bob@example.com"
    message["Subject"] = "Invoice INV-2026-0148"
    message["Date"] = "Mon, 02 Mar 2026 10:00:00 +0000"
    if html_only:
        message.set_content("<html><body><h1>Statement</h1><p>Your balance is zero.</p></body></html>", subtype="html")
    else:
        message.set_content(
            "Hello Bob,\n\nPlease find attached the invoice INV-2026-0148 for the bolts delivered last week.\n\n"
            "Regards,\nAlice\n"
        )
        message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="INV-2026-0148.pdf")
    return message.as_bytes()


TEXT = b"""Supply Terms

The supplier shall deliver all goods within thirty days of the order date and
notify the buyer of any delay without undue hesitation. Late delivery incurs a penalty.

- Bolts are delivered in boxes of 100
- Nuts are delivered in boxes of 200

1. Payment is due within 30 days.
2. Disputes go to arbitration in Vienna.

INV-2026-0148, PRD-482, SKU-991
"""

MARKDOWN = b"""# Supply Agreement

Intro paragraph about the agreement between Company A and Supplier Beta.

## Delivery

The supplier shall deliver all goods within thirty days of the order date.

- bolts M8
- nuts M8
    - nuts M8 stainless

### Prices

| Code | Description | Price |
|------|-------------|-------|
| PRD-482 | Bolt M8 | 0.10 |
| PRD-483 | Nut M8 | 0.05 |
"""

HTML = """<!DOCTYPE html><html><head><meta charset="windows-1252"><title>Catalog</title></head><body>
<h1>Product Catalog</h1>
<p>This catalog lists products supplied by Supplier Beta to the caf\u00e9 chain in 2026.</p>
<h2>Fasteners</h2>
<ul><li>Bolts</li><li>Nuts</li></ul>
<table><thead><tr><th>Code</th><th>Name</th><th>Price</th></tr></thead>
<tbody><tr><td>PRD-482</td><td>Bolt  M8</td><td>0.10</td></tr>
<tr><td>PRD-483</td><td colspan="2">discontinued</td></tr></tbody></table>
</body></html>""".encode("cp1252")

CSV = b"""line,product_code,description,quantity,unit_price,amount
1,PRD-482,Bolt M8,100,0.10,10.00
2,PRD-483,"Nut, M8",200,0.05,10.00
3,PRD-484,Washer
"""


# ----------------------------------------------------------------------------- formats


def test_plain_text_titles_paragraphs_lists_and_clauses() -> None:
    parsed = _parse("text/plain", TEXT)
    assert parsed.elements[0].kind == "Title" and parsed.elements[0].text == "Supply Terms"
    assert parsed.elements[0].depth == 1
    narrative = _only(parsed, "NarrativeText")
    assert len(narrative) == 1  # the hard-wrapped line is joined into its paragraph
    assert "order date and notify the buyer" in narrative[0].text
    items = [e.text for e in _only(parsed, "ListItem")]
    assert items == [
        "Bolts are delivered in boxes of 100",
        "Nuts are delivered in boxes of 200",
        "1. Payment is due within 30 days.",
        "2. Disputes go to arbitration in Vienna.",
    ]
    assert parsed.elements[-1].text == "INV-2026-0148, PRD-482, SKU-991"
    assert [e.index for e in parsed.elements] == list(range(len(parsed.elements)))


ABSTRACT = (
    "Effects of aspirin on colorectal cancer in adults\n\n"
    "Aspirin lowers the risk of colorectal cancer. We followed 4,000 adults for ten years. "
    "Dr. Smith et al. reported a 20 % reduction (p < 0.01) in the treated group.\n\n"
    "METHODS AND RESULTS OF THE TRIAL\n"
    "- Two doses were compared in the trial.\n"
    "Contact: trial@example.org\n"
)


def test_plain_text_prose_is_classified_without_unstructured_as_unstructured_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast narrative-text path (several ordinary sentences) must give exactly the drafts that
    unstructured's own classifier gives, and leave headings, shouting text and list items to it."""
    from manifold.ingest import parse_formats

    is_prose = parse_formats._is_prose
    fast = parse_formats.text_drafts(ABSTRACT)
    monkeypatch.setattr(parse_formats, "_is_prose", lambda paragraph: False)
    assert fast == parse_formats.text_drafts(ABSTRACT)
    assert [d.kind for d in fast] == ["Title", "NarrativeText", "Title", "ListItem", "Title"]
    assert is_prose(ABSTRACT.split("\n\n")[1].strip())
    for line in ("Effects of aspirin on colorectal cancer in adults", "METHODS AND RESULTS. OF THE TRIAL. NOW HERE.",
                 "- Two doses were compared. Both were safe here.", "1. Payment is due in 30 days. Then it is late."):
        assert not is_prose(line)


def test_markdown_headings_lists_and_table() -> None:
    parsed = _parse("text/markdown", MARKDOWN)
    titles = [(e.text, e.depth) for e in _only(parsed, "Title")]
    assert titles == [("Supply Agreement", 1), ("Delivery", 2), ("Prices", 3)]
    assert [(e.text, e.depth) for e in _only(parsed, "ListItem")] == [
        ("bolts M8", 0), ("nuts M8", 0), ("nuts M8 stainless", 1)
    ]
    (table,) = _only(parsed, "Table")
    assert table.rows == [["Code", "Description", "Price"], ["PRD-482", "Bolt M8", "0.10"],
                          ["PRD-483", "Nut M8", "0.05"]]
    assert table.text.splitlines()[1] == "PRD-482 | Bolt M8 | 0.10"


def test_html_headings_table_cells_and_declared_charset() -> None:
    parsed = _parse("text/html", HTML)
    assert [(e.text, e.depth) for e in _only(parsed, "Title")] == [("Product Catalog", 1), ("Fasteners", 2)]
    assert "café chain" in _only(parsed, "NarrativeText")[0].text
    assert [e.text for e in _only(parsed, "ListItem")] == ["Bolts", "Nuts"]
    (table,) = _only(parsed, "Table")
    assert table.rows == [
        ["Code", "Name", "Price"],
        ["PRD-482", "Bolt M8", "0.10"],
        ["PRD-483", "discontinued", ""],  # a short (spanning) row is padded to the header width
    ]


def test_csv_is_one_table_with_exact_cells() -> None:
    parsed = _parse("text/csv", CSV)
    (table,) = parsed.elements
    assert table.kind == "Table"
    assert table.rows is not None
    assert table.rows[0] == ["line", "product_code", "description", "quantity", "unit_price", "amount"]
    assert table.rows[1] == ["1", "PRD-482", "Bolt M8", "100", "0.10", "10.00"]  # no float coercion
    assert table.rows[2][2] == "Nut, M8"
    assert table.rows[3] == ["3", "PRD-484", "Washer", "", "", ""]  # a short row is padded


def test_csv_with_semicolons_and_a_single_column() -> None:
    assert _parse("text/csv", b"code;qty\nPRD-1;2\n").elements[0].rows == [["code", "qty"], ["PRD-1", "2"]]
    assert _parse("text/csv", b"only\nPRD-1\n").elements[0].rows == [["only"], ["PRD-1"]]


def test_json_records_become_one_table() -> None:
    records = b"""[{"line": 1, "code": "PRD-482", "amount": 10.50, "tags": ["a", "b"]},
                   {"line": 2, "code": "PRD-483", "meta": {"origin": "DE"}}]"""
    (table,) = _parse("application/json", records).elements
    assert table.kind == "Table"
    assert table.rows == [
        ["line", "code", "amount", "tags", "meta"],
        ["1", "PRD-482", "10.50", '["a", "b"]', ""],
        ["2", "PRD-483", "", "", '{"origin": "DE"}'],
    ]
    wrapped = json.dumps({"items": [{"sku": "PRD-1", "qty": 2}]}).encode()
    assert _parse("application/json", wrapped).elements[0].rows == [["sku", "qty"], ["PRD-1", "2"]]


def test_other_json_becomes_key_path_lines() -> None:
    content = b'{"invoice": {"number": "INV-2026-0148", "total": 10.50, "paid": false, "notes": null},' \
              b' "tags": ["urgent", "q1"], "lines": [{"sku": "PRD-1", "qty": 2}]}'
    parsed = _parse("application/json", content)
    assert _kinds(parsed) == [
        ("Text", "invoice.number: INV-2026-0148"),
        ("Text", "invoice.total: 10.50"),
        ("Text", "invoice.paid: false"),
        ("Text", "invoice.notes: null"),
        ("Text", "tags[0]: urgent"),
        ("Text", "tags[1]: q1"),
        ("Table", "sku | qty\nPRD-1 | 2"),
    ]


def test_email_headers_body_and_attachments() -> None:
    parsed = _parse("message/rfc822", _email())
    assert [e.text for e in _only(parsed, "EmailHeader")] == [
        "From: Alice Example <alice@example.com>",
        "To: bob@example.com",
        "Subject: Invoice INV-2026-0148",
        "Date: Mon, 02 Mar 2026 10:00:00 +0000",
    ]
    assert any("invoice INV-2026-0148 for the bolts" in e.text for e in _only(parsed, "NarrativeText"))
    assert not _only(parsed, "Title")  # the signature "Alice" is not a heading
    assert parsed.elements[-1].text == "Attachment: INV-2026-0148.pdf"


def test_html_only_email_body() -> None:
    parsed = _parse("message/rfc822", _email(html_only=True))
    assert ("Title", "Statement") in _kinds(parsed)
    assert any(e.text == "Your balance is zero." for e in parsed.elements)


def test_docx_heading_paragraph_list_and_table() -> None:
    parsed = _parse(DOCX, _docx())
    assert [(e.text, e.depth) for e in _only(parsed, "Title")] == [("Framework Agreement", 1), ("Pricing", 2)]
    assert _only(parsed, "NarrativeText")[0].text.startswith("This agreement governs the supply")
    assert [e.text for e in _only(parsed, "ListItem")] == ["Prices are fixed for the whole of 2026."]
    (table,) = _only(parsed, "Table")
    assert table.rows == [["Code", "Name", "Price"], ["PRD-482", "Bolt M8", "0.10"], ["PRD-483", "Nut M8", "0.05"]]


def test_pdf_text_layer_titles_paragraphs_and_pages() -> None:
    content = _pdf(
        [
            [
                (18, 720, "Supply Agreement"),
                (11, 690, "The supplier shall deliver all goods within thirty days of the"),
                (11, 676, "order date. Late delivery incurs a penalty of two percent per week."),
                (14, 640, "Pricing"),
                (11, 615, "Invoice INV-2026-0148 covers PRD-482 and PRD-483 at fixed prices."),
            ],
            [(14, 720, "Termination"), (11, 690, "Either party may terminate the agreement with notice.")],
        ]
    )
    parsed = _parse("application/pdf", content)
    assert [(e.text, e.depth, e.page) for e in _only(parsed, "Title")] == [
        ("Supply Agreement", 1, 1), ("Pricing", 2, 1), ("Termination", 2, 2)
    ]
    narrative = _only(parsed, "NarrativeText")
    assert narrative[0].text == (
        "The supplier shall deliver all goods within thirty days of the order date. "
        "Late delivery incurs a penalty of two percent per week."
    )
    assert narrative[0].page == 1 and narrative[-1].page == 2


def test_pdf_running_headers_and_page_numbers_are_dropped_and_a_sentence_carries_over_pages() -> None:
    def page(n: int, body: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
        return [(9, 760, "Widget Controller Manual"), *body, (9, 40, f"{n} / 4")]

    content = _pdf([
        page(1, [(11, 700, "The controller stores its settings in the flash memory and")]),
        page(2, [(11, 700, "reloads them at start-up. Each setting has a default value.")]),
        page(3, [(11, 700, "The relay output switches at most twice per second.")]),
        page(4, [(11, 700, "Calibration is done once a year by the installer.")]),
    ])
    parsed = _parse("application/pdf", content)
    texts = [e.text for e in parsed.elements]
    assert not any("Widget Controller Manual" in t or "/ 4" in t for t in texts)
    assert texts[0] == ("The controller stores its settings in the flash memory and reloads them at "
                        "start-up. Each setting has a default value.")
    assert parsed.elements[0].page == 1  # the paragraph is cited where it starts
    assert "The relay output switches at most twice per second." in texts


def test_plain_text_page_headers_and_footers_are_dropped_not_repeated_headings() -> None:
    body = "\n".join(f"Line {i} of the body text goes on for a while here." for i in range(24))
    pages = []
    for n in range(1, 5):
        pages.append(f"\n\nGuide 2.1          March 8, 2020\n\n{body}\n\nStep {n}\n\n"
                     f"The step text.\n\n\nWidget Guide                 {n}\n\n")
    parsed = _parse("text/plain", "".join(pages).encode())
    texts = [e.text for e in parsed.elements]
    assert not any("March 8, 2020" in t or "Widget Guide" in t for t in texts)
    assert [t for t in texts if t.startswith("Step")] == ["Step 1", "Step 2", "Step 3", "Step 4"]


def test_a_rendered_man_pages_title_and_closing_lines_are_dropped() -> None:
    page = ("KEEPASSXC-CLI(1)            General Commands Manual           KEEPASSXC-CLI(1)\n\n"
            "NAME\n       keepassxc-cli - command line interface\n\nAUTHOR\n       KeePassXC Team\n\n"
            "KeePassXC 2.7.4                   2022-08-20                  KEEPASSXC-CLI(1)\n")
    texts = [e.text for e in _parse("text/plain", page.encode()).elements]
    assert texts == ["NAME", "keepassxc-cli - command line interface", "AUTHOR", "KeePassXC Team"]
    other = "LS(1)      User Commands      LS(1)\n\nNAME\n  ls\n\nSEE ALSO\n  The full documentation  is at CAT(1)\n"
    assert "LS(1) User Commands LS(1)" in [e.text for e in _parse("text/plain", other.encode()).elements]


def test_pdf_text_drawn_through_a_form_xobject_is_read() -> None:
    content = _pdf([[(11, 700, "Text inside a form XObject is still the text layer.")]], in_form=True)
    assert _kinds(_parse("application/pdf", content)) == [
        ("NarrativeText", "Text inside a form XObject is still the text layer.")
    ]


# ----------------------------------------------------------------------------- errors


def _truncated_docx() -> bytes:
    whole = _docx()
    return whole[: len(whole) // 2]


def _zip_without_document() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("media_type", "content", "reason"),
    [
        (DOCX, _truncated_docx(), "zip archive is truncated or corrupt"),
        (DOCX, b"this is not a zip", "zip archive is truncated or corrupt"),
        (DOCX, _zip_without_document(), "no word/document.xml"),
        ("application/pdf", b"%PDF-1.4\nthis is garbage", "cannot parse PDF"),
        ("application/pdf", _pdf([[(11, 700, "cut short")]])[:150], "cannot parse PDF"),
        ("application/pdf", _pdf([[]], image_only=True), "OCR is not supported"),
        ("application/json", b'{"a": 1,, }', "invalid JSON: .* at line 1 column"),
        ("application/json", b"[" * 100_000, "nested too deeply"),
        ("application/json", b'{"note": "a\\u0000b"}', "NUL character"),  # issue 13 #5: was poison at load
        ("application/json", b'[{"k\\u0000": 1}]', "NUL character"),
        ("text/plain", bytes(range(256)) * 4, "binary"),
        ("text/plain", b"caf\xc3\x28 \x81\x8d", "not decodable text"),
        ("text/csv", b'a,b\n"unterminated,2\n', "cannot parse CSV"),
        ("message/rfc822", b"no headers at all, just words", "no header block"),
    ],
)
def test_corrupt_input_is_bad_input_with_a_reason(media_type: str, content: bytes, reason: str) -> None:
    with pytest.raises(BadInput, match=reason) as caught:
        _parse(media_type, content)
    assert type(caught.value) is BadInput
    assert " at 0x" not in str(caught.value)  # messages are stable: no object addresses


def test_a_table_wider_than_the_column_limit_is_rejected_with_the_reason() -> None:
    """Finding 4 of issue 13: a million-column CSV was accepted as one giant row."""
    from manifold.ingest.parse_formats import MAX_TABLE_COLUMNS

    wide = MAX_TABLE_COLUMNS + 1
    csv_row = ",".join(f"c{i}" for i in range(wide)).encode()
    with pytest.raises(BadInput, match=f"CSV row 2 has {wide} columns; the limit is {MAX_TABLE_COLUMNS}"):
        _parse("text/csv", b"a,b\n" + csv_row + b"\n")
    records = json.dumps([{f"k{i}": i for i in range(wide)}]).encode()
    with pytest.raises(BadInput, match=f"JSON records at <root> has {wide} columns"):
        _parse("application/json", records)
    html = ("<table><tr>" + "<td>x</td>" * wide + "</tr></table>").encode()
    with pytest.raises(BadInput, match=f"HTML table has {wide} columns"):
        _parse("text/html", html)
    at_limit = ",".join(f"c{i}" for i in range(MAX_TABLE_COLUMNS)).encode()
    assert len(_parse("text/csv", at_limit + b"\n" + at_limit).elements[0].rows[0]) == MAX_TABLE_COLUMNS


def test_too_many_layout_elements_is_rejected_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from manifold.ingest import parse

    monkeypatch.setattr(parse, "MAX_ELEMENTS", 3)
    with pytest.raises(BadInput, match="more than 3 layout elements"):
        _parse("application/json", b'{"a": 1, "b": 2, "c": 3, "d": 4}')
    assert len(_parse("application/json", b'{"a": 1, "b": 2, "c": 3}').elements) == 3


def test_a_docx_zip_bomb_with_a_lying_header_fails_in_bounded_memory() -> None:
    """A member that declares 1,000 bytes but inflates to 64 MiB: rejected by its CRC after
    bounded reads, not inflated whole by the DOCX library first."""
    import resource

    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_docx())) as good, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in good.infolist():
            if info.filename != "word/document.xml":
                bomb.writestr(info, good.read(info))
        with bomb.open("word/document.xml", "w") as member:
            for _ in range(64):
                member.write(b" " * 2**20)
    data = bytearray(buf.getvalue())
    for sig, field in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = -1
        while (at := data.find(sig, at + 1)) >= 0:
            if int.from_bytes(data[at + field:at + field + 4], "little") == 64 * 2**20:
                data[at + field:at + field + 4] = (1000).to_bytes(4, "little")
    _parse(DOCX, _docx())  # warm the DOCX stack before measuring
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BadInput, match="CRC"):
        _parse(DOCX, bytes(data))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 * 1024  # KiB: far below 64 MiB


def test_unknown_media_type_is_unsupported() -> None:
    with pytest.raises(UnsupportedMediaType, match="application/x-msexcel.*supported: "):
        _parse("application/x-msexcel", b"data")
    with pytest.raises(UnsupportedMediaType, match="neither the name nor the content"):
        _parse("application/octet-stream", b"\x00\x01 mystery")


def test_octet_stream_is_sniffed_from_the_name_or_content() -> None:
    parsed = _parse("application/octet-stream", CSV, filename="lines.csv")
    assert parsed.elements[0].kind == "Table"
    parsed = _parse("application/octet-stream", _pdf([[(11, 700, "Hello from a sniffed PDF document.")]]))
    assert parsed.elements[0].text == "Hello from a sniffed PDF document."


def test_media_type_aliases_and_parameters() -> None:
    assert _parse("text/x-markdown", b"# Title\n\nBody text of the section.").elements[0].kind == "Title"
    assert _parse("TEXT/PLAIN; charset=utf-8", b"hello world").elements[0].text == "hello world"


# ----------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    "media_type",
    ["text/plain", "text/markdown", "text/html", "text/csv", "application/json", "message/rfc822", DOCX,
     "application/pdf"],
)
def test_empty_content_is_an_empty_document(media_type: str) -> None:
    assert _parse(media_type, b"").elements == []
    assert _parse(media_type, b"  \n\t ").elements == []


def test_whitespace_is_normalised_and_empty_elements_dropped() -> None:
    content = "Heading\n\nThe\u00a0supplier\u200b  delivers\tbolts every\u00adday to the ﬁrm.\n\n\u200b\n".encode()
    parsed = _parse("text/plain", content)
    assert [e.text for e in parsed.elements] == ["Heading", "The supplier delivers bolts everyday to the firm."]
    table = _parse("text/csv", b"a , b\n 1\t2 ,\n,\n").elements[0]
    assert table.rows == [["a", "b"], ["1 2", ""]]


def test_legacy_encodings_and_byte_order_marks() -> None:
    assert _parse("text/plain", "Lieferant Müller".encode("cp1252")).elements[0].text == "Lieferant Müller"
    assert _parse("text/plain", "\ufeffBOM text".encode("utf-8")).elements[0].text == "BOM text"
    assert _parse("text/plain", "UTF-16 text".encode("utf-16")).elements[0].text == "UTF-16 text"


def test_same_bytes_give_the_same_document() -> None:
    samples = [
        ("text/plain", TEXT), ("text/markdown", MARKDOWN), ("text/html", HTML), ("text/csv", CSV),
        ("message/rfc822", _email()), (DOCX, _docx()), ("application/pdf", _pdf([[(11, 700, "Same text.")]])),
    ]
    for media_type, content in samples:
        assert _parse(media_type, content) == _parse(media_type, content)


def test_parser_version_names_the_installed_unstructured() -> None:
    assert parse.PARSER_VERSION.startswith(f"unstructured-{installed_version('unstructured')}+")


def test_parsing_makes_no_network_calls() -> None:
    """Fresh interpreter, clean environment: any socket use (telemetry, model download) is recorded."""
    script = textwrap.dedent(
        """
        import socket
        attempts = []
        def _record(*args, **kwargs):
            attempts.append(args)
            raise OSError("network disabled")
        socket.socket.connect = _record
        socket.create_connection = _record
        socket.getaddrinfo = _record
        import hashlib, sys
        sys.path.insert(0, "tests")  # where pytest finds `factories`
        from manifold.ingest import parse
        from manifold.shared.artifacts import DocRef
        from tests.unit.test_parse import _versions, MARKDOWN, HTML, TEXT
        for media_type, content in [("text/markdown", MARKDOWN), ("text/html", HTML), ("text/plain", TEXT)]:
            doc = DocRef(tenant_id="acme", document_id="d", version=1, media_type=media_type,
                         content_sha256=hashlib.sha256(content).hexdigest())
            assert parse.handle(doc, content, _versions()).elements
        print("attempts", len(attempts))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    root = __file__.rsplit("/tests/", 1)[0]
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env,
                          cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "attempts 0" in proc.stdout
