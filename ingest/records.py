"""Structured records (invoices, credit notes, orders, catalog items) from table rows (pure).

Input is a table as rows of cells, header first: CSV and JSON files and tables inside documents
all arrive this way. Output is validated `ParsedRecord`s plus `RowIssue`s for everything that
could not be accepted. Guarantees:

- **Decimal only.** Money and quantities are parsed from the cell text into `Decimal`; no float
  is ever involved. `1,234.50`, `1.234,50`, `€ 1 234,50`, `(12.00)` (negative), `-12`, `12.00-`
  and `12.00 EUR` parse. A cell such as `1,234` or `1.234` is ambiguous and parses only when the
  same table shows its decimal mark unambiguously elsewhere; otherwise it is a review item.
- **Nothing silently dropped, nothing guessed.** A row that cannot be read, a line whose
  `amount` is not `quantity × unit_price` (±0.01), a `total` that is not exactly the sum of the
  line amounts (plus `tax` when given), mixed currencies, conflicting header values or an
  unknown record type sends the *whole* record to review (`RowIssue` with the reasons and the raw
  rows); a partial invoice is never emitted. Unmapped columns are kept verbatim in
  `attributes`. A table that is not record-like at all yields neither records nor issues.
- **Deterministic.** Records and issues come out in table order.

Canonical fields (source column → field: the operator's `record_column_map` first, matched
exactly or case/punctuation-insensitively, then the built-in `SYNONYMS`; map a column to
`ignore` to skip it on purpose):

| field | meaning | built-in synonyms (case and punctuation ignored) |
|---|---|---|
| record_type | invoice, credit_note, order (catalog_item only in catalog tables) | type, document type, doc type, record type, kind |
| number | invoice / credit-note / order number, normalised when it has a known prefix | number, no, doc no, document no, document number, reference, ref, invoice, invoice no, invoice number, invoice id, invoice num, inv no, credit note, credit note no, credit note number, cn no, order, order no, order number, order id, po, po no, po number, purchase order, purchase order no, purchase order number |
| counterparty | generic counterparty name (same as supplier) | counterparty, counterparty name, party |
| counterparty_id | its id | counterparty id |
| supplier | issuing supplier / vendor name | supplier, supplier name, vendor, vendor name, seller, issuer |
| supplier_id | its id (e.g. SUP-001) | supplier id, supplier no, supplier number, supplier code, vendor id, vendor no, vendor number, vendor code |
| customer | billed / ordering company name | customer, customer name, buyer, bill to, billed to, sold to, client |
| customer_id | its id | customer id, customer no, customer number, buyer id, client id |
| issued_on | document date | date, issued on, issue date, issued, invoice date, order date, document date, date issued, posting date, doc date, bill date, billing date, transaction date, txn date, invoice dt |
| currency | ISO 4217 code; symbols accepted | currency, currency code, ccy, cur, curr |
| status | free text | status, state, payment status |
| line_no | line number (else row order) | line, line no, line number, pos, position |
| product_code | product code / SKU (catalog: the number) | product code, product, product id, product no, product number, sku, item code, item no, item number, item id, part no, part number, article, article no, article number, material, code, catalog number, catalogue number |
| description | line text | description, desc, item description, product description, product name, item, item name, name, details, service |
| quantity | Decimal | quantity, qty, units, pcs, qty ordered, quantity ordered |
| unit_price | Decimal | unit price, price, unit cost, price per unit, rate, unit rate, each, list price, net price |
| amount | line amount, Decimal | amount, line total, line amount, extended price, ext price, net amount, line value, value |
| total | record total, Decimal | total, invoice total, grand total, total amount, amount due, total due, gross amount, order total |
| tax | record tax, Decimal | tax, vat, tax amount, vat amount, sales tax |
| subtotal | sum of lines, Decimal | subtotal, sub total, net total |
| product_group | product group / category | product group, group, category, product category, product line, product family, family |
| valid_from | validity start date | valid from, effective from, effective date, start date, from |
| valid_to | validity end date | valid to, valid until, effective to, end date, expiry date, expires, until, to |

Record type: the `record_type` column, else the number's prefix (INV → invoice, CN →
credit_note, PO/ORD → order), else the number column's header (`Invoice No` → invoice).
A table without a number column but with `product_code` and `unit_price` (and no quantity or
amount) is a catalog: one `catalog_item` per row, numbered by product code. A line table (product
or description with quantity or amount) without a number column belongs to the one record number
the document names (`default_number`), else the whole table is one review item. In a table without quantity, unit price and
product columns, `amount` means the record total. Summary rows (`Total`, `Subtotal`, `VAT 20%`
in any cell, no product, quantity or price) set the record's total, subtotal or tax. Without a
product code column, a description naming exactly one product code (`Sensor PRD-482`) gives it.
A missing line `amount` is derived as `quantity × unit_price`; every other missing value stays
missing or goes to review. Arithmetic runs in an exact context (`EXACT`): a result that would
need rounding is a review item, never a rounded number.
Dates: ISO (`2026-03-31`), numeric day-first (`31/03/2026`, month-first only when the table
proves it, e.g. `03/31/2026`), or with a month name (`Mar 31 2026`, `31 March 2026`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow
from functools import partial
from typing import Literal, TypeVar

from manifold.shared.artifacts import Provenance, Record, RecordLine
from manifold.shared.events import MetadataValue
from manifold.shared.identifiers import find_identifiers, identifier_kind, normalize_identifier

RecordType = Literal["invoice", "credit_note", "order", "catalog_item"]
DecimalMark = Literal[".", ","]
TOLERANCE = Decimal("0.01")
# Arithmetic on parsed values never rounds: a result needing rounding raises instead (→ review).
EXACT = Context(prec=200, traps=[Inexact, InvalidOperation, Overflow])
IGNORE = "ignore"
_T = TypeVar("_T")

CANONICAL_FIELDS: tuple[str, ...] = (
    "record_type", "number", "counterparty", "counterparty_id", "supplier", "supplier_id",
    "customer", "customer_id", "issued_on", "currency", "status", "line_no", "product_code",
    "description", "quantity", "unit_price", "amount", "total", "tax", "subtotal",
    "product_group", "valid_from", "valid_to",
)

_SYNONYM_TABLE: dict[str, str] = {
    "record_type": "type|document type|doc type|record type|kind",
    "number": "number|no|doc no|document no|document number|reference|ref|invoice|invoice no|"
              "invoice number|invoice id|invoice num|inv no|credit note|credit note no|"
              "credit note number|cn no|order|order no|order number|order id|po|po no|po number|"
              "purchase order|purchase order no|purchase order number",
    "supplier": "supplier|supplier name|vendor|vendor name|seller|issuer",
    "supplier_id": "supplier id|supplier no|supplier number|supplier code|vendor id|vendor no|"
                   "vendor number|vendor code",
    "counterparty": "counterparty|counterparty name|party",
    "counterparty_id": "counterparty id",
    "customer": "customer|customer name|buyer|bill to|billed to|sold to|client",
    "customer_id": "customer id|customer no|customer number|buyer id|client id",
    "issued_on": "date|issued on|issue date|issued|invoice date|order date|document date|date issued|"
                 "posting date|doc date|bill date|billing date|transaction date|txn date|invoice dt",
    "currency": "currency|currency code|ccy|cur|curr",
    "status": "status|state|payment status",
    "line_no": "line|line no|line number|pos|position",
    "product_code": "product code|product|product id|product no|product number|sku|item code|item no|"
                    "item number|item id|part no|part number|article|article no|article number|"
                    "material|code|catalog number|catalogue number",
    "description": "description|desc|item description|product description|product name|item|"
                   "item name|name|details|service",
    "quantity": "quantity|qty|units|pcs|qty ordered|quantity ordered",
    "unit_price": "unit price|price|unit cost|price per unit|rate|unit rate|each|list price|net price",
    "amount": "amount|line total|line amount|extended price|ext price|net amount|line value|value",
    "total": "total|invoice total|grand total|total amount|amount due|total due|gross amount|order total",
    "tax": "tax|vat|tax amount|vat amount|sales tax",
    "subtotal": "subtotal|sub total|net total",
    "product_group": "product group|group|category|product category|product line|product family|family",
    "valid_from": "valid from|effective from|effective date|start date|from",
    "valid_to": "valid to|valid until|effective to|end date|expiry date|expires|until|to",
}
SYNONYMS: dict[str, str] = {s: f for f, names in _SYNONYM_TABLE.items() for s in names.split("|")}

_TYPE_VALUES: dict[str, RecordType] = {
    **dict.fromkeys(("invoice", "inv", "bill"), "invoice"),
    **dict.fromkeys(("credit note", "credit", "creditnote", "cn", "credit memo"), "credit_note"),
    **dict.fromkeys(("order", "purchase order", "po", "ord", "sales order"), "order"),
    **dict.fromkeys(("catalog", "catalog item", "catalogue", "price list"), "catalog_item"),
}
_KIND_TYPES: dict[str, RecordType] = {"invoice": "invoice", "credit_note": "credit_note", "order": "order"}
_HEADER_HINTS: tuple[tuple[str, RecordType], ...] = (
    ("invoice ", "invoice"), ("inv ", "invoice"), ("credit ", "credit_note"), ("cn ", "credit_note"),
    ("order ", "order"), ("po ", "order"), ("purchase ", "order"),
)
_MONEY_FIELDS = ("unit_price", "amount", "total", "tax", "subtotal")
_DATE_FIELDS = ("issued_on", "valid_from", "valid_to")
_TEXT_FIELDS = ("record_type", "supplier", "supplier_id", "counterparty", "counterparty_id", "customer",
                "customer_id", "status")
_LINE_FIELDS = ("line_no", "product_code", "description", "quantity", "unit_price", "amount", "product_group")
_SUMMARY = re.compile(r"^(?:(?P<total>(?:grand\s+)?total(?:\s+(?:due|amount))?|amount\s+due|balance\s+due)"
                      r"|(?P<subtotal>sub-?\s*total|net\s+total)"
                      r"|(?P<tax>(?:vat|tax|sales\s+tax)(?:\s*\(?\s*\d+(?:[.,]\d+)?\s*%\s*\)?)?))\s*:?$",
                      re.IGNORECASE)

# ---- values: Decimal, currency and date parsing (never float) ---------------------------------

ISO_4217: frozenset[str] = frozenset(
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP "
    "BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP "
    "GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR "
    "KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK "
    "MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR "
    "SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS "
    "UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG".split()
)
# symbol -> the currencies it can mean; the first is used when nothing else in the record says
# which, except where the symbol is marked ambiguous (None).
_SYMBOLS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "€": (("EUR",), "EUR"), "£": (("GBP",), "GBP"), "₹": (("INR",), "INR"), "₩": (("KRW",), "KRW"),
    "₺": (("TRY",), "TRY"), "₪": (("ILS",), "ILS"), "zł": (("PLN",), "PLN"), "US$": (("USD",), "USD"),
    "C$": (("CAD",), "CAD"), "CA$": (("CAD",), "CAD"), "A$": (("AUD",), "AUD"), "AU$": (("AUD",), "AUD"),
    "NZ$": (("NZD",), "NZD"), "HK$": (("HKD",), "HKD"), "S$": (("SGD",), "SGD"), "R$": (("BRL",), "BRL"),
    "$": (("USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"), "USD"),
    "¥": (("JPY", "CNY"), None), "kr": (("SEK", "NOK", "DKK", "ISK"), None),
}
_MONEY = re.compile(
    r"^(?P<pre>[^\d\s+\-−(]+)?\s*(?P<sign>[+\-−])?\s*(?P<pre2>[^\d\s+\-−]+)?\s*"
    r"(?P<num>\d(?:[\d.,'\s\u00a0\u202f]*\d)?)\s*(?P<tsign>-)?\s*(?P<post>[^\d\s]+)?$"
)
_GROUPING = re.compile(r"[\s'\u00a0\u202f]")
_NUMERIC_DATE = re.compile(r"^(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{4})$")
_ISO_DATE = re.compile(r"^(\d{4})[/.\-](\d{1,2})[/.\-](\d{1,2})(?:[T ][\d:.,+\-Z]*)?$")
_MONTH_FIRST = re.compile(r"^(?:[A-Za-z]+,?\s+)?([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$")
_DAY_FIRST = re.compile(r"^(?:[A-Za-z]+,?\s+)?(\d{1,2})(?:st|nd|rd|th)?[\s\-]+([A-Za-z]{3,9})\.?,?[\s\-]+(\d{4})$")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")


@dataclass(frozen=True)
class Money:
    """A parsed amount and the currency token written in the cell (ISO code or symbol)."""

    value: Decimal
    currency: str | None = None


def _split_money(raw: str) -> tuple[bool, str | None, str]:
    """(negative, currency token, digits) of a money cell, or ValueError."""
    text = raw.strip()
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    match = _MONEY.match(text)
    if match is None:
        raise ValueError("not a number")
    tokens = {t for t in (match["pre"], match["pre2"], match["post"]) if t}
    if len(tokens) > 1:
        raise ValueError(f"unexpected text {' '.join(sorted(tokens))!r}")
    token = next(iter(tokens), None)
    if token is not None and token not in _SYMBOLS and token.upper() not in ISO_4217:
        raise ValueError(f"unexpected text {token!r}")
    if token is not None and token.upper() in ISO_4217:
        token = token.upper()
    signs = [s for s in (match["sign"], match["tsign"]) if s]
    if len(signs) + negative > 1:
        raise ValueError("more than one sign")
    negative = negative or any(s in "-−" for s in signs)
    return negative, token, match["num"]


def _digits(body: str, mark: DecimalMark | None) -> Decimal:
    if _GROUPING.search(body):
        if not re.fullmatch(r"\d{1,3}(?:[\s'\u00a0\u202f]\d{3})+(?:[.,]\d+)?", body):
            raise ValueError("digits are grouped irregularly")
        body = _GROUPING.sub("", body)
    dots, commas = body.count("."), body.count(",")
    if dots and commas:
        dec = "." if body.rfind(".") > body.rfind(",") else ","
        grp = "," if dec == "." else "."
        if not re.fullmatch(rf"\d{{1,3}}(?:{re.escape(grp)}\d{{3}})+{re.escape(dec)}\d+", body):
            raise ValueError("mixes '.' and ',' irregularly")
        return Decimal(body.replace(grp, "").replace(dec, "."))
    if not dots and not commas:
        return Decimal(body)
    sep = "." if dots else ","
    if dots + commas > 1:
        if not re.fullmatch(rf"\d{{1,3}}(?:{re.escape(sep)}\d{{3}})+", body):
            raise ValueError("digits are grouped irregularly")
        return Decimal(body.replace(sep, ""))
    whole, frac = body.split(sep)
    if len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0"):
        if mark is None:
            raise ValueError(f"ambiguous: {sep!r} may be a decimal mark or a thousands separator")
        if mark != sep:
            return Decimal(whole + frac)
    return Decimal(f"{whole}.{frac}")


def _mark_evidence(raw: str) -> DecimalMark | None:
    """The decimal mark a cell proves (`1,234.50` proves '.'; `12,5` proves ','), if any."""
    try:
        body = _GROUPING.sub("", _split_money(raw)[2])
    except ValueError:
        return None
    dots, commas = body.count("."), body.count(",")
    if dots and commas:
        return "." if body.rfind(".") > body.rfind(",") else ","
    if dots + commas > 1:
        return "," if dots else "."
    if dots + commas == 1:
        sep: DecimalMark = "." if dots else ","
        whole, frac = body.split(sep)
        if not (len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0")):
            return sep
    return None


def parse_money(raw: str, mark: DecimalMark | None = None) -> Money:
    """An exact Decimal amount (and the currency token in the cell); ValueError if unreadable.

    `mark` settles cells like `1,234` whose decimal mark is ambiguous; without it they fail.
    """
    negative, token, body = _split_money(raw)
    value = _digits(body, mark)
    return Money(value.copy_negate() if negative else value, token)


def parse_decimal(raw: str, mark: DecimalMark | None = None) -> Decimal:
    """An exact Decimal quantity; a currency in the cell is an error."""
    money = parse_money(raw, mark)
    if money.currency is not None:
        raise ValueError(f"unexpected currency {money.currency!r}")
    return money.value


def parse_date(raw: str, *, day_first: bool | None = True) -> date:
    """A date from ISO, numeric (`day_first`; None: only unambiguous ones) or month-name text."""
    text = " ".join(raw.split())
    if m := _ISO_DATE.match(text):
        return date(int(m[1]), int(m[2]), int(m[3]))
    if m := _NUMERIC_DATE.match(text):
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        if a > 12 or (b <= 12 and day_first):
            return date(year, b, a)
        if b > 12 or day_first is False:
            return date(year, a, b)
        raise ValueError("ambiguous day/month order")
    if m := _MONTH_FIRST.match(text):
        return date(int(m[3]), _month(m[1]), int(m[2]))
    if m := _DAY_FIRST.match(text):
        return date(int(m[3]), _month(m[2]), int(m[1]))
    raise ValueError("not a date")


def _month(name: str) -> int:
    low = name.casefold()
    for number, month in enumerate(_MONTHS, start=1):
        if len(low) >= 3 and month.startswith(low):
            return number
    raise ValueError(f"unknown month {name!r}")


def scan_conventions(numbers: Sequence[str], dates: Sequence[str]) -> tuple[DecimalMark | None, bool | None]:
    """The decimal mark and day-first rule a table proves by its unambiguous cells.

    Conflicting evidence gives None (ambiguous cells then go to review); no date evidence gives
    day-first.
    """
    marks = {mark for cell in numbers if cell and (mark := _mark_evidence(cell))}
    orders = set()
    for cell in dates:
        if m := _NUMERIC_DATE.match(cell.strip()):
            if int(m[1]) > 12:
                orders.add(True)
            elif int(m[2]) > 12:
                orders.add(False)
    return (next(iter(marks)) if len(marks) == 1 else None,
            True if not orders else (next(iter(orders)) if len(orders) == 1 else None))


def currency_code(raw: str) -> str | None:
    """The ISO code a currency cell or symbol names unambiguously, else None."""
    text = raw.strip()
    if text.upper() in ISO_4217:
        return text.upper()
    candidates = _SYMBOLS.get(text)
    return candidates[0][0] if candidates and len(candidates[0]) == 1 else None


def resolve_currency(columns: Sequence[str], tokens: Sequence[str]) -> str | None:
    """The one currency of a record from its currency cells and the symbols in its amounts.

    ValueError for an unknown code, mixed currencies, or an ambiguous symbol (`¥`, `kr`) that
    nothing else in the record settles. A bare `$` is USD unless the record names another
    dollar currency.
    """
    codes: set[str] = set()
    loose: set[str] = set()
    for value in [*columns, *tokens]:
        code = currency_code(value)
        if code is not None:
            codes.add(code)
        elif value.strip() in _SYMBOLS:
            loose.add(value.strip())
        else:
            raise ValueError(f"unknown currency {value!r}")
    if len(codes) > 1:
        raise ValueError(f"mixed currencies: {', '.join(sorted(codes))}")
    for symbol in sorted(loose):
        candidates, default = _SYMBOLS[symbol]
        if codes and not codes & set(candidates):
            raise ValueError(f"mixed currencies: {next(iter(codes))} and {symbol!r}")
        if not codes:
            if default is None:
                raise ValueError(f"ambiguous currency symbol {symbol!r}: add a currency column")
            codes.add(default)
    return next(iter(codes), None)


# ---- tables ----------------------------------------------------------------------------------


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def normalize_header(text: str) -> str:
    """`"Invoice No."` → `"invoice no"`, `"unit_price"` → `"unit price"`, and JSON-style keys
    split at case changes: `"orderNumber"` → `"order number"`, `"PONumber"` → `"po number"`."""
    return " ".join(re.sub(r"[^\w]+|_", " ", _CAMEL.sub(" ", text).casefold()).split())


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


@dataclass(frozen=True)
class TableRecords:
    """What one table yielded. `record_like` is False for a plain table (no records, no issues)."""

    header: tuple[str, ...]
    record_like: bool
    records: tuple[ParsedRecord, ...] = ()
    issues: tuple[RowIssue, ...] = ()


def map_header(header: Sequence[str], column_map: Mapping[str, str] | None = None) -> list[str | None]:
    """The canonical field of each column (None when unmapped); the operator map wins over the
    synonyms. Raises ValueError for a map entry naming an unknown field."""
    exact = {k.strip(): v for k, v in (column_map or {}).items()}
    for target in exact.values():
        if target not in CANONICAL_FIELDS and target != IGNORE:
            raise ValueError(f"record_column_map targets unknown field {target!r}")
    loose = {normalize_header(k): v for k, v in exact.items()}
    fields: list[str | None] = []
    for cell in header:
        name = normalize_header(cell)
        found = exact.get(cell.strip()) or loose.get(name) or SYNONYMS.get(name)
        fields.append(None if found == IGNORE else found)
    return fields


@dataclass
class _Table:
    header: tuple[str, ...]
    columns: dict[str, list[int]]
    unmapped: list[int]
    mark: DecimalMark | None = None
    day_first: bool | None = True
    hint: RecordType | None = None


class _Row:
    """One data row read through the header mapping; collects problems instead of raising."""

    def __init__(self, table: _Table, index: int, cells: list[str]) -> None:
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
    table = _Table(header, columns, unmapped)
    body, issues = _body(rows, header)
    table.mark, table.day_first = scan_conventions(
        [cells[i] for _, cells in body for f in (*_MONEY_FIELDS, "quantity") for i in columns.get(f, ())],
        [cells[i] for _, cells in body for f in _DATE_FIELDS for i in columns.get(f, ())],
    )
    table.hint = _header_hint(header, columns)
    parsed = [_Row(table, n, cells) for n, cells in body]
    records, more = _transactional(table, parsed, default_number) if transactional else _catalog(parsed)
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


def _number(row: _Row) -> str | None:
    raw = row.raw("number")
    return None if raw is None else (normalize_identifier(raw) or raw)


def _transactional(table: _Table, rows: list[_Row], default: str | None) -> tuple[list[ParsedRecord], list[RowIssue]]:
    numbers = sorted({n for row in rows if (n := _number(row)) is not None})
    fallback = numbers[0] if len(numbers) == 1 else (default if not numbers and "number" not in table.columns else None)
    if fallback is not None:
        fallback = normalize_identifier(fallback) or fallback
    groups: dict[str, list[_Row]] = {}
    issues: list[RowIssue] = []
    for row in rows:
        number = _number(row) or fallback
        if number is None:
            reason = f"row {row.index}: no record number, and the table names several"
            issues.append(_issue([row], [*row.errors, reason]))
        else:
            groups.setdefault(number, []).append(row)
    records: list[ParsedRecord] = []
    for number, group in groups.items():
        built = _build_transactional(table, number, group)
        (issues if isinstance(built, RowIssue) else records).append(built)  # type: ignore[arg-type]
    return records, issues


def _one(rows: list[_Row], name: str, read: Callable[[_Row], _T | None], errors: list[str]) -> _T | None:
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


def _labels(row: _Row) -> dict[int, str]:
    """Cells of a summary row such as `| | Total | 59.97 |`: column -> 'total'/'subtotal'/'tax'."""
    found = {}
    for i, cell in enumerate(row.cells):
        if cell and (match := _SUMMARY.match(cell)):
            found[i] = next(k for k, v in match.groupdict().items() if v)
    return found


def _summary_kind(row: _Row) -> str | None:
    labels = _labels(row)
    if not labels:
        return None
    for name in ("product_code", "quantity", "unit_price"):
        if any(row.cells[i] for i in row.table.columns.get(name, ()) if i not in labels):
            return None
    return next(iter(labels.values()))


def _summary_value(row: _Row) -> Money | None:
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


def _build_transactional(table: _Table, number: str, rows: list[_Row]) -> ParsedRecord | RowIssue:
    errors: list[str] = []
    line_rows: list[_Row] = []
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
        name: _one(rows, name, partial(_Row.raw, name=name), errors) for name in _TEXT_FIELDS
    }
    dates: dict[str, date | None] = {
        name: _one(rows, name, partial(_Row.date, name=name), errors) for name in _DATE_FIELDS
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
    supplier, counterparty = text["supplier"], text["counterparty"]
    if supplier and counterparty and supplier != counterparty:
        errors.append(f"supplier {supplier!r} differs from counterparty {counterparty!r}")
    errors.extend(e for row in rows for e in row.errors)
    if errors or record_type is None:
        return _issue(rows, errors, number)
    return ParsedRecord(
        record_type=record_type, number=number, row_numbers=tuple(r.index for r in rows),
        supplier=supplier or counterparty, supplier_id=text["supplier_id"] or text["counterparty_id"],
        customer=text["customer"], customer_id=text["customer_id"], issued_on=dates["issued_on"],
        currency=currency, status=text["status"], total=total, tax=tax, subtotal=subtotal,
        valid_from=dates["valid_from"], valid_to=dates["valid_to"], lines=tuple(lines),
        extras=_record_extras(rows, lines),
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
        from_column = _TYPE_VALUES.get(normalize_header(column))
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


def _lines(rows: list[_Row], errors: list[str]) -> tuple[list[ParsedLine], list[Money]]:
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


def _code_in(description: str | None, table: _Table) -> str | None:
    """The product code written in a line description, when the table has no code column and
    the description names exactly one (`"Sensor PRD-482"`)."""
    if description is None or "product_code" in table.columns:
        return None
    codes = [c for c in find_identifiers(description) if identifier_kind(c) == "product"]
    return codes[0] if len(codes) == 1 else None


def _record_extras(rows: list[_Row], lines: list[ParsedLine]) -> dict[str, str]:
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


def _catalog(rows: list[_Row]) -> tuple[list[ParsedRecord], list[RowIssue]]:
    records: dict[tuple[str, str, str], ParsedRecord] = {}
    issues: list[RowIssue] = []
    for row in rows:
        errors: list[str] = []
        code, price = row.raw("product_code"), row.money("unit_price")
        supplier, counterparty = row.raw("supplier"), row.raw("counterparty")
        kind = row.raw("record_type")
        if kind and _TYPE_VALUES.get(normalize_header(kind)) != "catalog_item":
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
            issues.append(_issue([row], errors, code))
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
            issues.append(_issue([row], [reason], record.number))
    return list(records.values()), issues


def catalog_key(record: ParsedRecord) -> tuple[str, str, str]:
    """What identifies a catalog item within a table: product code, supplier, valid_from."""
    supplier = record.supplier or record.supplier_id or ""
    return record.number, supplier, record.valid_from.isoformat() if record.valid_from else ""


def _issue(rows: list[_Row], reasons: list[str], number: str | None = None) -> RowIssue:
    unique = tuple(dict.fromkeys(reasons)) or ("row could not be read",)
    return RowIssue(unique, tuple(r.index for r in rows), tuple(tuple(r.cells) for r in rows), number)


def exact_sum(values: Iterable[Decimal]) -> Decimal:
    """The exact sum (raises `decimal.Inexact` rather than round)."""
    total = Decimal(0)
    for value in values:
        total = EXACT.add(total, value)
    return total


def decimal_text(value: Decimal) -> str:
    """A Decimal as an exact plain string (`59.97`, never `5.997E+1`)."""
    return format(value, "f")


def build_record(parsed: ParsedRecord, record_id: str, provenance: Provenance) -> Record:
    """The `Record` artifact for a parsed record. Decimals outside `lines`/`total` are kept in
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
    for key, value in parsed.extras.items():
        attributes[f"column:{key}" if key in attributes else key] = value
    return Record(
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


__all__ = [
    "CANONICAL_FIELDS",
    "ISO_4217",
    "SYNONYMS",
    "TOLERANCE",
    "Money",
    "ParsedLine",
    "ParsedRecord",
    "RowIssue",
    "TableRecords",
    "build_record",
    "catalog_key",
    "currency_code",
    "decimal_text",
    "exact_sum",
    "map_header",
    "normalize_header",
    "parse_date",
    "parse_decimal",
    "parse_money",
    "records_from_table",
    "resolve_currency",
    "scan_conventions",
]
