"""The governed metrics' templates: constant SQL, definitions and parameter binders (pure).

Guarantees:
- **Closed registry.** `TEMPLATES` maps each metric name to a `MetricTemplate`: constant SQL
  texts (written here, never assembled from input), the metric definition returned with every
  result, and a binder that turns `MetricParams` into typed psycopg parameters. An unknown
  metric raises `UnknownMetric` (`template_for`).
- **No value reaches SQL text.** Every value is a psycopg parameter (`%(name)s`); a supplier
  name such as `Beta' OR '1'='1` is just a string that matches nothing. Names and codes are
  compared as `name_key` / `code_key` say, in Python and in SQL alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from manifold.query.plan import MetricParams

__all__ = ["EVIDENCE_CAP", "TEMPLATES", "MetricTemplate", "UnknownMetric", "code_key", "name_key", "template_for"]

EVIDENCE_CAP = 200
"""At most this many record-line evidence items per metric result (the evidence query fetches one
more, so the executor can say the list was capped)."""

RECOGNISED_SPEND_STATUSES = ("posted", "paid")
_NON_ALNUM = re.compile(r"[\W_]+")
AT_RISK_ORDER_STATUSES = ("delayed",)


class UnknownMetric(KeyError):
    """The metric is not in the closed template registry."""


# ---------------------------------------------------------------------------------------------
# SQL (constants only; every value is a %(name)s parameter)

_LINES_CTE = """
WITH candidate AS (
    SELECT r.record_id, r.document_id, r.version, r.record_type, r.number, r.counterparty_name,
           r.issued_on, r.currency, r.status, r.total
    FROM serving_records r
    WHERE r.tenant_id = %(tenant)s
      AND r.record_type = ANY(%(record_types)s::text[])
      AND (r.status = ANY(%(statuses)s::text[])
       OR (%(unstated)s AND r.status IS NULL AND r.attributes->>'status_column' = 'absent'))
      AND (%(start)s::date IS NULL OR r.issued_on >= %(start)s::date)
      AND (%(end)s::date IS NULL OR r.issued_on < %(end)s::date)
      AND (%(suppliers)s::text[] IS NULL OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
      AND (%(companies)s::text[] IS NULL
           OR btrim(regexp_replace(lower(r.attributes->>'customer_name'), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(companies)s::text[]))
      AND (%(numbers)s::text[] IS NULL OR upper(r.number) = ANY(%(numbers)s::text[]))
      AND (EXISTS (
          SELECT 1 FROM serving_record_lines x
          WHERE x.tenant_id = %(tenant)s AND x.record_id = r.record_id
            AND (%(products)s::text[] IS NULL OR regexp_replace(upper(x.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])))
        OR (%(products)s::text[] IS NULL AND r.total IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM serving_record_lines y WHERE y.tenant_id = %(tenant)s AND y.record_id = r.record_id)))
),
kept AS (
    SELECT DISTINCT ON (c.record_type, upper(c.number), lower(coalesce(c.counterparty_name, '')))
           c.*
    FROM candidate c
    ORDER BY c.record_type, upper(c.number), lower(coalesce(c.counterparty_name, '')), c.record_id
),
matched AS (
    SELECT k.record_id, k.document_id, k.version, k.record_type, k.number, k.counterparty_name,
           k.issued_on, k.currency, k.status, coalesce(l.line_no, 0) AS line_no, l.product_code, l.quantity,
           l.unit_price, coalesce(l.amount, k.total) AS amount,
           CASE WHEN k.record_type = 'credit_note' THEN -coalesce(l.amount, k.total)
                ELSE coalesce(l.amount, k.total) END AS signed_amount
    FROM kept k
    LEFT JOIN serving_record_lines l ON l.tenant_id = %(tenant)s AND l.record_id = k.record_id
    WHERE (l.record_id IS NULL AND %(products)s::text[] IS NULL AND k.total IS NOT NULL)
       OR (l.record_id IS NOT NULL AND (%(products)s::text[] IS NULL
           OR regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])))
)
"""

_LINES_TOTALS_SQL = _LINES_CTE + """
SELECT m.currency, sum(m.signed_amount) AS total, count(*) AS line_count,
       count(DISTINCT m.record_id) AS record_count
FROM matched m
GROUP BY m.currency
ORDER BY m.currency
"""

_LINES_SUMMARY_SQL = _LINES_CTE + """
SELECT (SELECT count(*) FROM candidate) - (SELECT count(*) FROM kept) AS duplicates_skipped,
       (SELECT coalesce(array_agg(DISTINCT m.number ORDER BY m.number), ARRAY[]::text[])
        FROM matched m
        WHERE %(currency)s::text IS NULL OR m.currency = %(currency)s::text) AS numbers
"""

_LINES_EVIDENCE_SQL = _LINES_CTE + """
SELECT m.*
FROM matched m
WHERE %(currency)s::text IS NULL OR m.currency = %(currency)s::text
ORDER BY m.issued_on, m.number, m.record_id, m.line_no
LIMIT %(evidence_limit)s
"""

_INVOICE_PRICE_SQL = """
SELECT DISTINCT ON (regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g'), r.currency)
       regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g') AS product_key,
       upper(l.product_code) AS product_code, r.currency, l.unit_price, l.line_no, l.quantity,
       l.amount, r.record_id, r.document_id, r.version, r.record_type, r.number, r.issued_on,
       r.status, r.counterparty_name
FROM serving_records r
JOIN serving_record_lines l ON l.tenant_id = %(tenant)s AND l.record_id = r.record_id
WHERE r.tenant_id = %(tenant)s
  AND r.record_type = 'invoice'
  AND (r.status = ANY(%(statuses)s::text[])
       OR (%(unstated)s AND r.status IS NULL AND r.attributes->>'status_column' = 'absent'))
  AND r.issued_on <= %(on)s::date
  AND regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])
  AND (%(currency)s::text IS NULL OR r.currency = %(currency)s::text)
  AND (%(suppliers)s::text[] IS NULL OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
  AND (%(companies)s::text[] IS NULL
       OR btrim(regexp_replace(lower(r.attributes->>'customer_name'), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(companies)s::text[]))
ORDER BY regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g'), r.currency, r.issued_on DESC,
         r.record_id, l.line_no
"""

_CATALOG_PRICE_SQL = """
SELECT regexp_replace(upper(r.number), '[^[:alnum:]]+', '', 'g') AS product_key,
       upper(r.number) AS product_code, r.currency, r.attributes->>'unit_price' AS unit_price,
       r.attributes->>'valid_from' AS valid_from, r.attributes->>'valid_to' AS valid_to,
       r.counterparty_name, r.record_id, r.document_id, r.version
FROM serving_records r
WHERE r.tenant_id = %(tenant)s
  AND r.record_type = 'catalog_item'
  AND regexp_replace(upper(r.number), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])
  AND r.attributes->>'unit_price' IS NOT NULL
  AND (%(currency)s::text IS NULL OR r.currency = %(currency)s::text)
  AND (%(suppliers)s::text[] IS NULL OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
ORDER BY 1, r.currency, r.record_id
"""

_DUPLICATE_RULE = (
    "Replicated records (same record_type, number and counterparty name, case-insensitive, in "
    "several documents) are counted once: the copy with the lowest record_id is kept."
)

TOTAL_SPEND_DEFINITION = (
    "Recognised spend = sum over invoice and credit-note lines (active document versions only) of "
    "sign x line amount, where sign is +1 for an invoice and -1 for a credit note (credit-note "
    "amounts are stored positive). Only records whose status is in the requested statuses "
    "(default: posted, paid) count; a record without lines (one row per invoice in an export) counts "
    "its total as one line (line_no 0) when no product is asked for; a record with no status is not "
    "recognised spend unless its "
    "table has no status column at all (an export of posted documents), and drafts "
    "or other statuses are excluded. " + _DUPLICATE_RULE + " Filters: buying company "
    "(attributes.customer_name) and supplier (counterparty name) case-insensitive exact matches, "
    "product codes case-insensitive, period half-open [start, end) on the issue date. Totals are "
    "per currency; no FX conversion is applied."
)

REVENUE_AT_RISK_DEFINITION = (
    "Revenue at risk = sum of line amounts of orders (active document versions only) whose status "
    "is in the requested statuses (default: delayed); a record with no status never matches. "
    + _DUPLICATE_RULE + " Filters: supplier (counterparty name) and buying company, "
    "case-insensitive; order numbers and product codes, case-insensitive; optional period "
    "half-open [start, end) on the order date. Totals are per currency; no FX conversion."
)

UNIT_PRICE_DEFINITION = (
    "Invoice unit price on a date = the unit price on the line for the product of the latest "
    "invoice (status posted or paid unless statuses are given; issued on or before the date; "
    "active document versions only) per product and currency; ties on the issue date break by the "
    "lowest record_id, then line number. Catalog unit price = attributes.unit_price of the catalog "
    "items (price lists, agreement schedules) for the product that are valid on the date (no "
    "valid_from after it, no valid_to before it); several different catalog prices in one "
    "currency give none. Product codes compare upper-cased with punctuation and spaces removed. "
    "The source the question names (price_source) is used; otherwise the invoice price, else the "
    "catalog price. `sources` says which was used."
)


# ---------------------------------------------------------------------------------------------
# binders: MetricParams -> typed psycopg parameters


def name_key(name: str) -> str:
    """How supplier and company names compare: lower-cased, every run of non-alphanumerics one
    space, trimmed, so `Valebrook Bearings Inc.` (an invoice) and `Valebrook Bearings Inc` (a
    sentence) are one name. The SQL applies the same rule
    (`btrim(regexp_replace(lower(name), '[^[:alnum:]]+', ' ', 'g'))`)."""
    return " ".join(_NON_ALNUM.sub(" ", name.lower()).split())


def _lower_names(values: Sequence[str] | str | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise ValueError(f"unresolved reference {values!r}: the engine must resolve it before the metric runs")
    return list(dict.fromkeys(name_key(v) for v in values))


def _upper_codes(values: Sequence[str] | str | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise ValueError(f"unresolved reference {values!r}: the engine must resolve it before the metric runs")
    return [v.strip().upper() for v in values]


def code_key(code: str) -> str:
    """How product codes are compared: upper-cased, every run of non-alphanumerics removed, so
    `HX-2210`, `hx 2210` (an entity's canonical key) and `HX_2210` are one code. The SQL applies
    the same rule (`regexp_replace(upper(code), '[^[:alnum:]]+', '', 'g')`)."""
    return _NON_ALNUM.sub("", code.upper())


def _code_keys(values: Sequence[str] | str | None) -> list[str] | None:
    codes = _upper_codes(values)
    if codes is None:
        return None
    return list(dict.fromkeys(k for k in map(code_key, codes) if k))


def _reject(where: MetricParams, metric: str, fields: Sequence[str]) -> None:
    given = [f for f in fields if getattr(where, f) is not None]
    if given:
        raise ValueError(f"{metric} does not take {', '.join(given)}")


def _common(where: MetricParams, tenant_id: str) -> dict[str, Any]:
    return {
        "tenant": tenant_id,
        "suppliers": _lower_names(where.supplier_names),
        "companies": _lower_names(where.company_names),
        "products": _code_keys(where.product_codes),
        "currency": where.currency,
        "evidence_limit": EVIDENCE_CAP + 1,
    }


def bind_total_spend(where: MetricParams, tenant_id: str) -> dict[str, Any]:
    _reject(where, "total_spend", ("order_numbers", "on", "price_source"))
    return {
        **_common(where, tenant_id),
        "record_types": ["invoice", "credit_note"],
        "statuses": list(where.statuses or RECOGNISED_SPEND_STATUSES),
        "unstated": not where.statuses,
        "start": where.period.start if where.period else None,
        "end": where.period.end if where.period else None,
        "numbers": None,
    }


def bind_revenue_at_risk(where: MetricParams, tenant_id: str) -> dict[str, Any]:
    _reject(where, "revenue_at_risk", ("on", "price_source"))
    return {
        **_common(where, tenant_id),
        "record_types": ["order"],
        "statuses": list(where.statuses or AT_RISK_ORDER_STATUSES),
        "unstated": False,
        "start": where.period.start if where.period else None,
        "end": where.period.end if where.period else None,
        "numbers": _upper_codes(where.order_numbers),
    }


def bind_unit_price_on(where: MetricParams, tenant_id: str) -> dict[str, Any]:
    _reject(where, "unit_price_on", ("order_numbers", "period"))
    if where.on is None or where.product_codes is None:
        raise ValueError("unit_price_on needs product_codes and on")
    return {
        **_common(where, tenant_id),
        "statuses": list(where.statuses or RECOGNISED_SPEND_STATUSES),
        "unstated": not where.statuses,
        "on": where.on,
    }


@dataclass(frozen=True)
class MetricTemplate:
    """One governed metric: constant SQL per query name, its definition, its parameter binder."""

    name: str
    queries: Mapping[str, str]
    definition: str
    binder: Callable[[MetricParams, str], dict[str, Any]]


TEMPLATES: Mapping[str, MetricTemplate] = MappingProxyType({
    "total_spend": MetricTemplate(
        "total_spend",
        MappingProxyType({"totals": _LINES_TOTALS_SQL, "summary": _LINES_SUMMARY_SQL,
                          "evidence": _LINES_EVIDENCE_SQL}),
        TOTAL_SPEND_DEFINITION, bind_total_spend),
    "revenue_at_risk": MetricTemplate(
        "revenue_at_risk",
        MappingProxyType({"totals": _LINES_TOTALS_SQL, "summary": _LINES_SUMMARY_SQL,
                          "evidence": _LINES_EVIDENCE_SQL}),
        REVENUE_AT_RISK_DEFINITION, bind_revenue_at_risk),
    "unit_price_on": MetricTemplate(
        "unit_price_on",
        MappingProxyType({"invoice_prices": _INVOICE_PRICE_SQL, "catalog_prices": _CATALOG_PRICE_SQL}),
        UNIT_PRICE_DEFINITION, bind_unit_price_on),
})
"""The closed registry: metric name -> template. Read-only."""


def template_for(metric: str) -> MetricTemplate:
    """The template for `metric`; `UnknownMetric` if it is not in the registry."""
    try:
        return TEMPLATES[metric]
    except (KeyError, TypeError):
        raise UnknownMetric(f"unknown metric {metric!r}; allowed: {', '.join(TEMPLATES)}") from None
