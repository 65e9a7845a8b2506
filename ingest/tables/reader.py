"""Structured records (invoices, credit notes, orders, catalog items) from one table (pure).

Input is a table as rows of cells, header first: CSV and JSON files and tables inside documents
all arrive this way. Output (`TableRecords`) is validated `ParsedRecord`s plus `RowIssue`s for
everything that could not be accepted. Guarantees:

- **Nothing silently dropped, nothing guessed.** Values are exact (`values.py`); a row that cannot
  be read or a record that does not add up sends the *whole* record to review
  (`transactions.py`, `catalog.py`). Unmapped columns are kept verbatim in `attributes`. A table
  that is not record-like at all yields neither records nor issues.
- **Deterministic.** Records and issues come out in table order.

Columns map to canonical fields as `headers.py` describes. Record type: the `record_type`
column, else the number's prefix (INV → invoice, CN → credit_note, PO/ORD → order), else the
number column's header (`Invoice No` → invoice). A table without a number column but with
`product_code` and `unit_price` (and no quantity or amount) is a catalog (`catalog.py`). A line
table (product or description with quantity or amount) without a number column belongs to the
one record number the document names (`default_number`), else the whole table is one review
item. In a table without quantity, unit price and product columns, `amount` means the record
total. Blank rows and the header repeated after a page break are skipped; a row with more cells
than the header is a review item.
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
    ("order ", "order"), ("po ", "order"), ("purchase ", "order"),
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
    fields = map_header(header, column_map)
    columns: dict[str, list[int]] = {}
    for i, name in enumerate(fields):
        if name is not None:
            columns.setdefault(name, []).append(i)
    per_line = {"quantity", "unit_price", "product_code"}
    if "amount" in columns and "total" not in columns and not columns.keys() & per_line:
        columns["total"] = columns.pop("amount")  # a list of documents: "amount" is each one's total
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
        return TableRecords(header, False)
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


def _header_hint(header: tuple[str, ...], columns: dict[str, list[int]]) -> RecordType | None:
    for i in columns.get("number", ()):
        name = normalize_header(header[i]) + " "
        for prefix, record_type in _HEADER_HINTS:
            if name.startswith(prefix):
                return record_type
    return None


__all__ = ["records_from_table"]
