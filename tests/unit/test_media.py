from __future__ import annotations

import gzip
import io
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from manifold.ingest.media import GZIP, SUPPORTED_MEDIA_TYPES, TROFF, guess_media_type
from manifold.ingest.parse import READERS

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _zip(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(name, "<x/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("notes.txt", "text/plain"),
        ("notes.text", "text/plain"),
        ("server.log", "text/plain"),
        ("README.md", "text/markdown"),
        ("guide.markdown", "text/markdown"),
        ("page.html", "text/html"),
        ("page.htm", "text/html"),
        ("lines.csv", "text/csv"),
        ("records.json", "application/json"),
        ("mail.eml", "message/rfc822"),
        ("contract.docx", DOCX),
        ("payables.tsv", "text/tab-separated-values"),
        ("export.TAB", "text/tab-separated-values"),
        ("ledger.xlsx", XLSX),
        ("deck.pptx", PPTX),
        ("scan.pdf", "application/pdf"),
        ("UPPER.PDF", "application/pdf"),
        ("archive.tar.gz.Json", "application/json"),
        ("iris.rst", "text/plain"),  # lightweight markup and configuration files are plain text
        ("guide.adoc", "text/plain"),
        ("notes.org", "text/plain"),
        ("redis.conf", "text/plain"),
        ("setup.cfg", "text/plain"),
        ("php.ini", "text/plain"),
        ("compose.YAML", "text/plain"),
        ("pyproject.toml", "text/plain"),
        ("minutes.odt", "application/vnd.oasis.opendocument.text"),
        ("budget.ODS", "application/vnd.oasis.opendocument.spreadsheet"),
        ("talk.odp", "application/vnd.oasis.opendocument.presentation"),
    ],
)
def test_known_extensions_decide(name: str, expected: str) -> None:
    assert guess_media_type(Path(name), b"") == expected


def test_extension_wins_over_content() -> None:
    assert guess_media_type(Path("looks-like.txt"), b"%PDF-1.7\n") == "text/plain"


def test_sniffs_pdf_docx_html_and_email_without_extension() -> None:
    assert guess_media_type(Path("blob"), b"%PDF-1.4\n%\xe2\xe3") == "application/pdf"
    assert guess_media_type(Path("blob"), _zip("[Content_Types].xml", "word/document.xml")) == DOCX
    assert guess_media_type(Path("blob"), b"<!DOCTYPE html>\n<html><body>x</body></html>") == "text/html"
    assert guess_media_type(Path("blob"), b"\xef\xbb\xbf  <html lang='en'><p>x") == "text/html"
    assert guess_media_type(Path("blob"), b"<!-- generated -->\n<HTML><BODY>x") == "text/html"
    message = EmailMessage()
    message["From"] = "a@example.com"
    message["Subject"] = "Invoice"
    message.set_content("body")
    assert guess_media_type(Path("blob"), message.as_bytes()) == "message/rfc822"


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"\x00\x01\x02\x03binary",
        b"12345 67890 \x01\x02",  # no letter, control characters
        "caf\u00e9".encode("latin-1") + b" au lait, pas en UTF-8 " * 3,
        _zip("[Content_Types].xml", "mimetype", "content.xml"),  # a zip that is neither OOXML nor ODF
    ],
)
def test_unknown_content_is_none(head: bytes) -> None:
    assert guess_media_type(Path("no-extension"), head) is None


@pytest.mark.parametrize(
    ("name", "head"),
    [
        ("no-extension", b"just some text"),
        ("family.ged", b"0 HEAD\n1 SOUR GRAMPS\n0 @I1@ INDI\n1 NAME Hans /Smith/\n"),
        ("talk.srt", "1\n00:00:01,000 --> 00:00:04,000\nBonjour \u00e0 tous\n".encode()),
        ("notes.xyz", b"Subject: only one header line\n\nbody"),  # one header is not enough for an email
        ("cut", "na\u00efve".encode()[:-1]),  # a character cut by the head's end
        ("frag", b"<div>fragment, not a document</div>"),
    ],
)
def test_text_with_an_unknown_suffix_is_plain_text(name: str, head: bytes) -> None:
    assert guess_media_type(Path(name), head) == "text/plain"


@pytest.mark.parametrize("name", ["site.css", "app.js", "icon.svg", "layout.xsl", "bundle.js.map"])
def test_stylesheets_and_scripts_are_not_documents(name: str) -> None:
    assert guess_media_type(Path(name), b"body { color: red; } function f() { return 1; }") is None


def _odf(media_type: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), media_type)  # stored, first, as ODF requires
        archive.writestr("content.xml", "<x/>")
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["text", "spreadsheet", "presentation"])
def test_sniffs_opendocument_by_its_mimetype_member(kind: str) -> None:
    media_type = f"application/vnd.oasis.opendocument.{kind}"
    assert guess_media_type(Path("blob"), _odf(media_type)) == media_type
    assert guess_media_type(Path("blob"), _odf("application/vnd.oasis.opendocument.graphics")) is None


def test_sniffs_xlsx_and_pptx_by_their_first_part_folder() -> None:
    assert guess_media_type(Path("blob"), _zip("[Content_Types].xml", "_rels/.rels", "xl/workbook.xml")) == XLSX
    assert guess_media_type(Path("blob"), _zip("[Content_Types].xml", "ppt/presentation.xml")) == PPTX
    # a DOCX embedding a spreadsheet names word/ first: the first Office part folder decides
    assert guess_media_type(Path("blob"), _zip("word/document.xml", "word/embeddings/xl/workbook.xml")) == DOCX


def test_unknown_extension_falls_back_to_sniffing() -> None:
    assert guess_media_type(Path("report.bin"), b"%PDF-1.5") == "application/pdf"
    assert guess_media_type(Path("report.xyz"), b"plain words") == "text/plain"
    assert guess_media_type(Path("report.xyz"), b"\x00\x01 binary") is None


def test_every_supported_type_has_a_reader_and_guesses_stay_supported() -> None:
    assert SUPPORTED_MEDIA_TYPES - {GZIP} == frozenset(READERS)  # gzip is read by what it holds
    for name in ["a.txt", "a.md", "a.html", "a.csv", "a.tsv", "a.tab", "a.json", "a.eml", "a.docx", "a.xlsx",
                 "a.pptx", "a.pdf", "a.odt", "a.ods", "a.odp", "a.man"]:
        assert guess_media_type(Path(name), b"") in SUPPORTED_MEDIA_TYPES


def test_man_page_sources_are_troff_by_their_requests_and_gzip_by_its_magic() -> None:
    page = b'.\\" a comment\n.TH LS 1 "2022" "GNU coreutils"\n.SH NAME\nls \\- list directory contents\n'
    assert guess_media_type(Path("ls.1"), page) == TROFF
    assert guess_media_type(Path("ssh_config"), b".Dd $Mdocdate$\n.Dt SSH_CONFIG 5\n") == TROFF
    assert guess_media_type(Path("notes.1"), b"Chapter 1\nplain words, no requests\n") == "text/plain"
    assert guess_media_type(Path("ls.1.txt"), page) == "text/plain"  # a known extension still decides
    assert guess_media_type(Path("ls.1.gz"), gzip.compress(page)) == GZIP
    assert guess_media_type(Path("report.txt"), gzip.compress(b"words")) == GZIP  # compressed bytes are not text
