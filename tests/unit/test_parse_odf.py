"""OpenDocument readers (`ingest.parse_odf`) on small documents written here, and through
`parse.handle` as the pipeline calls them."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest
from factories import pipeline_versions

from manifold.ingest import parse, parse_odf
from manifold.ingest.media import ODP, ODS, ODT
from manifold.shared.artifacts import DocRef
from manifold.shared.errors import BadInput

_ROOT = ('<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
         'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
         'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
         'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
         'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0">'
         '<office:body>{body}</office:body></office:document-content>')


def _package(media_type: str, body: str, *, content: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), media_type)
        archive.writestr("content.xml", content if content is not None else _ROOT.format(body=body))
    return buffer.getvalue()


ODT_BODY = (
    '<office:text><text:sequence-decls/>'
    '<text:h text:outline-level="1">Returns policy</text:h>'
    '<text:p>Goods may be sent back<text:s text:c="2"/>within <text:span>30 days</text:span>.'
    '<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>Except software.</text:p>'
    '</text:note-body></text:note></text:p>'
    '<text:h text:outline-level="2">Refunds</text:h>'
    '<text:list><text:list-item><text:p>Card payments</text:p>'
    '<text:list><text:list-item><text:p>Visa</text:p></text:list-item></text:list></text:list-item></text:list>'
    '<text:tracked-changes><text:changed-region><text:deletion><text:p>deleted words</text:p></text:deletion>'
    '</text:changed-region></text:tracked-changes>'
    '<text:section><table:table table:name="Fees"><table:table-column table:number-columns-repeated="3"/>'
    '<table:table-header-rows><table:table-row><table:table-cell><text:p>Item</text:p></table:table-cell>'
    '<table:table-cell><text:p>Fee</text:p></table:table-cell></table:table-row></table:table-header-rows>'
    '<table:table-row><table:table-cell table:number-columns-spanned="2"><text:p>Restocking</text:p>'
    '<text:p>large items</text:p></table:table-cell><table:covered-table-cell/></table:table-row>'
    '<table:table-row><table:table-cell><text:p>Label</text:p></table:table-cell>'
    '<table:table-cell><text:p>5 EUR</text:p></table:table-cell>'
    '<table:table-cell table:number-columns-repeated="1020"/></table:table-row>'
    '</table:table></text:section></office:text>')


def test_odt_headings_paragraphs_lists_notes_and_tables() -> None:
    drafts = parse_odf.read_odt(_package(ODT, ODT_BODY))
    assert [(d.kind, d.text, d.depth) for d in drafts if d.kind != "Table"] == [
        ("Title", "Returns policy", 1),
        ("NarrativeText", "Goods may be sent back  within 30 days.", 0),
        ("Text", "Except software.", 0),
        ("Title", "Refunds", 2),
        ("ListItem", "Card payments", 1),
        ("ListItem", "Visa", 2),
    ]
    (table,) = [d for d in drafts if d.kind == "Table"]
    assert table.rows == [["Item", "Fee"], ["Restocking large items", ""], ["Label", "5 EUR"]]


def test_ods_keeps_stored_values_and_drops_blank_rows() -> None:
    body = (
        '<office:spreadsheet>'
        '<table:table table:name="Invoices"><table:table-row><table:table-cell office:value-type="string">'
        '<text:p>Number</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Amount'
        '</text:p></table:table-cell></table:table-row>'
        '<table:table-row><table:table-cell office:value-type="string"><text:p>INV-1</text:p></table:table-cell>'
        '<table:table-cell office:value-type="currency" office:value="1234.567"><text:p>1,234.57 €</text:p>'
        '</table:table-cell></table:table-row>'
        '<table:table-row table:number-rows-repeated="1048570"><table:table-cell '
        'table:number-columns-repeated="1024"/></table:table-row></table:table>'
        '<table:table table:name="Notes"><table:table-row><table:table-cell office:value-type="date" '
        'office:date-value="2026-03-01"><text:p>01/03/26</text:p></table:table-cell></table:table-row>'
        '</table:table><table:table table:name="Empty"/></office:spreadsheet>')
    drafts = parse_odf.read_ods(_package(ODS, body))
    assert [(d.kind, d.text, d.page) for d in drafts] == [
        ("Title", "Invoices", 1), ("Table", "", 1), ("Title", "Notes", 2), ("Table", "", 2)]
    assert drafts[1].rows == [["Number", "Amount"], ["INV-1", "1234.567"]]
    assert drafts[3].rows == [["2026-03-01"]]


def test_odp_slides_titles_bullets_and_notes() -> None:
    body = (
        '<office:presentation><draw:page draw:name="page1">'
        '<draw:frame presentation:class="title"><draw:text-box><text:p>Quarterly review</text:p></draw:text-box>'
        '</draw:frame><draw:frame presentation:class="outline"><draw:text-box><text:list><text:list-item>'
        '<text:p>Churn fell to 2 %</text:p></text:list-item></text:list></draw:text-box></draw:frame>'
        '<presentation:notes><draw:frame><draw:text-box><text:p>Mention the pilot.</text:p></draw:text-box>'
        '</draw:frame></presentation:notes></draw:page>'
        '<draw:page draw:name="page2"><draw:frame presentation:class="title"><draw:text-box><text:p>Next</text:p>'
        '</draw:text-box></draw:frame></draw:page></office:presentation>')
    drafts = parse_odf.read_odp(_package(ODP, body))
    assert [(d.kind, d.text, d.depth, d.page) for d in drafts] == [
        ("Title", "Quarterly review", 1, 1), ("ListItem", "Churn fell to 2 %", 1, 1),
        ("Text", "Mention the pilot.", 0, 1), ("Title", "Next", 1, 2)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a zip at all", "not a ODT file"),
        (None, "content.xml has no office:text"),
    ],
)
def test_malformed_odt_is_bad_input(content: bytes | None, message: str) -> None:
    data = content if content is not None else _package(ODT, "<office:spreadsheet/>")
    with pytest.raises(BadInput, match=message):
        parse_odf.read_odt(data)


def test_broken_xml_and_missing_content_are_bad_input() -> None:
    with pytest.raises(BadInput, match="ODT"):
        parse_odf.read_odt(_package(ODT, "", content="<office:document-content><unclosed>"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", ODT)
    with pytest.raises(BadInput, match="content.xml"):
        parse_odf.read_odt(buffer.getvalue())


def test_entities_are_not_expanded() -> None:
    laughs = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "hahahahahahahahahahaha">'
              '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
              + _ROOT.format(body="<office:text><text:p>&c;</text:p></office:text>"))
    try:
        drafts = parse_odf.read_odt(_package(ODT, "", content=laughs))
    except BadInput:
        return
    assert all("haha" not in d.text for d in drafts)


def test_the_pipeline_reads_an_odt_named_or_sniffed() -> None:
    content = _package(ODT, ODT_BODY)
    for name in ("policies/returns.odt", "policies/returns"):
        doc = DocRef(tenant_id="acme", document_id=name, version=1, content_sha256=hashlib.sha256(content).hexdigest(),
                     media_type="application/octet-stream")
        assert parse.resolve_media_type(doc, content) == ODT
        parsed = parse.handle(doc, content, pipeline_versions(parser=parse.PARSER_VERSION))
        assert any(e.kind == "Table" for e in parsed.elements)
        assert parsed.elements[0].text == "Returns policy"
