"""Data rows of a record table read through its header mapping, and the issues they raise (pure).

A `Row` reads a cell as text, money, a Decimal or a date under the table's conventions
(`TableLayout`: decimal mark, day-first) and collects every problem in `errors` instead of
raising; conflicting cells mapped to one field are a problem, never a choice. `RowIssue` is what
goes to review: every reason found and the raw rows, nothing dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Literal, TypeVar

from manifold.ingest.tables.values import DecimalMark, Money, parse_date, parse_decimal, parse_money

RecordType = Literal["invoice", "credit_note", "order", "catalog_item"]
_T = TypeVar("_T")

TYPE_VALUES: dict[str, RecordType] = {
    **dict.fromkeys(("invoice", "inv", "bill"), "invoice"),
    **dict.fromkeys(("credit note", "credit", "creditnote", "cn", "credit memo"), "credit_note"),
    **dict.fromkeys(("order", "purchase order", "po", "ord", "sales order"), "order"),
    **dict.fromkeys(("catalog", "catalog item", "catalogue", "price list"), "catalog_item"),
}
"""Record-type cell values (normalised) → the record type they name."""


@dataclass(frozen=True)
class RowIssue:
    """Rows that could not become a record, with every reason found (for a ReviewItem)."""

    reasons: tuple[str, ...]
    row_numbers: tuple[int, ...]
    rows: tuple[tuple[str, ...], ...]
    number: str | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


@dataclass
class TableLayout:
    header: tuple[str, ...]
    columns: dict[str, list[int]]
    unmapped: list[int]
    mark: DecimalMark | None = None
    day_first: bool | None = True
    hint: RecordType | None = None


class Row:
    """One data row read through the header mapping; collects problems instead of raising."""

    def __init__(self, table: TableLayout, index: int, cells: list[str]) -> None:
        self.table, self.index, self.cells = table, index, cells
        self.errors: list[str] = []
        self._cache: dict[tuple[str, str], object] = {}

    def _read(self, kind: str, name: str, parse: Callable[[str], _T]) -> _T | None:
        if (kind, name) in self._cache:
            return self._cache[(kind, name)]  # type: ignore[return-value]
        raw = self.raw(name)
        value: _T | None = None
        if raw is not None:
            try:
                value = parse(raw)
            except ValueError as exc:
                self.errors.append(f"row {self.index}: {name} {raw!r}: {exc}")
        self._cache[(kind, name)] = value
        return value

    def raw(self, name: str) -> str | None:
        values = sorted({self.cells[i] for i in self.table.columns.get(name, ()) if self.cells[i]})
        if len(values) > 1:
            message = f"row {self.index}: conflicting {name} cells: {', '.join(values)}"
            if message not in self.errors:
                self.errors.append(message)
            return None
        return values[0] if values else None

    def money(self, name: str) -> Money | None:
        return self._read("money", name, lambda raw: parse_money(raw, self.table.mark))

    def decimal(self, name: str) -> Decimal | None:
        return self._read("decimal", name, lambda raw: parse_decimal(raw, self.table.mark))

    def date(self, name: str) -> date | None:
        return self._read("date", name, lambda raw: parse_date(raw, day_first=self.table.day_first))

    def extras(self) -> dict[str, str]:
        return {self.table.header[i]: self.cells[i] for i in self.table.unmapped if self.cells[i]}


def row_issue(rows: list[Row], reasons: list[str], number: str | None = None) -> RowIssue:
    unique = tuple(dict.fromkeys(reasons)) or ("row could not be read",)
    return RowIssue(unique, tuple(r.index for r in rows), tuple(tuple(r.cells) for r in rows), number)



__all__ = ["TYPE_VALUES", "RecordType", "Row", "RowIssue", "TableLayout", "row_issue"]
