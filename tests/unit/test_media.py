from __future__ import annotations

import io
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from manifold.ingest.media import SUPPORTED_MEDIA_TYPES, guess_media_type
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
        b"just some text",
        b"\x00\x01\x02\x03binary",
        _zip("[Content_Types].xml", "mimetype", "content.xml"),  # a zip that is no Office Open XML file
        b"Subject: only one header line\n\nbody",  # one header is not enough for an email
        b"body first\nFrom: a@example.com\nTo: b@example.com\n",  # headers must open the file
        b"<div>fragment, not a document</div>",
    ],
)
def test_unknown_content_is_none(head: bytes) -> None:
    assert guess_media_type(Path("no-extension"), head) is None


def test_sniffs_xlsx_and_pptx_by_their_first_part_folder() -> None:
    assert guess_media_type(Path("blob"), _zip("[Content_Types].xml", "_rels/.rels", "xl/workbook.xml")) == XLSX
    assert guess_media_type(Path("blob"), _zip("[Content_Types].xml", "ppt/presentation.xml")) == PPTX
    # a DOCX embedding a spreadsheet names word/ first: the first Office part folder decides
    assert guess_media_type(Path("blob"), _zip("word/document.xml", "word/embeddings/xl/workbook.xml")) == DOCX


def test_unknown_extension_falls_back_to_sniffing() -> None:
    assert guess_media_type(Path("report.bin"), b"%PDF-1.5") == "application/pdf"
    assert guess_media_type(Path("report.xyz"), b"plain words") is None


def test_every_supported_type_has_a_reader_and_guesses_stay_supported() -> None:
    assert SUPPORTED_MEDIA_TYPES == frozenset(READERS)
    for name in ["a.txt", "a.md", "a.html", "a.csv", "a.tsv", "a.tab", "a.json", "a.eml", "a.docx", "a.xlsx",
                 "a.pptx", "a.pdf"]:
        assert guess_media_type(Path(name), b"") in SUPPORTED_MEDIA_TYPES
