"""Record tables without a type column (accounts-payable and order exports), and why a table's
rows are not records (the `table_skipped` review item)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from test_extract import make_doc

from manifold.ingest.extract import handle
from manifold.ingest.tables.reader import records_from_table

ROW = ["10023", "Acme GmbH", "2026-01-15", "1234.50", "EUR"]


@pytest.mark.parametrize("header", [
    ["Invoice No", "Vendor", "Invoice Date", "Amount", "Currency"],
    ["Inv No", "Supplier", "Posting Date", "Total", "Currency"],
    ["Bill No", "Payee", "Date", "Gross", "Currency"],
    ["Document No", "Vendor Name", "Invoice Date", "Amount", "Currency"],  # the date header names the kind
    ["Reference", "Creditor", "Date", "Invoice Amount", "Curr"],
])
def test_ap_export_rows_are_invoices(header: list[str]) -> None:
    result = records_from_table([header, ROW])
    assert not result.issues
    [record] = result.records
    assert (record.record_type, record.number, record.supplier, record.issued_on, record.total, record.currency) == (
        "invoice", "10023", "Acme GmbH", date(2026, 1, 15), Decimal("1234.50"), "EUR")


def test_order_export_rows_are_orders() -> None:
    [record] = records_from_table([["Doc No", "Supplier", "Order Date", "Order Amount"],
                                   ["77", "Acme", "2026-01-15", "5.00"]]).records
    assert (record.record_type, record.total) == ("order", Decimal("5.00"))


def test_columns_naming_different_facts_are_told_apart() -> None:
    header = ["Invoice Number", "PO Number", "Vendor", "Vendor Name", "Posting Date", "Invoice Date", "Due Date",
              "Net Amount", "VAT", "Gross Amount", "Currency"]
    row = ["10023", "4500012", "V100", "Acme", "2026-01-17", "2026-01-15", "2026-02-15", "100.00", "20.00",
           "120.00", "EUR"]
    [record] = records_from_table([header, row]).records
    assert (record.number, record.supplier, record.supplier_id, record.issued_on) == (
        "10023", "Acme", "V100", date(2026, 1, 15))
    assert (record.subtotal, record.tax, record.total) == (Decimal("100.00"), Decimal("20.00"), Decimal("120.00"))
    assert record.extras == {"PO Number": "4500012", "Posting Date": "2026-01-17", "Due Date": "2026-02-15"}
    bad = records_from_table([header, [*row[:9], "121.00", "EUR"]])
    assert not bad.records and "total 121.00 != subtotal 100.00 + tax 20.00" in bad.issues[0].reason


@pytest.mark.parametrize(("rows", "reason"), [
    ([["Vendor", "Amount"], ["Acme", "5.00"]], "no record number column"),
    ([["Option", "Meaning"], ["-v", "verbose"]], "no column is a record field"),
    ([["Invoice No"], ["10023"]], "only a record number column was recognised"),
    ([["Vendor", "Date"], ["Acme", "2026-01-01"]], "no record number column and no amount column"),
])
def test_a_table_that_is_not_records_says_why(rows: list[list[str]], reason: str) -> None:
    result = records_from_table(rows)
    assert not result.record_like and result.skipped is not None and reason in result.skipped


def test_extract_records_why_table_rows_were_not_records() -> None:
    money = [["Vendor", "Amount"], ["Acme", "5.00"]]
    plain = [["Option", "Meaning"], ["-v", "verbose"]]
    out = handle(make_doc(["The pump manual explains each option in turn here."], [money, plain]))
    skipped = [item for item in out.review if item.payload["kind"] == "table_skipped"]
    assert len(skipped) == 1  # the option table in prose is just a table
    assert skipped[0].reason.startswith("table rows not read as records: no record number column")
    assert skipped[0].payload["fields"] == ["supplier", "total"] and skipped[0].payload["rows"] == 1
    data_only = handle(make_doc([], [plain]))  # a data file of tables: every unread table says why
    assert [i.payload["kind"] for i in data_only.review] == ["table_skipped"]
    assert handle(make_doc([], [[["Invoice No", "Vendor", "Amount"], ["10023", "Acme", "5.00"]]])).review == []
