"""Structured records (invoices, credit notes, orders, catalog items) from one table (pure).

Input is a table as rows of cells, header first: CSV and JSON files and tables inside documents
all arrive this way. Output (`TableRecords`) is validated `ParsedRecord`s plus `RowIssue`s for
everything that could not be accepted. Guarantees:

- **Nothing silently dropped, nothing guessed.** Values are exact (`values.py`); a row that cannot
  be read or a record that does not add up sends the *whole* record to review
  (`transactions.py`, `catalog.py`). Unmapped columns are kept verbatim in `attributes`. A table
  that is not record-like at all yields neither records nor issues.
- **Deterministic.** Records and issues come out in table order.

Columns map to canonical fields as `headers.py` describes, then the header is disambiguated
(`_disambiguate`): several number columns naming different kinds (`Invoice No`, `PO Number`) keep
the credit-note, else the invoice one as the record number and the others as attributes; several date
columns (`Invoice Date`, `Posting Date`, `Due Date`) keep the document date; `Vendor` beside
`Vendor Name` is the vendor's id. Record type: the `record_type` column, else the number's prefix
(INV → invoice, CN → credit_note, PO/ORD → order), else the number column's header (`Invoice No`
→ invoice), else the one kind the other headers name (`Invoice Date`, `Bill Amount` → invoice;
`Order Date` → order), so an accounts-payable export without a type column is invoices. A table
without a number column but with `product_code` and `unit_price` (and no quantity or amount) is a
catalog (`catalog.py`). A line
table (product or description with quantity or amount) without a number column belongs to the
one record number the document names (`default_number`), else the whole table is one review
item. In a table without quantity, unit price and product columns, `amount` means the record
total, and beside a `total` column it is the subtotal (net, tax, gross). Blank rows and the header
repeated after a page break are skipped; a row with more cells than the header is a review item.
A table that is not record-like says why in `TableRecords.skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from manifold.ingest.tables.catalog import catalog_records
from manifold.ingest.tables.headers import DATE_FIELDS, MONEY_FIELDS, map_header, normalize_header
from manifold.ingest.tables.parsed import TableRecords
from manifold.ingest.tables.rows import RecordType, Row, RowIssue, TableLayout
from manifold.ingest.tables.transactions import transactional_records
from manifold.ingest.tables.values import scan_conventions

_HEADER_HINTS: tuple[tuple[str, RecordType], ...] = (
    ("invoice ", "invoice"), ("inv ", "invoice"), ("credit ", "credit_note"), ("cn ", "credit_note"),
    ("order ", "order"), ("po ", "order"), ("purchase ", "order"), ("bill ", "invoice"),
)


def records_from_table(
    rows: Sequence[Sequence[str]],
    column_map: Mapping[str, str] | None = None,
    *,
    default_number: str | None = None,
) -> TableRecords:
    """Records and issues from one table (header first), in table order.

    `default_number` is the one record number the surrounding document names; it is used only
    for line rows of a table that has no number column. Raises ValueError only for an invalid
    `column_map` (a configuration error, not a data error).
    """
    if len(rows) < 2:
        return TableRecords(tuple(" ".join(c.split()) for c in rows[0]) if rows else (), False)
    header = tuple(" ".join(str(c).split()) for c in rows[0])
    fields = _disambiguate(header, map_header(header, column_map))
    columns: dict[str, list[int]] = {}
    for i, name in enumerate(fields):
        if name is not None:
            columns.setdefault(name, []).append(i)
    per_line = {"quantity", "unit_price", "product_code"}
    if "amount" in columns and not columns.keys() & per_line:  # a list of documents, one per row
        if "total" not in columns:
            columns["total"] = columns.pop("amount")  # "amount" is each one's total
        elif "subtotal" not in columns:
            columns["subtotal"] = columns.pop("amount")  # net amount beside the gross total
    present = set(columns)
    line_table = "number" not in present and bool(present & {"quantity", "amount"}) and bool(
        present & {"product_code", "description"})
    transactional = ("number" in present and len(present) >= 2) or (line_table and default_number is not None)
    catalog = "number" not in present and not line_table and {"product_code", "unit_price"} <= present
    if line_table and not transactional:
        reason = "line items without a record number (no number column, and the document names none or several)"
        cells = tuple(tuple(" ".join(str(c).split()) for c in row) for row in rows[1:])
        return TableRecords(header, True, (), (RowIssue((reason,), tuple(range(1, len(rows))), cells),))
    if not (transactional or catalog):
        return TableRecords(header, False, skipped=_why_not(header, present), fields=tuple(sorted(present)))
    unmapped = [i for i, (h, f) in enumerate(zip(header, fields, strict=True)) if f is None and h]
    table = TableLayout(header, columns, unmapped)
    body, issues = _body(rows, header)
    table.mark, table.day_first = scan_conventions(
        [cells[i] for _, cells in body for f in (*MONEY_FIELDS, "quantity") for i in columns.get(f, ())],
        [cells[i] for _, cells in body for f in DATE_FIELDS for i in columns.get(f, ())],
    )
    table.hint = _header_hint(header, columns)
    parsed = [Row(table, n, cells) for n, cells in body]
    records, more = transactional_records(table, parsed, default_number) if transactional else catalog_records(parsed)
    found = sorted([*issues, *more], key=lambda issue: issue.row_numbers)
    return TableRecords(header, True, tuple(records), tuple(found))


def _body(rows: Sequence[Sequence[str]], header: tuple[str, ...]) -> tuple[list[tuple[int, list[str]]], list[RowIssue]]:
    body: list[tuple[int, list[str]]] = []
    issues: list[RowIssue] = []
    for n, row in enumerate(rows[1:], start=1):
        cells = [" ".join(str(c).split()) for c in row]
        if not any(cells) or tuple(cells) == header:
            continue  # a blank line or the header repeated after a page break
        if len(cells) > len(header) and any(cells[len(header):]):
            reason = f"row {n} has {len(cells)} cells but the header has {len(header)}"
            issues.append(RowIssue((reason,), (n,), (tuple(cells),)))
            continue
        body.append((n, (cells + [""] * len(header))[: len(header)]))
    return body, issues


def _kind_of(header_cell: str) -> RecordType | None:
    """The record kind a header starts with: `Invoice Date` → invoice, `PO Number` → order."""
    name = normalize_header(header_cell) + " "
    return next((record_type for prefix, record_type in _HEADER_HINTS if name.startswith(prefix)), None)


def _header_hint(header: tuple[str, ...], columns: dict[str, list[int]]) -> RecordType | None:
    """The number column's kind, else the one kind all other headers that name one agree on."""
    for i in columns.get("number", ()):
        if (kind := _kind_of(header[i])) is not None:
            return kind
    kinds = {kind for cell in header if (kind := _kind_of(cell)) is not None}
    return kinds.pop() if len(kinds) == 1 else None


def _disambiguate(header: tuple[str, ...], fields: list[str | None]) -> list[str | None]:
    """Columns that matched one field but hold different facts, told apart (module docstring)."""
    fields = list(fields)
    numbers = [i for i, f in enumerate(fields) if f == "number"]
    kinds = {i: _kind_of(header[i]) for i in numbers}
    named = {k for k in kinds.values() if k is not None}
    if len(named) > 1:  # invoices list their orders, credit notes their invoices: those are references
        keep = next(k for k in ("credit_note", "invoice", "order") if k in named)
        for i, kind in kinds.items():
            if kind is not None and kind != keep:
                fields[i] = None
    dates = [i for i, f in enumerate(fields) if f == "issued_on"]
    if len(dates) > 1:
        rank = {i: _date_rank(header[i]) for i in dates}
        best = min(rank.values())
        for i in dates:
            if rank[i] > best:
                fields[i] = None
    for name, id_field in (("supplier", "supplier_id"), ("customer", "customer_id"),
                           ("counterparty", "counterparty_id")):
        same = [i for i, f in enumerate(fields) if f == name]
        if len(same) == 2 and id_field not in fields:
            a, b = (normalize_header(header[i]) for i in same)
            if b == f"{a} name" or a == f"{b} name":
                fields[same[0] if b == f"{a} name" else same[1]] = id_field  # `Vendor` beside `Vendor Name`
    return fields


def _date_rank(header_cell: str) -> int:
    """0 the document's own date (`Invoice Date`, `Document Date`, `Issue Date`), 1 a bare `Date`,
    2 a booking date (`Posting Date`, `Transaction Date`, `Billing Date`)."""
    name = normalize_header(header_cell)
    if name == "date":
        return 1
    if any(word in name.split() for word in ("posting", "transaction", "txn", "billing", "booking")):
        return 2
    return 0


def _why_not(header: tuple[str, ...], present: set[str]) -> str:
    """Why a table's rows are not records, naming what its header lacks."""
    if not present:
        return f"no column is a record field (header: {', '.join(h for h in header if h)})"
    found = ", ".join(sorted(present))
    if "number" in present:
        return (f"only a record number column was recognised ({found}); a record also needs a party, "
                "a date or an amount")
    if not present & {"amount", "total", "unit_price", "subtotal", "tax"}:
        return (f"no record number column and no amount column (recognised: {found}); not invoices, "
                "orders, credit notes or a catalog")
    return (f"no record number column (invoice, order or credit-note number; recognised: {found}), "
            "and not a catalog (product code with unit price)")


__all__ = ["records_from_table"]
