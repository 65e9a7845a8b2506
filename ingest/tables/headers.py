"""Table headers → canonical record fields (pure).

Canonical fields (source column → field: the operator's `record_column_map` first, matched
exactly or case/punctuation-insensitively, then the built-in `SYNONYMS`; map a column to
`ignore` to skip it on purpose):

| field | meaning | built-in synonyms (case and punctuation ignored) |
|---|---|---|
| record_type | invoice, credit_note, order (catalog_item only in catalog tables) | type, document type, doc type, record type, kind |
| number | invoice / credit-note / order number, normalised when it has a known prefix | number, no, doc no, document no, document number, reference, ref, invoice, invoice no, invoice number, invoice id, invoice num, inv no, inv number, invoice ref, invoice reference, bill no, bill number, credit note, credit note no, credit note number, cn no, order, order no, order number, order id, po, po no, po number, purchase order, purchase order no, purchase order number |
| counterparty | generic counterparty name (same as supplier) | counterparty, counterparty name, party |
| counterparty_id | its id | counterparty id |
| supplier | issuing supplier / vendor name | supplier, supplier name, vendor, vendor name, seller, issuer, payee, payee name, creditor, creditor name |
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
| total | record total, Decimal | total, invoice total, grand total, total amount, amount due, total due, gross amount, order total, gross, gross total, invoice amount, invoice value, bill amount, order amount |
| tax | record tax, Decimal | tax, vat, tax amount, vat amount, sales tax |
| subtotal | sum of lines, Decimal | subtotal, sub total, net total |
| product_group | product group / category | product group, group, category, product category, product line, product family, family |
| valid_from | validity start date | valid from, effective from, effective date, start date, from |
| valid_to | validity end date | valid to, valid until, effective to, end date, expiry date, expires, until, to |

`map_header` returns the field of each column (None when unmapped: such columns are kept
verbatim in the record's attributes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

IGNORE = "ignore"

CANONICAL_FIELDS: tuple[str, ...] = (
    "record_type", "number", "counterparty", "counterparty_id", "supplier", "supplier_id",
    "customer", "customer_id", "issued_on", "currency", "status", "line_no", "product_code",
    "description", "quantity", "unit_price", "amount", "total", "tax", "subtotal",
    "product_group", "valid_from", "valid_to",
)

_SYNONYM_TABLE: dict[str, str] = {
    "record_type": "type|document type|doc type|record type|kind",
    "number": "number|no|doc no|document no|document number|reference|ref|invoice|invoice no|"
              "invoice number|invoice id|invoice num|inv no|inv number|invoice ref|invoice reference|"
              "bill no|bill number|credit note|credit note no|"
              "credit note number|cn no|order|order no|order number|order id|po|po no|po number|"
              "purchase order|purchase order no|purchase order number",
    "supplier": "supplier|supplier name|vendor|vendor name|seller|issuer|payee|payee name|creditor|"
                "creditor name",
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
    "total": "total|invoice total|grand total|total amount|amount due|total due|gross amount|order total|"
             "gross|gross total|invoice amount|invoice value|bill amount|order amount",
    "tax": "tax|vat|tax amount|vat amount|sales tax",
    "subtotal": "subtotal|sub total|net total",
    "product_group": "product group|group|category|product category|product line|product family|family",
    "valid_from": "valid from|effective from|effective date|start date|from",
    "valid_to": "valid to|valid until|effective to|end date|expiry date|expires|until|to",
}
SYNONYMS: dict[str, str] = {s: f for f, names in _SYNONYM_TABLE.items() for s in names.split("|")}

MONEY_FIELDS = ("unit_price", "amount", "total", "tax", "subtotal")
DATE_FIELDS = ("issued_on", "valid_from", "valid_to")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def normalize_header(text: str) -> str:
    """`"Invoice No."` → `"invoice no"`, `"unit_price"` → `"unit price"`, and JSON-style keys
    split at case changes: `"orderNumber"` → `"order number"`, `"PONumber"` → `"po number"`."""
    return " ".join(re.sub(r"[^\w]+|_", " ", _CAMEL.sub(" ", text).casefold()).split())


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


__all__ = ["CANONICAL_FIELDS", "DATE_FIELDS", "IGNORE", "MONEY_FIELDS", "SYNONYMS", "map_header", "normalize_header"]
