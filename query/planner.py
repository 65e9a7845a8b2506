"""Compiles a routed question into a plan over the closed operator vocabulary (rules, no model).

Guarantees:
- `compile_plan` only emits steps from `plan.OPERATORS` and always returns a plan that
  `plan.validate_plan` accepts (it is validated again by the service, like a client's plan).
- It never puts a tenant in the plan; entity ids come from the tenant's own catalog (the
  router resolved them), and joins between steps use classified fields only.
- Each intent maps to the operator that can answer it faithfully (seed 000 "Routing"):
  identifiers → `exact_lookup` (plus the hybrid exact branch); technical phrases → BM25 via
  `hybrid_search` with lexical weights; explanations → `hybrid_search` with semantic weights;
  totals / prices / exposure → a `metric_query` template; relationships → `graph_expand`
  templates, scoped by time when the question gives a period; mixed questions get a DAG whose
  later steps read earlier steps' ids.
- A question it cannot map to any operator gets a `PlanningGap` (the service answers
  `no_answer` with the reason) rather than a guessed plan.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from manifold.query.plan import Plan, validate_plan

_APPROVED = re.compile(r"\bapproved\b|\bvendors?\b|\bsuppliers? of\b", re.I)
_AT_RISK = re.compile(r"\b(at risk|exposure|exposed|revenue)\b", re.I)
_UNIT_PRICE = re.compile(r"\bunit price\b|\bprice of\b|\bcost per unit\b|\bhow much (?:does|did) .* cost\b", re.I)
_PRODUCTS = re.compile(r"\bproducts?\b|\bitems?\b|\bskus?\b|\bsupplies\b|\bsupply\b|\bsell\b", re.I)
_SUPPLIERS = re.compile(r"\bsuppliers?\b|\bvendors?\b|\bwho supplies\b|\bwho sells\b", re.I)
_ORDERS = re.compile(r"\borders?\b", re.I)
_GROUP = re.compile(r"\bgroup\b|\bcategory\b", re.I)
_NOTICE = re.compile(r"\bnotice\b|\bannouncement\b|\bdelay(?:ed)?\b", re.I)


class PlanningGap(ValueError):
    """The question could not be mapped to any operator; the message says why."""


def _anchor_ids(route: Any, kind: str) -> list[Any]:
    return [a.resolved for a in route.anchors if a.kind == kind and a.resolved is not None]


def _intent(route: Any, name: str) -> float:
    return max((i.confidence for i in route.intents if i.type == name), default=0.0)


def _period(route: Any) -> dict[str, str] | None:
    if route.time is None:
        return None
    return {"start": route.time.start.isoformat(), "end": route.time.end.isoformat()}


def compile_plan(route: Any, question: str, *, as_of: date) -> Plan:
    """The plan for `route` (see the module docstring); raises `PlanningGap`."""
    steps: list[dict[str, Any]] = []
    companies = _anchor_ids(route, "company")
    suppliers = _anchor_ids(route, "supplier")
    products = _anchor_ids(route, "product")
    groups = _anchor_ids(route, "product_group")
    identifiers = list(route.identifiers)
    product_codes = sorted({p.key for p in products} | {i for i in identifiers if i.startswith("PRD-")})
    aggregate = _intent(route, "aggregate") >= 0.5
    relationship = _intent(route, "relationship") >= 0.5
    text_route = max(_intent(route, "semantic"), _intent(route, "lexical")) >= 0.5
    exact = _intent(route, "exact_lookup") >= 0.5 and bool(identifiers)

    if aggregate:
        steps.extend(_aggregate_steps(route, question, as_of, companies, suppliers, groups,
                                      product_codes, identifiers))
    elif relationship:
        steps.extend(_relationship_steps(route, question, companies, suppliers, products, groups))
    if exact and not aggregate:
        steps.append({"id": "lookup", "operator": "exact_lookup",
                      "params": {"identifiers": identifiers, "limit": 20}})
    has_text_step = any(s["operator"] == "hybrid_search" for s in steps)
    if (text_route and not has_text_step) or not steps:
        query = (route.topic or question).strip()
        if not query:
            raise PlanningGap("the question has no searchable topic, identifier or anchor")
        query_class = "lexical" if _intent(route, "lexical") > _intent(route, "semantic") else "semantic"
        steps.append({"id": "passages", "operator": "hybrid_search", "optional": bool(steps),
                      "params": {"query": query[:1000], "limit": 5, "query_class": query_class,
                                 **({"identifiers": identifiers} if identifiers else {})}})
    return validate_plan({"steps": steps, "join": {"keys": ["ids", "keys", "names"], "missing": "report_gap"}})


def _aggregate_steps(route: Any, question: str, as_of: date, companies: list[Any], suppliers: list[Any],
                     groups: list[Any], product_codes: list[str], identifiers: list[str]) -> list[dict[str, Any]]:
    period = _period(route)
    if _UNIT_PRICE.search(question):
        if not product_codes:
            raise PlanningGap("a unit price needs a product (code or name)")
        on = route.time.start if route.time is not None else as_of
        return [{"id": "price", "operator": "metric_query",
                 "params": {"metric": "unit_price_on", "where": {"product_codes": product_codes,
                                                                 "on": on.isoformat()}}}]
    if _AT_RISK.search(question) or (_ORDERS.search(question) and "delayed" in route.statuses):
        steps: list[dict[str, Any]] = []
        where: dict[str, Any] = {"statuses": list(route.statuses) or ["delayed"]}
        orders = [i for i in identifiers if i.startswith(("PO-", "ORD-"))]
        if suppliers:
            where["supplier_names"] = [s.name for s in suppliers]
        elif orders:
            where["order_numbers"] = orders
        elif _NOTICE.search(question):
            steps.append({"id": "notice", "operator": "hybrid_search",
                          "params": {"query": (route.topic or "supplier notice delay")[:1000], "limit": 3,
                                     "query_class": "semantic"}})
            where["order_numbers"] = "$notice.identifiers"
        steps.append({"id": "exposure", "operator": "metric_query",
                      "params": {"metric": "revenue_at_risk", "where": where}})
        return steps
    steps = []
    where = {}
    if period:
        where["period"] = period
    if route.currency:
        where["currency"] = route.currency
    if route.statuses:
        where["statuses"] = list(route.statuses)
    if companies and _APPROVED.search(question) and not suppliers:
        valid = {"valid_during": period} if period else {}
        steps.append({"id": "vendors", "operator": "graph_expand",
                      "params": {"from_ids": [c.entity_id for c in companies], "relation": "APPROVED_VENDOR",
                                 "direction": "out", "max_hops": 1, **valid}})
        where["supplier_names"] = "$vendors.names"
    elif suppliers:
        where["supplier_names"] = [s.name for s in suppliers]
    if companies:
        where["company_names"] = [c.name for c in companies]
    if groups and not product_codes:
        steps.append({"id": "group_products", "operator": "graph_expand",
                      "params": {"from_ids": [g.entity_id for g in groups], "relation": ["BELONGS_TO", "PART_OF"],
                                 "direction": "in", "max_hops": 3}})
        where["product_codes"] = "$group_products.keys"
    elif product_codes:
        where["product_codes"] = product_codes
    if not where.get("period") and not any(k in where for k in ("company_names", "supplier_names", "product_codes")):
        raise PlanningGap("a total needs a period or a company, supplier or product to be bounded")
    steps.append({"id": "spend", "operator": "metric_query",
                  "params": {"metric": "total_spend", "where": where}})
    return steps


def _relationship_steps(route: Any, question: str, companies: list[Any], suppliers: list[Any],
                        products: list[Any], groups: list[Any]) -> list[dict[str, Any]]:
    period = _period(route)
    valid = {"valid_during": period} if period else {}
    if companies and (_SUPPLIERS.search(question) or _APPROVED.search(question)):
        steps: list[dict[str, Any]] = [{"id": "vendors", "operator": "graph_expand",
                                        "params": {"from_ids": [c.entity_id for c in companies],
                                                   "relation": "APPROVED_VENDOR", "direction": "out",
                                                   "max_hops": 1, **valid}}]
        if _PRODUCTS.search(_strip_supplier_words(question)):
            steps.append({"id": "vendor_products", "operator": "graph_expand",
                          "params": {"from_ids": "$vendors.ids", "relation": "SUPPLIES", "direction": "out",
                                     "max_hops": 1}})
        return steps
    if suppliers:
        if _ORDERS.search(question):
            return [{"id": "orders", "operator": "graph_expand",
                     "params": {"from_ids": [s.entity_id for s in suppliers], "relation": "PLACED_WITH",
                                "direction": "in", "max_hops": 1}}]
        return [{"id": "supplied", "operator": "graph_expand",
                 "params": {"from_ids": [s.entity_id for s in suppliers], "relation": "SUPPLIES",
                            "direction": "out", "max_hops": 1, **valid}}]
    if products:
        if _GROUP.search(question):
            return [{"id": "groups", "operator": "graph_expand",
                     "params": {"from_ids": [p.entity_id for p in products], "relation": ["BELONGS_TO", "PART_OF"],
                                "direction": "out", "max_hops": 3}}]
        return [{"id": "suppliers", "operator": "graph_expand",
                 "params": {"from_ids": [p.entity_id for p in products], "relation": "SUPPLIES",
                            "direction": "in", "max_hops": 1, **valid}}]
    if groups:
        steps = [{"id": "group_products", "operator": "graph_expand",
                  "params": {"from_ids": [g.entity_id for g in groups], "relation": ["BELONGS_TO", "PART_OF"],
                             "direction": "in", "max_hops": 3}}]
        if _SUPPLIERS.search(question):
            steps.append({"id": "group_suppliers", "operator": "graph_expand",
                          "params": {"from_ids": "$group_products.ids", "relation": "SUPPLIES", "direction": "in",
                                     "max_hops": 1, **valid}})
        return steps
    return []


def _strip_supplier_words(question: str) -> str:
    return re.sub(r"\bsupplier\s+\w+", "", question, flags=re.I)
