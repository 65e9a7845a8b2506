"""Questions over a user's own procurement folder (names, codes and headers the project never saw).

Reproduces issue 16: a price list CSV with the columns `product_code, name, product_group,
supplier, unit_price, currency` and "What is the unit price of <code>?" answered `partial`, "no
price found", because the price question read only invoice lines. The folder goes through the
real pipeline (embedded profile: in-process bus, every stage, the dev stack's PostgreSQL) and the
questions through the real query service. Tenants are unique per run; under CI=true a missing
PostgreSQL fails (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from folder_support import Folder, ingest_folder
from folder_support import ask as ask_as

from manifold.shared.config import ManifoldSettings

PRICE_LIST = """product_code,name,product_group,supplier,unit_price,currency
HX-2207,Hydraulic hose 1/2in,Fluid Power,Keller Hydraulik GmbH,48.90,EUR
HX-2210,Hydraulic hose 3/4in,Fluid Power,Keller Hydraulik GmbH,61.25,EUR
VK-0031,Ball valve DN25,Valves,Ostrava Valve Works,112.00,EUR
"""
INVOICE = """Invoice No,Invoice Date,Vendor,Bill To,Item Code,Qty,Unit Price,Line Total,Currency,Status
INV-2026-5120,2026-04-14,Keller Hydraulik GmbH,Lindqvist Foods AB,HX-2207,10,46.00,460.00,EUR,paid
"""
MEMO = """# Gasket memo

Lindqvist Foods AB buys gaskets from several workshops. The agreed price for the QX-77 gasket is
12.40 EUR per unit until the end of the year; the QX-78 gasket costs 19.95 EUR per unit.
"""


AS_OF = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def folder(settings: ManifoldSettings, pg_conninfo: str, tmp_path_factory: pytest.TempPathFactory) -> Folder:
    files = {"purchasing/price-list.csv": PRICE_LIST, "invoices/inv-2026-5120.csv": INVOICE,
             "notes/gasket-memo.md": MEMO}
    return ingest_folder(settings, tmp_path_factory.mktemp("unseen"), files, "buyer")


@pytest.fixture(scope="module")
def answerer(folder: Folder) -> Iterator[object]:
    from manifold.query.composition import build_answerer

    service = build_answerer(folder.settings)
    yield service
    service.close()


def ask(answerer, folder: Folder, question: str):  # type: ignore[no-untyped-def]
    return ask_as(answerer, folder, question, AS_OF)


def test_the_unit_price_of_a_catalog_code_is_answered_with_a_citation(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What is the unit price of HX-2210?")
    assert reply.status == "answered", reply
    assert "61.25 EUR" in reply.answer and "catalog" in reply.answer
    price = reply.result["price"]["prices"]["HX-2210"]
    assert price["catalog_unit_price"] == "61.25" and price["source"] == "catalog"
    cited = [ev for ev in reply.evidence if ev.kind == "record"]
    assert cited and {ev.document_id for ev in cited} == {"purchasing/price-list.csv"}
    assert cited[0].claims["unit_price"] == "61.25"


def test_the_source_the_question_names_is_preferred(answerer, folder: Folder) -> None:
    listed = ask(answerer, folder, "What is the unit price of HX-2207 in the price list?")
    assert listed.status == "answered", listed
    assert listed.result["price"]["prices"]["HX-2207"]["source"] == "catalog"
    assert "48.90 EUR" in listed.answer and "46.00" not in listed.answer
    invoiced = ask(answerer, folder, "What was HX-2207 invoiced at per unit?")
    assert invoiced.status == "answered", invoiced
    entry = invoiced.result["price"]["prices"]["HX-2207"]
    assert entry["source"] == "invoice" and entry["invoice_unit_price"] == "46.00"
    assert "INV-2026-5120" in invoiced.answer


def test_a_price_only_written_in_text_is_read_from_the_passage_as_partial(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What is the unit price of QX-77?")
    assert reply.status == "partial", reply
    assert "12.40" in reply.answer and "19.95" not in reply.answer
    assert reply.result["fallback"]["document"] == "notes/gasket-memo.md"
    assert any("read from text, not computed from records" in g.detail for g in reply.gaps), reply.gaps
    assert "notes/gasket-memo.md" in {ev.document_id for ev in reply.evidence if ev.kind == "chunk"}
    assert any(p.startswith("number check: pass") for p in reply.trace.policy)


def test_no_data_anywhere_stays_an_honest_no_answer(answerer, folder: Folder) -> None:
    reply = ask(answerer, folder, "What is the unit price of ZZ-9999?")
    assert reply.status in {"no_answer", "partial"}, reply
    assert "fallback" not in reply.result and not any(c.isdigit() for c in reply.answer.replace("ZZ-9999", ""))
