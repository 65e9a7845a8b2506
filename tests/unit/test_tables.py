"""Structured business records from tables: exact Decimals, column mapping, validation into review."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from manifold.ingest.tables.headers import CANONICAL_FIELDS, SYNONYMS, map_header
from manifold.ingest.tables.parsed import build_record
from manifold.ingest.tables.reader import records_from_table
from manifold.ingest.tables.values import parse_date, parse_decimal, parse_money, resolve_currency
from manifold.shared.artifacts import Provenance

HEADER = ["Invoice No", "Supplier", "Date", "Currency", "Line", "SKU", "Description", "Qty", "Unit Price", "Line Total",
          "Total"]


def invoice_rows(*lines: list[str], total: str = "") -> list[list[str]]:
    return [HEADER, *[["INV-2026-0148", "Supplier Beta", "31/03/2026", "EUR", *line, total] for line in lines]]


# ---- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value", "currency"),
    [
        ("1,234.50", "1234.50", None),
        ("1234.5", "1234.5", None),
        ("€ 1.234,50", "1234.50", "€"),
        ("1 234,50 €", "1234.50", "€"),
        ("(12.00)", "-12.00", None),
        ("-12", "-12", None),
        ("12.00-", "-12.00", None),
        ("−7.5", "-7.5", None),
        ("12.00 EUR", "12.00", "EUR"),
        ("usd 3", "3", "USD"),
        ("$1,000,000", "1000000", "$"),
        ("0.125", "0.125", None),
        ("12,5", "12.5", None),
        ("19.99", "19.99", None),
    ],
)
def test_parse_money_is_exact(raw: str, value: str, currency: str | None) -> None:
    money = parse_money(raw)
    assert isinstance(money.value, Decimal)
    assert money.value == Decimal(value) and str(money.value) == value
    assert money.currency == currency


@pytest.mark.parametrize("raw", ["1,234", "1.234", "abc", "NaN", "1e5", "3 pcs", "12.3.4", "1,23,456", "€ $ 5", "--5",
                                 "(-5)"])
def test_parse_money_rejects_ambiguous_or_unreadable(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_money(raw)


def test_ambiguous_separator_needs_the_table_convention() -> None:
    assert parse_money("1,234", ".").value == Decimal("1234")
    assert parse_money("1,234", ",").value == Decimal("1.234")
    assert parse_money("1.234", ",").value == Decimal("1234")
    with pytest.raises(ValueError, match="currency"):
        parse_decimal("€ 5")


@pytest.mark.parametrize(
    ("raw", "day_first", "expected"),
    [
        ("2026-03-31", True, date(2026, 3, 31)),
        ("2026-03-31T10:00:00Z", True, date(2026, 3, 31)),
        ("31/03/2026", True, date(2026, 3, 31)),
        ("31.03.2026", True, date(2026, 3, 31)),
        ("04/03/2026", True, date(2026, 3, 4)),
        ("04/03/2026", False, date(2026, 4, 3)),
        ("03/31/2026", True, date(2026, 3, 31)),  # unambiguous month-first
        ("Mar 31 2026", True, date(2026, 3, 31)),
        ("March 31, 2026", True, date(2026, 3, 31)),
        ("31 March 2026", True, date(2026, 3, 31)),
        ("Tuesday, March 31st, 2026", True, date(2026, 3, 31)),
        ("31-Mar-2026", True, date(2026, 3, 31)),
    ],
)
def test_parse_date(raw: str, day_first: bool, expected: date) -> None:
    assert parse_date(raw, day_first=day_first) == expected


@pytest.mark.parametrize("raw", ["2026-02-30", "31/03/26", "Smarch 3 2026", "soon"])
def test_parse_date_rejects(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_date(raw)
    with pytest.raises(ValueError, match="ambiguous"):
        parse_date("04/03/2026", day_first=None)


def test_resolve_currency() -> None:
    assert resolve_currency(["eur"], ["€", "EUR"]) == "EUR"
    assert resolve_currency([], ["$"]) == "USD"
    assert resolve_currency(["CAD"], ["$"]) == "CAD"
    assert resolve_currency([], []) is None
    for columns, tokens, message in [(["EUR"], ["$"], "mixed currencies"), (["EUR", "USD"], [], "mixed currencies"),
                                     ([], ["¥"], "ambiguous currency"), (["XYZ"], [], "unknown currency")]:
        with pytest.raises(ValueError, match=message):
            resolve_currency(columns, tokens)


# ---- header mapping --------------------------------------------------------------------------


def test_synonyms_cover_the_common_headers() -> None:
    headers = ["Invoice No.", "invoice_number", "Qty", "Unit Price", "Line Total", "Vendor", "Date", "Currency", "SKU"]
    assert map_header(headers) == [
        "number", "number", "quantity", "unit_price", "amount", "supplier", "issued_on", "currency", "product_code",
    ]
    assert set(SYNONYMS.values()) <= set(CANONICAL_FIELDS)
    assert map_header(["Colour"]) == [None]


def test_operator_map_wins_and_unknown_targets_fail() -> None:
    column_map = {"date": "valid_from", "Beleg-Nr": "number", "Notes": "ignore"}
    assert map_header(["Date", "Beleg-Nr", "Notes"], column_map) == [
        "valid_from", "number", None,
    ]
    with pytest.raises(ValueError, match="unknown field 'price'"):
        map_header(["x"], {"x": "price"})


# ---- transactional records -------------------------------------------------------------------


def test_invoice_lines_are_exact_decimals() -> None:
    result = records_from_table(invoice_rows(
        ["1", "PRD-482", "Sensor", "3", "19.99", "59.97"],
        ["2", "prd 483", "Cable", "1", "0.10", "0.10"],
        ["3", "SKU-7", "Clip", "2", "0.20", ""],  # missing amount: derived exactly
        total="60.47",
    ))
    assert result.record_like and result.issues == ()
    [record] = result.records
    assert (record.record_type, record.number, record.supplier) == ("invoice", "INV-2026-0148", "Supplier Beta")
    assert record.issued_on == date(2026, 3, 31) and record.currency == "EUR"
    assert [line.amount for line in record.lines] == [Decimal("59.97"), Decimal("0.10"), Decimal("0.40")]
    assert record.lines[0].quantity * record.lines[0].unit_price == Decimal("59.97")
    assert [line.product_code for line in record.lines] == ["PRD-482", "PRD-483", "SKU-7"]
    assert record.total == Decimal("60.47") and str(record.total) == "60.47"


def test_sum_of_many_lines_is_exact() -> None:
    lines = [[str(i), f"PRD-{i}", "part", "1", "0.10", "0.10"] for i in range(1, 1001)]
    [record] = records_from_table(invoice_rows(*lines, total="100.00")).records
    assert sum((line.amount for line in record.lines), Decimal(0)) == Decimal("100.00")
    assert record.total == Decimal("100.00")
    off = records_from_table(invoice_rows(*lines, total="100.01"))
    assert off.records == () and "total 100.01 != sum of line amounts 100.00" in off.issues[0].reason


def test_amount_mismatch_sends_whole_record_to_review_with_raw_rows() -> None:
    result = records_from_table(invoice_rows(
        ["1", "PRD-482", "Sensor", "3", "19.99", "59.97"],
        ["2", "PRD-483", "Cable", "2", "19.99", "39.00"],
    ))
    assert result.records == ()
    [issue] = result.issues
    assert "amount 39.00 != quantity 2 × unit_price 19.99 = 39.98" in issue.reason
    assert issue.row_numbers == (1, 2) and issue.number == "INV-2026-0148"
    assert issue.rows[1][9] == "39.00"


def test_amount_within_a_cent_is_accepted() -> None:
    [record] = records_from_table(invoice_rows(["1", "PRD-1", "x", "3", "0.3333", "1.00"])).records
    assert record.lines[0].amount == Decimal("1.00")


def test_mixed_currencies_go_to_review() -> None:
    rows = invoice_rows(["1", "PRD-1", "x", "1", "$5.00", "5.00"])
    result = records_from_table(rows)
    assert result.records == () and "mixed currencies: EUR and '$'" in result.issues[0].reason
    rows = [HEADER, ["INV-1", "Beta", "2026-01-01", "EUR", "1", "PRD-1", "x", "1", "5", "5", ""],
            ["INV-1", "Beta", "2026-01-01", "USD", "2", "PRD-2", "y", "1", "5", "5", ""]]
    assert "mixed currencies: EUR, USD" in records_from_table(rows).issues[0].reason


def test_unparseable_cell_is_a_review_item_never_a_guess() -> None:
    result = records_from_table(invoice_rows(["1", "PRD-1", "x", "three", "5", "15"]))
    assert result.records == ()
    assert "quantity 'three'" in result.issues[0].reason
    assert result.issues[0].rows == (tuple(invoice_rows(["1", "PRD-1", "x", "three", "5", "15"])[1]),)


def test_column_map_from_the_operator() -> None:
    rows = [["Beleg", "Lieferant", "Menge", "Einzelpreis", "Betrag", "Artikel"],
            ["INV-9", "Lieferant Gamma", "2", "1.234,50", "2.469,00", "PRD-1"]]
    assert not records_from_table(rows).record_like  # nothing maps without the operator's map
    column_map = {"Beleg": "number", "Lieferant": "supplier", "Menge": "quantity", "Einzelpreis": "unit_price",
                  "Betrag": "amount", "artikel": "product_code"}
    [record] = records_from_table(rows, column_map).records
    assert record.supplier == "Lieferant Gamma"
    assert record.lines[0].unit_price == Decimal("1234.50") and record.lines[0].amount == Decimal("2469.00")


def test_table_convention_settles_ambiguous_cells() -> None:
    rows = [["Order No", "Qty", "Unit Price", "Amount", "SKU"],
            ["PO-1", "1,000", "1.50", "1,500.00", "PRD-1"]]
    [record] = records_from_table(rows).records
    assert record.record_type == "order" and record.lines[0].quantity == Decimal("1000")
    rows = [["Order No", "Qty", "Unit Price", "Amount", "SKU"], ["PO-1", "1,000", "2", "2000", "PRD-1"]]
    result = records_from_table(rows)
    assert result.records == () and "ambiguous" in result.issues[0].reason


def test_record_types_from_prefix_header_and_column() -> None:
    rows = [["Number", "Qty", "Price", "Amount", "SKU"],
            ["CN-7", "-1", "19.99", "(19.99)", "PRD-1"], ["ORD-3", "1", "5", "5", "PRD-2"]]
    assert [(r.record_type, r.lines[0].amount) for r in records_from_table(rows).records] == [
        ("credit_note", Decimal("-19.99")), ("order", Decimal("5")),
    ]
    rows = [["Invoice No", "Qty", "Price", "Amount"], ["10045", "1", "5", "5"]]
    [record] = records_from_table(rows).records
    assert (record.record_type, record.number) == ("invoice", "10045")
    rows = [["Type", "Number", "Total"], ["order", "INV-1", "5"], ["bill", "77", "6"], ["rocket", "78", "1"]]
    result = records_from_table(rows)
    assert [(r.record_type, r.number, r.total) for r in result.records] == [("invoice", "77", Decimal("6"))]
    assert [i.number for i in result.issues] == ["INV-1", "78"]
    rows = [["Number", "Total"], ["12345", "5"]]
    assert "cannot tell whether 12345" in records_from_table(rows).issues[0].reason


def test_summary_rows_and_tax() -> None:
    rows = [["Invoice No", "Description", "Qty", "Unit Price", "Amount"],
            ["INV-5", "Sensor PRD-482", "3", "19.99", "59.97"],
            ["", "", "", "Subtotal", "59.97"],
            ["", "VAT 20%", "", "", "11.99"],
            ["", "", "", "Total", "71.96"]]
    [record] = records_from_table(rows).records
    assert (record.subtotal, record.tax, record.total) == (Decimal("59.97"), Decimal("11.99"), Decimal("71.96"))
    assert record.lines[0].product_code == "PRD-482"
    rows[-1][-1] = "71.95"
    assert "total 71.95 != sum of line amounts 59.97 + tax 11.99" in records_from_table(rows).issues[0].reason


def test_default_number_from_the_document_and_rows_without_numbers() -> None:
    rows = [["Item", "Qty", "Price", "Amount"], ["Sensor", "3", "19.99", "59.97"]]
    orphan = records_from_table(rows)
    assert orphan.records == () and "without a record number" in orphan.issues[0].reason
    [record] = records_from_table(rows, default_number="inv 2026/0148").records
    assert record.number == "INV-2026-0148"
    rows = [["Invoice", "Qty", "Price", "Amount"],
            ["INV-1", "1", "1", "1"], ["INV-2", "1", "2", "2"], ["", "1", "3", "3"]]
    result = records_from_table(rows)
    assert len(result.records) == 2 and result.issues[0].row_numbers == (3,)


def test_conflicting_header_values_and_bad_rows() -> None:
    rows = [HEADER, ["INV-1", "Beta", "2026-01-01", "EUR", "1", "PRD-1", "x", "1", "5", "5", ""],
            ["INV-1", "Gamma", "2026-01-01", "EUR", "2", "PRD-2", "y", "1", "5", "5", ""],
            ["INV-2", "Beta", "2026-01-01", "EUR", "1", "PRD-1", "x", "1", "5", "5", "", "extra"]]
    result = records_from_table(rows)
    assert result.records == ()
    assert [i.row_numbers for i in result.issues] == [(1, 2), (3,)]
    assert "conflicting supplier values: Beta, Gamma" in result.issues[0].reason
    assert "has 12 cells" in result.issues[1].reason


def test_dates_follow_the_table_order_convention() -> None:
    rows = [["Invoice No", "Date", "Total"], ["INV-1", "04/03/2026", "1"], ["INV-2", "03/31/2026", "1"]]
    assert [r.issued_on for r in records_from_table(rows).records] == [date(2026, 4, 3), date(2026, 3, 31)]
    rows[2][1] = "31/03/2026"
    assert [r.issued_on for r in records_from_table(rows).records] == [date(2026, 3, 4), date(2026, 3, 31)]


def test_non_record_table_is_just_a_table() -> None:
    result = records_from_table([["Name", "Role"], ["Ada", "Engineer"]])
    assert (result.record_like, result.records, result.issues) == (False, (), ())
    assert not records_from_table([["Invoice No"]]).record_like
    assert not records_from_table([]).record_like


# ---- catalog ---------------------------------------------------------------------------------


def test_catalog_rows() -> None:
    rows = [["SKU", "Description", "Price", "Currency", "Supplier", "Category", "Valid From"],
            ["PRD-1", "Sensor", "€ 1.234,50", "EUR", "Supplier Beta", "Monitoring", "2026-01-01"],
            ["PRD-1", "Sensor", "€ 1.234,50", "EUR", "Supplier Beta", "Monitoring", "2026-01-01"],
            ["PRD-2", "Cable", "12,00", "EUR", "Supplier Beta", "Monitoring", ""],
            ["PRD-2", "Cable", "13,00", "EUR", "Supplier Beta", "Monitoring", ""],
            ["PRD-3", "Bad", "abc", "EUR", "Supplier Beta", "", ""]]
    result = records_from_table(rows)
    assert [(r.record_type, r.number, r.unit_price, r.row_numbers) for r in result.records] == [
        ("catalog_item", "PRD-1", Decimal("1234.50"), (1, 2)), ("catalog_item", "PRD-2", Decimal("12.00"), (3,)),
    ]
    assert result.records[0].valid_from == date(2026, 1, 1) and result.records[0].product_group == "Monitoring"
    assert [i.row_numbers for i in result.issues] == [(4,), (5,)]
    assert "conflicts with row 3" in result.issues[0].reason


# ---- BusinessRecord artifact----------------------------------------------------------------------


def test_build_record_keeps_decimals_and_unmapped_columns() -> None:
    rows = [["Invoice No", "Customer", "Qty", "Unit Price", "Amount", "SKU", "Cost Centre", "Tax"],
            ["INV-3", "Company A", "3", "19.99", "59.97", "PRD-1", "CC-1", "0"]]
    [parsed] = records_from_table(rows).records
    provenance = Provenance(document_id="d", version=1, chunk_id=None, record_id="rec_x", extraction_version="rules-1")
    record = build_record(parsed, "rec_x", provenance)
    assert record.lines[0].amount == Decimal("59.97") and isinstance(record.lines[0].quantity, Decimal)
    assert record.attributes == {"Cost Centre#1": "CC-1", "customer_name": "Company A", "tax": "0",
                                 "status_column": "absent"}  # no status column: an export of posted invoices
    assert record.model_dump(mode="json")["lines"][0]["amount"] == "59.97"


def test_arithmetic_never_rounds() -> None:
    big = "123456789012345678901234567.89"  # beyond the default 28-digit Decimal context
    rows = [["Invoice No", "Qty", "Unit Price", "Amount", "Total"],
            ["INV-1", "3", big, "370370367037037036703703703.67", ""],
            ["INV-1", "1", "0.01", "0.01", "370370367037037036703703703.68"]]
    [record] = records_from_table(rows).records
    assert record.total == Decimal("370370367037037036703703703.68")
    huge = "9" * 150
    rows = [["Invoice No", "Qty", "Unit Price", "Amount"], ["INV-2", huge, huge, "1"]]
    result = records_from_table(rows)
    assert result.records == () and "too many digits" in result.issues[0].reason


def test_docstring_table_lists_exactly_the_synonyms() -> None:
    import manifold.ingest.tables.headers as module

    documented: dict[str, str] = {}
    for row in (module.__doc__ or "").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in CANONICAL_FIELDS:
            documented.update({s.strip(): cells[0] for s in cells[2].split(",") if s.strip()})
    assert documented == SYNONYMS


def test_price_list_stays_a_catalog_and_orphan_line_tables_are_reviewed() -> None:
    price_list = [["SKU", "Price", "Supplier"], ["PRD-1", "5.00", "Beta"]]
    [item] = records_from_table(price_list, default_number="INV-1").records
    assert (item.record_type, item.number, item.unit_price) == ("catalog_item", "PRD-1", Decimal("5.00"))
    lines = [["SKU", "Qty", "Price", "Amount"], ["PRD-1", "2", "5.00", "10.00"], ["PRD-2", "1", "1.00", "1.00"]]
    result = records_from_table(lines)
    assert result.record_like and result.records == ()
    [issue] = result.issues
    assert "without a record number" in issue.reason and issue.row_numbers == (1, 2) and len(issue.rows) == 2
