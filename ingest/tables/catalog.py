"""Catalog items (price lists, agreement schedules) from the rows of a catalog table (pure).

One `catalog_item` per row, numbered by product code. A row without a code or a price, with a
foreign record type, a currency problem or `valid_from` after `valid_to` is a review item. Rows
repeating an item identically merge; rows that conflict for the same (code, supplier,
valid_from) are review items, never a choice.
"""

from __future__ import annotations

from dataclasses import replace

from manifold.ingest.tables.headers import normalize_header
from manifold.ingest.tables.parsed import ParsedRecord
from manifold.ingest.tables.rows import TYPE_VALUES, Row, RowIssue, row_issue
from manifold.ingest.tables.values import resolve_currency
from manifold.shared.identifiers import normalize_identifier


def catalog_records(rows: list[Row]) -> tuple[list[ParsedRecord], list[RowIssue]]:
    """One catalog item per row (identical repeats merged), or a review issue per bad row."""
    records: dict[tuple[str, str, str], ParsedRecord] = {}
    issues: list[RowIssue] = []
    for row in rows:
        errors: list[str] = []
        code, price = row.raw("product_code"), row.money("unit_price")
        supplier, counterparty = row.raw("supplier"), row.raw("counterparty")
        kind = row.raw("record_type")
        if kind and TYPE_VALUES.get(normalize_header(kind)) != "catalog_item":
            errors.append(f"row {row.index}: record_type {kind!r} in a catalog table")
        if code is None:
            errors.append(f"row {row.index}: catalog row without a product code")
        if price is None and row.raw("unit_price") is None:
            errors.append(f"row {row.index}: catalog row without a price")
        if supplier and counterparty and supplier != counterparty:
            errors.append(f"row {row.index}: supplier {supplier!r} differs from counterparty {counterparty!r}")
        currency = None
        try:
            cells = [c for c in [row.raw("currency")] if c]
            currency = resolve_currency(cells, [price.currency] if price and price.currency else [])
        except ValueError as exc:
            errors.append(f"row {row.index}: {exc}")
        issued_on, valid_from, valid_to = row.date("issued_on"), row.date("valid_from"), row.date("valid_to")
        if valid_from and valid_to and valid_from > valid_to:
            errors.append(f"row {row.index}: valid_from {valid_from} is after valid_to {valid_to}")
        errors.extend(row.errors)
        if errors or code is None or price is None:
            issues.append(row_issue([row], errors, code))
            continue
        record = ParsedRecord(
            record_type="catalog_item", number=normalize_identifier(code) or code, row_numbers=(row.index,),
            supplier=supplier or counterparty, supplier_id=row.raw("supplier_id") or row.raw("counterparty_id"),
            issued_on=issued_on, currency=currency, status=row.raw("status"), unit_price=price.value,
            description=row.raw("description"), product_group=row.raw("product_group"),
            valid_from=valid_from, valid_to=valid_to, extras=row.extras(),
        )
        key = catalog_key(record)
        previous = records.get(key)
        if previous is None:
            records[key] = record
        elif replace(previous, row_numbers=()) == replace(record, row_numbers=()):
            records[key] = replace(previous, row_numbers=previous.row_numbers + record.row_numbers)
        else:
            first = previous.row_numbers[0]
            reason = f"row {row.index}: conflicts with row {first} for {record.number}"
            issues.append(row_issue([row], [reason], record.number))
    return list(records.values()), issues


def catalog_key(record: ParsedRecord) -> tuple[str, str, str]:
    """What identifies a catalog item within a table: product code, supplier, valid_from."""
    supplier = record.supplier or record.supplier_id or ""
    return record.number, supplier, record.valid_from.isoformat() if record.valid_from else ""



__all__ = ["catalog_key", "catalog_records"]
