"""A validated record as read from a table, and the `BusinessRecord` artifact made from it (pure).

`build_record` keeps every value exactly: Decimals outside `lines`/`total` go to `attributes` as
exact strings (`decimal_text`), unmapped columns verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from manifold.ingest.tables.rows import RecordType, RowIssue
from manifold.ingest.tables.values import decimal_text
from manifold.shared.artifacts import BusinessRecord, Provenance, RecordLine
from manifold.shared.events import MetadataValue


@dataclass(frozen=True)
class ParsedLine:
    line_no: int
    product_code: str | None
    description: str | None
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal
    product_group: str | None = None
    extras: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedRecord:
    """A validated record before it gets its id and provenance (`build_record`)."""

    record_type: RecordType
    number: str
    row_numbers: tuple[int, ...]
    supplier: str | None = None
    supplier_id: str | None = None
    customer: str | None = None
    customer_id: str | None = None
    issued_on: date | None = None
    currency: str | None = None
    status: str | None = None
    total: Decimal | None = None
    tax: Decimal | None = None
    subtotal: Decimal | None = None
    unit_price: Decimal | None = None  # catalog items
    description: str | None = None  # catalog items
    product_group: str | None = None  # catalog items
    valid_from: date | None = None
    valid_to: date | None = None
    lines: tuple[ParsedLine, ...] = ()
    extras: dict[str, str] = field(default_factory=dict)
    status_stated: bool = True
    """False when the record's table has no status column at all (an accounts-payable export):
    stored as `attributes.status_column = "absent"`, which recognised spend counts as posted."""


@dataclass(frozen=True)
class TableRecords:
    """What one table yielded. `record_like` is False for a plain table (no records, no issues);
    then `skipped` says why its rows are not records (None only for a table without data rows)
    and `fields` names the record fields its header did match."""

    header: tuple[str, ...]
    record_like: bool
    records: tuple[ParsedRecord, ...] = ()
    issues: tuple[RowIssue, ...] = ()
    skipped: str | None = None
    fields: tuple[str, ...] = ()


def build_record(parsed: ParsedRecord, record_id: str, provenance: Provenance) -> BusinessRecord:
    """The `BusinessRecord` artifact for a parsed record. Decimals outside `lines`/`total` are kept in
    `attributes` as exact strings; unmapped columns are kept verbatim."""
    optional: dict[str, str | None] = {
        "customer_name": parsed.customer,
        "customer_id": parsed.customer_id,
        "tax": decimal_text(parsed.tax) if parsed.tax is not None else None,
        "subtotal": decimal_text(parsed.subtotal) if parsed.subtotal is not None else None,
        "unit_price": decimal_text(parsed.unit_price) if parsed.unit_price is not None else None,
        "description": parsed.description,
        "product_group": parsed.product_group,
        "valid_from": parsed.valid_from.isoformat() if parsed.valid_from else None,
        "valid_to": parsed.valid_to.isoformat() if parsed.valid_to else None,
        **{f"product_group#{line.line_no}": line.product_group for line in parsed.lines},
    }
    attributes: dict[str, MetadataValue] = {k: v for k, v in optional.items() if v is not None}
    if not parsed.status_stated:
        attributes["status_column"] = "absent"
    for key, value in parsed.extras.items():
        attributes[f"column:{key}" if key in attributes else key] = value
    return BusinessRecord(
        record_id=record_id,
        record_type=parsed.record_type,
        number=parsed.number,
        counterparty_id=parsed.supplier_id,
        counterparty_name=parsed.supplier,
        issued_on=parsed.issued_on,
        currency=parsed.currency,
        status=parsed.status,
        total=parsed.total,
        lines=[
            RecordLine(line_no=ln.line_no, product_code=ln.product_code, description=ln.description,
                       quantity=ln.quantity, unit_price=ln.unit_price, amount=ln.amount)
            for ln in parsed.lines
        ],
        attributes=dict(sorted(attributes.items())),
        provenance=provenance,
    )



__all__ = ["ParsedLine", "ParsedRecord", "TableRecords", "build_record"]
