"""A user's everyday folder through the real pipeline and query service (embedded profile).

Reproduces issue 28's cases: an accounts-payable export with one row per invoice and no status
column (spend by vendor and month was "no recognised lines"), a manual page whose questions say
"default value" and "how many" (planned as spend totals before), an option the manual defines
(`--cache-ttl`: its passage is cited first), a product the folder never mentions (`no_answer`
naming it), and a man page shipped as its gzip-compressed troff source. Tenants are unique per
run; under CI=true a missing PostgreSQL fails (tests/conftest.py).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from folder_support import Folder, ingest_folder
from folder_support import ask as ask_as

from manifold.shared.config import ManifoldSettings

EXPORT = """Invoice No,Vendor,Invoice Date,Amount,Currency
AP-10021,Harbor Office Supplies,2026-03-03,1250.00,EUR
AP-10022,Kestrel Logistics,2026-03-09,980.50,EUR
AP-10023,Harbor Office Supplies,2026-03-21,310.25,EUR
AP-10024,Kestrel Logistics,2026-04-02,2200.00,EUR
"""
MANUAL = """# pwcache manual

## Options

--cache-ttl SECONDS
The number of seconds a password stays in the cache. The default value is 900 seconds.

--max-entries N
At most this many passwords are kept at once. The maximum is 64 entries.

## Environment

PWCACHE_SOCKET
The path of the socket the helper listens on.
"""


MAN_SOURCE = r""".TH FROBCTL 8 "March 2026" "frobctl 2.1" "System Administration"
.SH NAME
frobctl \- control the frob daemon
.SH OPTIONS
.TP
\fB\-\-retry\-limit\fR=\fIN\fR
How many times a failed frob is retried before it is given up.
The default is 7 attempts.
.TP
\fB\-q\fR, \fB\-\-quiet\fR
Print nothing but errors.
"""
"""A man page as packages ship it: troff source, gzip-compressed (`man/frobctl.8.gz`)."""

AS_OF = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def folder(settings: ManifoldSettings, pg_conninfo: str, tmp_path_factory: pytest.TempPathFactory) -> Folder:
    files: dict[str, str | bytes] = {"finance/ap-export.csv": EXPORT, "manuals/pwcache.md": MANUAL,
                                     "man/frobctl.8.gz": gzip.compress(MAN_SOURCE.encode())}
    return ingest_folder(settings, tmp_path_factory.mktemp("everyday"), files, "everyday")


@pytest.fixture(scope="module")
def answerer(folder: Folder) -> Iterator[object]:
    from manifold.query.composition import build_answerer

    service = build_answerer(folder.settings)
    yield service
    service.close()


def ask(answerer, folder: Folder, question: str):  # type: ignore[no-untyped-def]
    return ask_as(answerer, folder, question, AS_OF)


def test_spend_by_vendor_and_month_over_an_export_without_status_or_lines(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "How much did we spend with Harbor Office Supplies in March 2026?")
    assert reply.status == "answered", reply
    assert reply.result["spend"]["totals"] == {"EUR": "1560.25"}
    assert reply.result["spend"]["matched_record_count"] == 2


def test_a_default_value_question_is_answered_from_the_manual(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What is the default value of the cache TTL?")
    assert reply.status in {"answered", "partial"}, reply
    assert not any(s.operator == "metric_query" for s in reply.trace.steps), reply.trace.steps
    assert reply.evidence and reply.evidence[0].document_id == "manuals/pwcache.md"
    assert "900 seconds" in reply.answer


def test_the_passage_that_defines_an_option_is_cited_first(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What does --max-entries limit?")
    first = reply.evidence[0].text or "" if reply.evidence else ""
    assert "--max-entries" in first and "64 entries" in first, reply.evidence
    assert "--max-entries" in reply.answer


def test_a_product_the_folder_never_mentions_is_not_answered(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What is the default port of MongoDB?")
    assert reply.status == "no_answer", reply
    assert "MongoDB" in reply.answer and not reply.evidence


def test_a_compressed_man_page_source_is_read_as_man_shows_it(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "How many times does frobctl retry by default (--retry-limit)?")
    assert reply.status in {"answered", "partial"}, reply
    assert reply.evidence and reply.evidence[0].document_id == "man/frobctl.8.gz", reply.evidence
    first = f"{reply.evidence[0].claims.get('section_title') or ''}\n{reply.evidence[0].text or ''}"
    assert "--retry-limit=N" in first and "The default is 7 attempts." in first, first  # the tag heads its text
    assert not any("\\f" in (ev.text or "") or ".TP" in (ev.text or "") for ev in reply.evidence)
