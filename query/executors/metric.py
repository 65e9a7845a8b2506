"""`metric_query`: governed metrics as allowlisted, parameterised SQL templates.

Guarantees:
- **Closed registry.** `TEMPLATES` maps each metric name to a `MetricTemplate`: constant SQL
  texts (written here, never assembled from input), the metric definition returned with every
  result, and a binder that turns `MetricParams` into typed psycopg parameters. Nothing else is
  ever executed; an unknown metric raises `UnknownMetric` before any connection is opened.
- **No value reaches SQL text.** Every value is a psycopg parameter (`%(name)s`); a supplier
  name such as `Beta' OR '1'='1` is just a string that matches nothing.
- **Least privilege and isolation.** Runs as the query role (`manifold_query`: SELECT on the
  `serving_*` views only, i.e. ACTIVE versions only) in one read-only REPEATABLE READ
  transaction with the tenant set transaction-locally (row-level security), and every statement
  also says `tenant_id = %(tenant)s`. The tenant is only the `tenant_id` keyword argument.
- **Bounded.** `SET LOCAL statement_timeout` (via `set_config(..., true)`) is the minimum of
  `settings.query.statement_timeout_ms` and the step timeout; a statement cancelled by it raises
  `TimeoutError`. Record evidence is capped at `EVIDENCE_CAP` lines (a `capped` gap says so).
- **Exact money.** Amounts are NUMERIC in the database, `Decimal` in Python, and strings in the
  result; no float is ever involved. No FX conversion is invented: totals are per currency.
- **Reproducible.** The result carries the definition and `snapshot_at` (the snapshot's `now()`),
  and every total is computed from the same snapshot as its evidence.
- Zero spend and no data differ: `matched_line_count == 0` sets `no_matching_data` and adds a
  `missing_data` gap, instead of reporting a total of 0.

Errors: `UnknownMetric` / `ValueError` for parameters the template does not take (bad input),
`TimeoutError` for the statement timeout, `manifold.shared.errors.Transient` for an unreachable
or aborted database.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

import psycopg
from psycopg.rows import dict_row

from manifold.query.plan import MetricParams, MetricQueryParams
from manifold.query.types import Evidence, Gap, StepResult
from manifold.shared.config import ManifoldSettings
from manifold.shared.stores.manifest import check_tenant
from manifold.shared.stores.postgres import TenantConnections

__all__ = ["EVIDENCE_CAP", "TEMPLATES", "MetricExecutor", "MetricTemplate", "UnknownMetric", "template_for"]

EVIDENCE_CAP = 200
"""At most this many record-line evidence items per metric result."""

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
           r.issued_on, r.currency, r.status
    FROM serving_records r
    WHERE r.tenant_id = %(tenant)s
      AND r.record_type = ANY(%(record_types)s::text[])
      AND r.status = ANY(%(statuses)s::text[])
      AND (%(start)s::date IS NULL OR r.issued_on >= %(start)s::date)
      AND (%(end)s::date IS NULL OR r.issued_on < %(end)s::date)
      AND (%(suppliers)s::text[] IS NULL
       OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
      AND (%(companies)s::text[] IS NULL
           OR btrim(regexp_replace(lower(r.attributes->>'customer_name'), '[^[:alnum:]]+', ' ', 'g'))
          = ANY(%(companies)s::text[]))
      AND (%(numbers)s::text[] IS NULL OR upper(r.number) = ANY(%(numbers)s::text[]))
      AND EXISTS (
          SELECT 1 FROM serving_record_lines x
          WHERE x.tenant_id = %(tenant)s AND x.record_id = r.record_id
            AND (%(products)s::text[] IS NULL
                 OR regexp_replace(upper(x.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])))
),
kept AS (
    SELECT DISTINCT ON (c.record_type, upper(c.number), lower(coalesce(c.counterparty_name, '')))
           c.*
    FROM candidate c
    ORDER BY c.record_type, upper(c.number), lower(coalesce(c.counterparty_name, '')), c.record_id
),
matched AS (
    SELECT k.record_id, k.document_id, k.version, k.record_type, k.number, k.counterparty_name,
           k.issued_on, k.currency, k.status, l.line_no, l.product_code, l.quantity, l.unit_price,
           l.amount,
           CASE WHEN k.record_type = 'credit_note' THEN -l.amount ELSE l.amount END AS signed_amount
    FROM kept k
    JOIN serving_record_lines l ON l.tenant_id = %(tenant)s AND l.record_id = k.record_id
    WHERE (%(products)s::text[] IS NULL
           OR regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[]))
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
  AND r.status = ANY(%(statuses)s::text[])
  AND r.issued_on <= %(on)s::date
  AND regexp_replace(upper(l.product_code), '[^[:alnum:]]+', '', 'g') = ANY(%(products)s::text[])
  AND (%(currency)s::text IS NULL OR r.currency = %(currency)s::text)
  AND (%(suppliers)s::text[] IS NULL
       OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
  AND (%(companies)s::text[] IS NULL
       OR btrim(regexp_replace(lower(r.attributes->>'customer_name'), '[^[:alnum:]]+', ' ', 'g'))
          = ANY(%(companies)s::text[]))
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
  AND (%(suppliers)s::text[] IS NULL
       OR btrim(regexp_replace(lower(r.counterparty_name), '[^[:alnum:]]+', ' ', 'g')) = ANY(%(suppliers)s::text[]))
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
    "(default: posted, paid) count; a record with no status is not recognised spend, and drafts "
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


# ---------------------------------------------------------------------------------------------
# executor


class MetricExecutor:
    """Runs one governed metric for the caller's tenant (see the module docstring)."""

    def __init__(self, connections: TenantConnections, settings: ManifoldSettings) -> None:
        self._db = connections
        self._timeout_ms = settings.query.statement_timeout_ms

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> MetricExecutor:
        return cls(TenantConnections(settings.postgres.query_conninfo()), settings)

    def run(self, params: MetricQueryParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        check_tenant(tenant_id)
        template = template_for(params.metric)
        bound = template.binder(params.where, tenant_id)
        timeout_ms = max(1, min(self._timeout_ms, int(timeout_s * 1000)))
        started = time.perf_counter()
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            try:
                conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(timeout_ms),))
                snapshot_at = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]  # always one row
                rows: dict[str, list[dict[str, Any]]] = {}
                for name, text in template.queries.items():
                    with conn.cursor(row_factory=dict_row) as cur:
                        rows[name] = cur.execute(text, bound).fetchall()
            except psycopg.errors.QueryCanceled as exc:
                raise TimeoutError(f"metric {params.metric} exceeded its statement timeout "
                                   f"of {timeout_ms} ms") from exc
        store_ms = (time.perf_counter() - started) * 1000.0
        if params.metric == "unit_price_on":
            return _assemble_prices(template, params.where, bound, rows, tenant_id, snapshot_at, store_ms)
        return _assemble_lines(template, params.where, bound, rows, tenant_id, snapshot_at, store_ms)


def _assemble_lines(template: MetricTemplate, where: MetricParams, bound: dict[str, Any],
                    rows: dict[str, list[dict[str, Any]]], tenant_id: str, snapshot_at: datetime,
                    store_ms: float) -> StepResult:
    per_currency = {(r["currency"] or "unknown"): r for r in rows["totals"]}
    gaps: list[Gap] = []
    if where.currency is not None:
        chosen = {c: r for c, r in per_currency.items() if c == where.currency}
        excluded = sum(int(r["line_count"]) for c, r in per_currency.items() if c != where.currency)
        if excluded:
            others = ", ".join(sorted(c for c in per_currency if c != where.currency))
            gaps.append(Gap(kind="missing_data",
                            detail=f"{excluded} matching line(s) in {others} are not in {where.currency} "
                                   "and were left out: no governed FX rate is available"))
    else:
        chosen = per_currency
        excluded = 0
        if len(chosen) > 1:
            gaps.append(Gap(kind="missing_data",
                            detail=f"matching lines are in several currencies ({', '.join(sorted(chosen))}); "
                                   "their totals cannot be added without a governed FX rate"))
    line_count = sum(int(r["line_count"]) for r in chosen.values())
    record_count = sum(int(r["record_count"]) for r in chosen.values())
    totals = {c: str(_decimal(r["total"])) for c, r in sorted(chosen.items())}
    summary: dict[str, Any] = rows["summary"][0] if rows["summary"] else {"duplicates_skipped": 0, "numbers": []}
    result: dict[str, Any] = {
        "metric": template.name,
        "totals": totals,
        "currency": where.currency if where.currency is not None else (
            next(iter(totals)) if len(totals) == 1 else None),
        "matched_line_count": line_count,
        "matched_record_count": record_count,
        "duplicates_skipped": int(summary["duplicates_skipped"] or 0),
        "no_matching_data": line_count == 0,
        "definition": template.definition,
        "snapshot_at": snapshot_at.isoformat(),
    }
    if where.currency is not None:
        result["excluded_other_currency_lines"] = excluded
    if template.name == "revenue_at_risk":
        result["orders"] = sorted(summary["numbers"] or [])
    if line_count == 0:
        gaps.append(Gap(kind="missing_data",
                        detail=f"no matching data for {template.name} (this is not a total of zero)"))
    evidence = [_line_evidence(r, tenant_id, snapshot_at) for r in rows["evidence"][:EVIDENCE_CAP]]
    if len(rows["evidence"]) > EVIDENCE_CAP:
        gaps.append(Gap(kind="capped", detail=f"{line_count} lines matched; only the first "
                                              f"{EVIDENCE_CAP} are cited as evidence"))
    evidence.append(_metric_evidence(template, bound, result, tenant_id, snapshot_at))
    return StepResult(result=result, evidence=tuple(evidence), gaps=tuple(gaps),
                      rows=sum(len(v) for v in rows.values()), store_ms=store_ms)


def _assemble_prices(template: MetricTemplate, where: MetricParams, bound: dict[str, Any],
                     rows: dict[str, list[dict[str, Any]]], tenant_id: str, snapshot_at: datetime,
                     store_ms: float) -> StepResult:
    on = where.on.isoformat() if where.on else ""
    catalog_rows = _valid_catalog_rows(rows["catalog_prices"], on)
    catalog: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in catalog_rows:
        catalog.setdefault(r["product_key"], {}).setdefault(r["currency"] or "unknown", []).append(r)
    invoices: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows["invoice_prices"]:
        currency = r["currency"] or "unknown"
        invoices.setdefault(r["product_key"], {})[currency] = {
            "product_code": r["product_code"],
            "currency": currency,
            "invoice_unit_price": str(_decimal(r["unit_price"])),
            "invoice": r["number"],
            "issued_on": r["issued_on"].isoformat() if r["issued_on"] else None,
            "supplier": r["counterparty_name"],
        }
    prices: dict[str, dict[str, Any]] = {}
    gaps: list[Gap] = []
    requested = list(dict.fromkeys(where.product_codes or ()))
    by_key = {code_key(c.strip().upper()): c for c in requested}
    for key in bound["products"]:
        options, cat = invoices.get(key, {}), catalog.get(key, {})
        display = next((o["product_code"] for o in options.values()),
                       next((rs[0]["product_code"] for rs in cat.values()), by_key.get(key, key)))
        entry = _price_entry(display, options, cat, where.price_source, gaps, on)
        if entry is not None:
            prices[display] = entry
    used = sorted({e["source"] for e in prices.values()})
    result = {
        "metric": template.name,
        "on": on,
        "prices": prices,
        "sources": used,
        "matched_line_count": len(prices),
        "no_matching_data": not prices,
        "currency": where.currency,
        "definition": template.definition,
        "snapshot_at": snapshot_at.isoformat(),
    }
    evidence = [_line_evidence(r, tenant_id, snapshot_at) for r in rows["invoice_prices"][:EVIDENCE_CAP]]
    for r in catalog_rows[:EVIDENCE_CAP]:
        evidence.append(Evidence(
            evidence_id=f"ev_rec_{r['record_id']}", store="postgres", kind="record", tenant_id=tenant_id,
            document_id=r["document_id"], version=r["version"], record_id=r["record_id"],
            claims={"record_type": "catalog_item", "product_code": r["product_code"],
                    "unit_price": r["unit_price"], "currency": r["currency"], "supplier": r["counterparty_name"],
                    "valid_from": r["valid_from"], "valid_to": r["valid_to"]},
            retrieved_at=snapshot_at))
    evidence.append(_metric_evidence(template, bound, result, tenant_id, snapshot_at))
    return StepResult(result=result, evidence=tuple(evidence), gaps=tuple(gaps),
                      rows=sum(len(v) for v in rows.values()), store_ms=store_ms)


def _valid_catalog_rows(rows: Sequence[Mapping[str, Any]], on: str) -> list[dict[str, Any]]:
    """Catalog rows valid on `on` (ISO dates compare as strings); a product whose rows all carry
    a validity that excludes the date keeps none (its price on that date is not known)."""
    kept = []
    for r in rows:
        start, end = r.get("valid_from") or "", r.get("valid_to") or ""
        if (not start or start <= on) and (not end or on <= end):
            kept.append(dict(r))
    return kept


def _price_entry(code: str, options: Mapping[str, dict[str, Any]], cat: Mapping[str, list[dict[str, Any]]],
                 prefer: str | None, gaps: list[Gap], on: str) -> dict[str, Any] | None:
    """One product's price: the invoice price (latest line) or the catalog price (price list or
    agreement schedule), whichever the question names; without a preference the invoice price,
    else the catalog's. A catalog that lists several prices for the product in one currency on
    the date gives none (it is not one price), and several currencies are never converted."""
    catalog_price: dict[str, Any] | None = None
    for currency, rs in sorted(cat.items()):
        distinct = sorted({str(_decimal_or_none(r["unit_price"])) for r in rs
                           if _decimal_or_none(r["unit_price"]) is not None})
        if len(distinct) == 1:
            catalog_price = catalog_price or {"currency": currency, "catalog_unit_price": distinct[0],
                                              "supplier": rs[0]["counterparty_name"]}
        elif len(distinct) > 1:
            gaps.append(Gap(kind="missing_data", detail=f"the catalog lists {len(distinct)} prices for {code} in "
                                                         f"{currency} on {on} ({', '.join(distinct)})"))
    latest = max(options.values(), key=lambda o: (o["issued_on"] or "", o["currency"])) if options else None
    if len(options) > 1:
        gaps.append(Gap(kind="missing_data",
                        detail=f"{code} was invoiced in several currencies; no FX rate is applied"))
    if latest is None and catalog_price is None:
        gaps.append(Gap(kind="missing_data",
                        detail=f"no recognised invoice line or catalog price for {code} on or before {on}"))
        return None
    use_catalog = catalog_price is not None and (prefer == "catalog" or latest is None)
    if prefer == "invoice" and latest is None:
        gaps.append(Gap(kind="missing_data", detail=f"no recognised invoice line for {code} on or before {on}; "
                                                     "the catalog price is given instead"))
    if prefer == "catalog" and catalog_price is None:
        gaps.append(Gap(kind="missing_data", detail=f"no catalog price for {code} valid on {on}; "
                                                     "the latest invoice price is given instead"))
    if use_catalog:
        assert catalog_price is not None
        return {**catalog_price, "source": "catalog", "invoice_unit_price": None, "invoice": None, "issued_on": None}
    assert latest is not None
    entry = {k: v for k, v in latest.items() if k != "product_code"}
    entry["source"] = "invoice"
    entry["catalog_unit_price"] = catalog_price["catalog_unit_price"] if catalog_price and \
        catalog_price["currency"] == latest["currency"] else None
    if len(options) > 1:
        entry["by_currency"] = {c: {k: v for k, v in o.items() if k != "product_code"}
                                for c, o in sorted(options.items())}
    return entry


def _line_evidence(r: Mapping[str, Any], tenant_id: str, snapshot_at: datetime) -> Evidence:
    return Evidence(
        evidence_id=f"ev_rec_{r['record_id']}_{r['line_no']}",
        store="postgres", kind="record", tenant_id=tenant_id,
        document_id=r["document_id"], version=r["version"], record_id=r["record_id"],
        claims={
            "record_type": r["record_type"], "number": r["number"], "line_no": r["line_no"],
            "product_code": r["product_code"], "quantity": str(_decimal(r["quantity"])),
            "unit_price": str(_decimal(r["unit_price"])), "amount": str(_decimal(r["amount"])),
            "currency": r["currency"], "status": r["status"], "supplier": r["counterparty_name"],
            "issued_on": r["issued_on"].isoformat() if r["issued_on"] else None,
        },
        retrieved_at=snapshot_at,
    )


def _metric_evidence(template: MetricTemplate, bound: Mapping[str, Any], result: Mapping[str, Any],
                     tenant_id: str, snapshot_at: datetime) -> Evidence:
    parameters = {k: (v.isoformat() if isinstance(v, date) else v) for k, v in bound.items()
                  if k not in ("tenant", "evidence_limit")}
    digest = hashlib.sha256(json.dumps([template.name, parameters, result.get("snapshot_at")],
                                       sort_keys=True, default=str).encode()).hexdigest()[:16]
    claims = {k: v for k, v in result.items() if k != "definition"}
    claims["parameters"] = parameters
    return Evidence(evidence_id=f"ev_metric_{digest}", store="postgres", kind="metric", tenant_id=tenant_id,
                    text=template.definition, claims=claims, retrieved_at=snapshot_at)


def _decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    raise TypeError(f"expected a Decimal from NUMERIC, got {type(value).__name__}")


def _decimal_or_none(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) if value is not None else None
    except InvalidOperation:
        return None


