"""Invoices, credit notes and orders from the rows of a record table (pure).

Rows are grouped by record number; each group becomes one `ParsedRecord` or, when anything is
wrong, one `RowIssue` for the whole record (a partial invoice is never emitted): a line whose
`amount` is not `quantity × unit_price` (±0.01), a `total` that is not exactly the sum of the line
amounts (plus `tax` when given), a `subtotal` that is not that sum, mixed currencies, conflicting
record-level values or an unknown record type. Summary rows (`Total`, `Subtotal`, `VAT 20%` in
any cell, no product, quantity or price) set the record's total, subtotal or tax. A missing line
`amount` is derived as `quantity × unit_price`; a record without lines that has a subtotal and a
total needs total == subtotal + tax; without a product code column, a description
naming exactly one product code (`Sensor PRD-482`) gives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from decimal import Decimal, Inexact
from functools import partial
from typing import TypeVar

from manifold.ingest.tables.headers import DATE_FIELDS, normalize_header
from manifold.ingest.tables.parsed import ParsedLine, ParsedRecord
from manifold.ingest.tables.rows import TYPE_VALUES, RecordType, Row, RowIssue, TableLayout, row_issue
from manifold.ingest.tables.values import EXACT, TOLERANCE, Money, exact_sum, parse_money, resolve_currency
from manifold.shared.identifiers import find_identifiers, identifier_kind, normalize_identifier

_T = TypeVar("_T")

_KIND_TYPES: dict[str, RecordType] = {"invoice": "invoice", "credit_note": "credit_note", "order": "order"}
_TEXT_FIELDS = ("record_type", "supplier", "supplier_id", "counterparty", "counterparty_id", "customer",
                "customer_id", "status")
_LINE_FIELDS = ("line_no", "product_code", "description", "quantity", "unit_price", "amount", "product_group")
_SUMMARY = re.compile(r"^(?:(?P<total>(?:grand\s+)?total(?:\s+(?:due|amount))?|amount\s+due|balance\s+due)"
                      r"|(?P<subtotal>sub-?\s*total|net\s+total)"
                      r"|(?P<tax>(?:vat|tax|sales\s+tax)(?:\s*\(?\s*\d+(?:[.,]\d+)?\s*%\s*\)?)?))\s*:?$",
                      re.IGNORECASE)


def _number(row: Row) -> str | None:
    raw = row.raw("number")
    return None if raw is None else (normalize_identifier(raw) or raw)


def transactional_records(table: TableLayout, rows: list[Row],
                          default: str | None) -> tuple[list[ParsedRecord], list[RowIssue]]:
    """One record (or one review issue) per record number, in table order; `default` is the
    document's one record number, for a table without a number column."""
    numbers = sorted({n for row in rows if (n := _number(row)) is not None})
    fallback = numbers[0] if len(numbers) == 1 else (default if not numbers and "number" not in table.columns else None)
    if fallback is not None:
        fallback = normalize_identifier(fallback) or fallback
    groups: dict[str, list[Row]] = {}
    issues: list[RowIssue] = []
    for row in rows:
        number = _number(row) or fallback
        if number is None:
            reason = f"row {row.index}: no record number, and the table names several"
            issues.append(row_issue([row], [*row.errors, reason]))
        else:
            groups.setdefault(number, []).append(row)
    records: list[ParsedRecord] = []
    for number, group in groups.items():
        built = _build_transactional(table, number, group)
        (issues if isinstance(built, RowIssue) else records).append(built)  # type: ignore[arg-type]
    return records, issues


def _one(rows: list[Row], name: str, read: Callable[[Row], _T | None], errors: list[str]) -> _T | None:
    """The single value of a record-level field across its rows (blank cells ignored)."""
    values: dict[str, _T] = {}
    for row in rows:
        value = read(row)
        if value is not None:
            values.setdefault(str(value), value)
    if len(values) > 1:
        errors.append(f"conflicting {name} values: {', '.join(sorted(values))}")
        return None
    return next(iter(values.values()), None)


def _labels(row: Row) -> dict[int, str]:
    """Cells of a summary row such as `| | Total | 59.97 |`: column -> 'total'/'subtotal'/'tax'."""
    found = {}
    for i, cell in enumerate(row.cells):
        if cell and (match := _SUMMARY.match(cell)):
            found[i] = next(k for k, v in match.groupdict().items() if v)
    return found


def _summary_kind(row: Row) -> str | None:
    labels = _labels(row)
    if not labels:
        return None
    for name in ("product_code", "quantity", "unit_price"):
        if any(row.cells[i] for i in row.table.columns.get(name, ()) if i not in labels):
            return None
    return next(iter(labels.values()))


def _summary_value(row: Row) -> Money | None:
    labels = _labels(row)
    columns = [i for name in ("amount", "total", "tax", "subtotal") for i in row.table.columns.get(name, ())]
    cells = [row.cells[i] for i in columns if row.cells[i] and i not in labels]
    if not cells:
        cells = [c for i, c in enumerate(row.cells) if c and i not in labels][-1:]
    if len(set(cells)) != 1:
        return None
    try:
        return parse_money(cells[0], row.table.mark)
    except ValueError as exc:
        row.errors.append(f"row {row.index}: {cells[0]!r}: {exc}")
        return None


def _build_transactional(table: TableLayout, number: str, rows: list[Row]) -> ParsedRecord | RowIssue:
    errors: list[str] = []
    line_rows: list[Row] = []
    summary: dict[str, list[Money]] = {"total": [], "subtotal": [], "tax": []}
    for row in rows:
        kind = _summary_kind(row)
        if kind is None:
            if any(row.raw(f) for f in _LINE_FIELDS):
                line_rows.append(row)
            continue
        value = _summary_value(row)
        if value is None:
            errors.append(f"row {row.index}: {kind} row without a readable amount")
        summary[kind].extend([value] if value else [])
    text: dict[str, str | None] = {
        name: _one(rows, name, partial(Row.raw, name=name), errors) for name in _TEXT_FIELDS
    }
    dates: dict[str, date | None] = {
        name: _one(rows, name, partial(Row.date, name=name), errors) for name in DATE_FIELDS
    }
    money: dict[str, Money | None] = {}
    for name in ("total", "tax", "subtotal"):
        found = [m for r in rows if _summary_kind(r) is None and (m := r.money(name)) is not None] + summary[name]
        distinct = {str(m.value) for m in found}
        if len(distinct) > 1:
            errors.append(f"conflicting {name} values: {', '.join(sorted(distinct))}")
        money[name] = found[0] if len(distinct) == 1 else None
    record_type = _record_type(number, text["record_type"], table.hint, errors)
    lines, line_money = _lines(line_rows, errors)
    currency = None
    symbols = [m.currency for m in [*line_money, *(v for v in money.values() if v)] if m.currency]
    try:
        currency = resolve_currency([c for r in rows if (c := r.raw("currency"))], symbols)
    except ValueError as exc:
        errors.append(str(exc))
    total, tax, subtotal = ((m.value if m else None) for m in (money["total"], money["tax"], money["subtotal"]))
    if lines and not errors:
        errors.extend(_check_totals(lines, total, tax, subtotal))
    elif not lines and not errors and subtotal is not None and total is not None:
        expected = EXACT.add(subtotal, tax or Decimal(0))
        if total != expected:
            with_tax = f" + tax {tax}" if tax is not None else ""
            errors.append(f"total {total} != subtotal {subtotal}{with_tax}")
    supplier, counterparty = text["supplier"], text["counterparty"]
    if supplier and counterparty and supplier != counterparty:
        errors.append(f"supplier {supplier!r} differs from counterparty {counterparty!r}")
    errors.extend(e for row in rows for e in row.errors)
    if errors or record_type is None:
        return row_issue(rows, errors, number)
    return ParsedRecord(
        record_type=record_type, number=number, row_numbers=tuple(r.index for r in rows),
        supplier=supplier or counterparty, supplier_id=text["supplier_id"] or text["counterparty_id"],
        customer=text["customer"], customer_id=text["customer_id"], issued_on=dates["issued_on"],
        currency=currency, status=text["status"], total=total, tax=tax, subtotal=subtotal,
        valid_from=dates["valid_from"], valid_to=dates["valid_to"], lines=tuple(lines),
        extras=_record_extras(rows, lines), status_stated="status" in table.columns,
    )


def _check_totals(lines: list[ParsedLine], total: Decimal | None, tax: Decimal | None,
                  subtotal: Decimal | None) -> list[str]:
    """Subtotal == sum of line amounts; total == that sum + tax (exactly, no tolerance)."""
    try:
        line_sum = exact_sum(line.amount for line in lines)
        expected_total = EXACT.add(line_sum, tax or Decimal(0))
    except Inexact:
        return ["line amounts have too many digits to sum exactly"]
    errors = []
    if subtotal is not None and subtotal != line_sum:
        errors.append(f"subtotal {subtotal} != sum of line amounts {line_sum}")
    if total is not None and total != expected_total:
        with_tax = f" + tax {tax}" if tax is not None else ""
        errors.append(f"total {total} != sum of line amounts {line_sum}{with_tax}")
    return errors


def _record_type(number: str, column: str | None, hint: RecordType | None, errors: list[str]) -> RecordType | None:
    from_column = None
    if column is not None:
        from_column = TYPE_VALUES.get(normalize_header(column))
        if from_column is None or from_column == "catalog_item":
            errors.append(f"record_type {column!r} is not invoice, credit note or order")
            return None
    from_prefix = _KIND_TYPES.get(identifier_kind(number) or "")
    if from_column and from_prefix and from_column != from_prefix:
        errors.append(f"record_type {from_column} contradicts the number {number}")
        return None
    chosen = from_column or from_prefix or hint
    if chosen is None:
        errors.append(f"cannot tell whether {number} is an invoice, credit note or order")
    return chosen


def _lines(rows: list[Row], errors: list[str]) -> tuple[list[ParsedLine], list[Money]]:
    lines: list[ParsedLine] = []
    monies: list[Money] = []
    numbered = [row.raw("line_no") for row in rows]
    if any(numbered) and not all(numbered):
        errors.append("some lines have a line number and some do not")
    for position, (row, raw_no) in enumerate(zip(rows, numbered, strict=True), start=1):
        line_no = position
        if raw_no:
            match = re.fullmatch(r"#?\s*0*([1-9]\d*)\.?", raw_no)
            if match is None:
                errors.append(f"row {row.index}: line_no {raw_no!r} is not a positive integer")
                continue
            line_no = int(match[1])
        quantity, price, amount = row.decimal("quantity"), row.money("unit_price"), row.money("amount")
        monies.extend(m for m in (price, amount) if m is not None)
        if quantity is None or price is None:
            if not row.errors:
                errors.append(f"row {row.index}: a line needs quantity and unit_price")
            continue
        try:
            expected = EXACT.multiply(quantity, price.value)
        except Inexact:
            errors.append(f"row {row.index}: quantity × unit_price has too many digits to compute exactly")
            continue
        value = amount.value if amount is not None else expected
        if abs(EXACT.subtract(value, expected)) > TOLERANCE:
            errors.append(f"row {row.index}: amount {value} != quantity {quantity} × unit_price {price.value}"
                          f" = {expected}")
            continue
        code = row.raw("product_code") or _code_in(row.raw("description"), row.table)
        lines.append(ParsedLine(
            line_no, (normalize_identifier(code) or code) if code else None, row.raw("description"),
            quantity, price.value, value, row.raw("product_group"), row.extras(),
        ))
    seen = [line.line_no for line in lines]
    duplicates = sorted({n for n in seen if seen.count(n) > 1})
    if duplicates:
        errors.append(f"duplicate line numbers: {', '.join(map(str, duplicates))}")
    return lines, monies


def _code_in(description: str | None, table: TableLayout) -> str | None:
    """The product code written in a line description, when the table has no code column and
    the description names exactly one (`"Sensor PRD-482"`)."""
    if description is None or "product_code" in table.columns:
        return None
    codes = [c for c in find_identifiers(description) if identifier_kind(c) == "product"]
    return codes[0] if len(codes) == 1 else None


def _record_extras(rows: list[Row], lines: list[ParsedLine]) -> dict[str, str]:
    """Unmapped columns: per line as `column#line_no`, or per record when there are no lines."""
    extras: dict[str, str] = {}
    if lines:
        for line in lines:
            extras.update({f"{key}#{line.line_no}": value for key, value in line.extras.items()})
        return extras
    for row in rows:
        for key, value in row.extras().items():
            extras.setdefault(key, value)
    return extras


__all__ = ["transactional_records"]
