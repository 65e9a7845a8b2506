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
- A metric is planned only where the tenant's records can serve it (`Holdings`, from the
  catalog: "how many", "value", "maximum" in a tenant of manuals are not totals) and only when
  the question bounds it (a period, or a company, supplier or product); otherwise the question is
  planned as a passage search and `plan_with_notes` says which metric was skipped and why.
  Technical identifiers of the question (`routing.terms.technical_terms`: `--options`,
  `ENV_VARS`, `snake_case`, `dotted.keys`, paths, versions) go with each passage search as
  `terms`, so the passage holding them ranks first.
- A question it cannot map to any operator gets a `PlanningGap` (the service answers
  `no_answer` with the reason, or a quoted passage via `fallback_plan`) rather than a guessed plan.
- Prices: a unit price of a known product is a `unit_price_on` metric whatever the intent;
  `price_source` records the price the question names (catalog or invoice), never a guess.
- A passage search looks for the question as asked, anchors named as the catalog names them and
  without a leading request (`passage_query`): the entities a question names scope its passages,
  and the embedding reads a sentence, not a keyword list.
- `fallback_plan` is the text routes (exact identifier lookup, then hybrid search) for the
  question's anchors (`anchor_terms`); `empty_structured_steps` says which structured steps found
  no data (failures and timeouts are not "no data").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import Any

from manifold.query.plan import Plan, validate_plan
from manifold.query.routing.lexicon import QUESTION_WORDS
from manifold.query.routing.terms import technical_terms
from manifold.query.types import Holdings
from manifold.shared.identifiers import identifier_kind, normalize_identifier

_APPROVED = re.compile(r"\bapproved\b|\bvendors?\b|\bsuppliers? of\b", re.I)
_AT_RISK = re.compile(r"\b(at risk|exposure|exposed|revenue)\b", re.I)
_UNIT_PRICE = re.compile(r"\bunit (?:price|cost)\b|\bprice of\b"
                         r"|\b(?:cost|priced?|invoiced|charged|billed) (?:at )?per unit\b"
                         r"|\bhow much (?:does|did) .* cost\b|\b(?:list|catalog(?:ue)?|agreed|contract) price\b", re.I)
_PRODUCTS = re.compile(r"\bproducts?\b|\bitems?\b|\bskus?\b|\bsupplies\b|\bsupply\b|\bsell\b", re.I)
_SUPPLIERS = re.compile(r"\bsuppliers?\b|\bvendors?\b|\bwho supplies\b|\bwho sells\b", re.I)
_ASKS_SUPPLIERS = re.compile(r"\b(?:which|what|list(?: the)?|name(?: the)?)\s+(?:suppliers|vendors|supplier|vendor)\b"
                            r"|\bwho\s+(?:supplies|sells|provides|delivers)\b", re.I)
_ORDERS = re.compile(r"\borders?\b", re.I)
_GROUP = re.compile(r"\bgroup\b|\bcategory\b", re.I)
_CATALOG_SOURCE = re.compile(r"\bprice\s*lists?\b|\bcatalog(?:ue)?s?\b|\bagree(?:d|ment)s?\b|\bcontract(?:ed|s)?\b"
                             r"|\bschedules?\b|\blist price\b|\bquoted?\b|\btariffs?\b", re.I)
_INVOICE_SOURCE = re.compile(r"\binvoice[ds]?\b|\bbilled\b|\bpaid\b|\bcharged\b", re.I)
_NOTICE = re.compile(r"\bnotice\b|\bannouncement\b|\bdelay(?:ed)?\b", re.I)


PASSAGE_DOCUMENT_CAP = 5
"""Chunks of one document among a passage search's five: a manual's answer is usually in one
document, whose neighbouring passages beat weak passages of others (bench/eval_everyday.py, dev
half: the fact in the top five for 41 of 74 questions with a cap of 2, 53 with 5 when every
lead drew on its whole document; once document support flows only within a chunk's
neighbourhood (`fusion.SUPPORT_WINDOW`), 64 with 5 against 63 with 4)."""


class PlanningGap(ValueError):
    """The question could not be mapped to any operator; the message says why."""


def _anchor_ids(route: Any, kind: str) -> list[Any]:
    return [a.resolved for a in route.anchors if a.kind == kind and a.resolved is not None]


def _code(product: Any) -> str:
    """A product's code as written (its display name) when its key is not an identifier: keys
    of other codes are normalised names (`hx 2210`), the metric compares codes without
    punctuation either way, and the name reads better in the answer."""
    code: str = product.key if normalize_identifier(product.key) == product.key else (product.name or product.key)
    return code


def _names(entries: list[Any]) -> list[str]:
    """Every spelling of the resolved entities (display name and aliases seen in documents): an
    invoice may write `Beta Ltd.` where the catalog shows `Beta Limited`."""
    return list(dict.fromkeys(n for e in entries for n in (e.name, *e.aliases) if n))


def price_source(question: str) -> str | None:
    """The price the question names: `catalog` (price list, agreement, contract, schedule, quote),
    `invoice` (invoiced, billed, paid), or None when it names neither or both."""
    catalog, invoice = bool(_CATALOG_SOURCE.search(question)), bool(_INVOICE_SOURCE.search(question))
    return "catalog" if catalog and not invoice else "invoice" if invoice and not catalog else None


def _intent(route: Any, name: str) -> float:
    return max((i.confidence for i in route.intents if i.type == name), default=0.0)


def text_query_class(route: Any) -> str:
    """The fusion class of a routed question's passage search: `lexical` when the router's
    lexical intent outweighs its semantic one, else `semantic` (settings `fusion_method`)."""
    return "lexical" if _intent(route, "lexical") > _intent(route, "semantic") else "semantic"


def _period(route: Any) -> dict[str, str] | None:
    if route.time is None:
        return None
    return {"start": route.time.start.isoformat(), "end": route.time.end.isoformat()}


def compile_plan(route: Any, question: str, *, as_of: date, holdings: Holdings | None = None) -> Plan:
    """The plan for `route` (see the module docstring); raises `PlanningGap`."""
    return plan_with_notes(route, question, as_of=as_of, holdings=holdings)[0]


def plan_with_notes(route: Any, question: str, *, as_of: date,
                    holdings: Holdings | None = None) -> tuple[Plan, list[str]]:
    """`compile_plan` and the notes on the structured steps it did not plan and why (for the
    trace): a metric the tenant's records cannot serve (`holdings`), or one the question does not
    bound. Such a question is planned as a passage search instead."""
    notes: list[str] = []
    held = holdings or Holdings()
    steps: list[dict[str, Any]] = []
    companies = _anchor_ids(route, "company")
    suppliers = _anchor_ids(route, "supplier")
    products = _anchor_ids(route, "product")
    groups = _anchor_ids(route, "product_group")
    identifiers = list(route.identifiers)
    product_codes = sorted({_code(p) for p in products}
                           | {i for i in identifiers if identifier_kind(i) == "product"})
    aggregate = _intent(route, "aggregate") >= 0.5
    relationship = _intent(route, "relationship") >= 0.5
    text_route = max(_intent(route, "semantic"), _intent(route, "lexical")) >= 0.5
    exact = _intent(route, "exact_lookup") >= 0.5 and bool(identifiers)

    # a unit price of a known product is a price question whatever else the wording suggests
    priced = bool(_UNIT_PRICE.search(question)) and bool(product_codes) and not relationship
    if aggregate or priced:
        needed = _records_needed(route, question)
        if not held.can_serve(*needed):
            notes.append(f"no metric: this tenant's documents hold no {' or '.join(needed)} records")
            aggregate = False
        else:
            try:
                steps.extend(_aggregate_steps(route, question, as_of, companies, suppliers, groups,
                                              product_codes, identifiers))
                aggregate = True
            except PlanningGap as gap:
                if anchor_terms(route, question):
                    raise  # a named code or entity: the service quotes a passage that names it
                notes.append(f"no metric: {gap}")
                aggregate = False
    if not aggregate and not steps and relationship:
        steps.extend(_relationship_steps(route, question, companies, suppliers, products, groups))
    if exact and not aggregate:
        steps.append({"id": "lookup", "operator": "exact_lookup",
                      "params": {"identifiers": identifiers, "limit": 20}})
    has_text_step = any(s["operator"] == "hybrid_search" for s in steps)
    if (text_route and not has_text_step) or not steps:
        query = passage_query(route, question) or question.strip()
        if not query:
            raise PlanningGap("the question has no searchable topic, identifier or anchor")
        query_class = text_query_class(route)
        terms = technical_terms(question)
        steps.append({"id": "passages", "operator": "hybrid_search", "optional": bool(steps),
                      "params": {"query": query[:1000], "limit": 5, "query_class": query_class,
                                 "per_document_cap": PASSAGE_DOCUMENT_CAP,
                                 **({"identifiers": identifiers} if identifiers else {}),
                                 **({"terms": terms[:10]} if terms else {})}})
    plan = validate_plan({"steps": steps, "join": {"keys": ["ids", "keys", "names"], "missing": "report_gap"}})
    return plan, notes


def _records_needed(route: Any, question: str) -> tuple[str, ...]:
    """The record types an aggregate question's metric would read."""
    if _UNIT_PRICE.search(question):
        return ("catalog_item", "invoice")
    if _AT_RISK.search(question) or (_ORDERS.search(question) and "delayed" in route.statuses):
        return ("order",)
    return ("invoice", "credit_note")


def _aggregate_steps(route: Any, question: str, as_of: date, companies: list[Any], suppliers: list[Any],
                     groups: list[Any], product_codes: list[str], identifiers: list[str]) -> list[dict[str, Any]]:
    period = _period(route)
    if _UNIT_PRICE.search(question):
        if not product_codes:
            raise PlanningGap("a unit price needs a product (code or name)")
        on = route.time.start if route.time is not None else as_of
        where: dict[str, Any] = {"product_codes": product_codes, "on": on.isoformat()}
        source = price_source(question)
        if source:
            where["price_source"] = source
        if suppliers:
            where["supplier_names"] = _names(suppliers)
        if route.currency:
            where["currency"] = route.currency
        return [{"id": "price", "operator": "metric_query", "params": {"metric": "unit_price_on", "where": where}}]
    if _AT_RISK.search(question) or (_ORDERS.search(question) and "delayed" in route.statuses):
        steps: list[dict[str, Any]] = []
        where = {"statuses": list(route.statuses) or ["delayed"]}
        orders = [i for i in identifiers if i.startswith(("PO-", "ORD-"))]
        if suppliers:
            where["supplier_names"] = _names(suppliers)
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
        where["supplier_names"] = _names(suppliers)
    if companies:
        where["company_names"] = _names(companies)
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
    if products and _ASKS_SUPPLIERS.search(question):
        # "which suppliers supply HX-2210": the suppliers are asked for, so a supplier-like word
        # in the question ("supply" close to "Office Supply Ltd") is not the anchor
        return [{"id": "suppliers", "operator": "graph_expand",
                 "params": {"from_ids": [p.entity_id for p in products], "relation": "SUPPLIES",
                            "direction": "in", "max_hops": 1, **valid}}]
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


_STRUCTURED = ("metric_query", "graph_expand", "resolve_entity")


def empty_structured_steps(plan: Plan, execution: Any) -> list[str]:
    """Structured steps (metric, graph, lookup) that returned no data: a metric with
    `no_matching_data`, a graph expansion with no names, or a step skipped because the step it
    joins on found nothing. A failed or timed-out step is not "no data" (it stays a failure gap)."""
    empty = []
    for step in plan.steps:
        if step.operator not in _STRUCTURED:
            continue
        res = execution.results.get(step.id)
        if res is None:
            if any(g.step == step.id and g.kind == "missing_data" for g in execution.gaps):
                empty.append(step.id)
        elif step.operator == "metric_query" and res.result.get("no_matching_data"):
            empty.append(step.id)
        elif step.operator == "graph_expand" and not res.outputs.get("names"):
            empty.append(step.id)
    return empty


_CODE_TOKEN = re.compile(r"(?<![\w-])(?=[\w./-]*\d)(?=[\w./-]*[^\W\d_])\w[\w./-]*\w(?![\w-])")


def anchor_terms(route: Any, question: str = "") -> list[str]:
    """The anchors of a question as text: identifiers, then resolved anchors' names (codes as
    written), then the mentions of unresolved ones, then code-like words of the question (letters
    and digits, such as `QX-77`) that no catalog entry knows."""
    terms: list[str] = list(route.identifiers) if route is not None else []
    for anchor in getattr(route, "anchors", ()):
        name = anchor.resolved.name if anchor.resolved is not None else anchor.text
        if name and name not in terms:
            terms.append(name)
    for match in _CODE_TOKEN.finditer(question):
        token = match.group(0).rstrip(".")
        if not any(token.casefold() in t.casefold() for t in terms):
            terms.append(token)
    return terms


_REQUEST_WORDS = QUESTION_WORDS | {"me", "us", "please", "can", "could", "would", "you", "i", "we"}
"""Words of a leading request ("Explain", "Show me", "Can you find"), which name no content."""


def passage_query(route: Any, question: str) -> str:
    """The text a routed question's passage search looks for: the question as asked, because both
    branches read natural text (BM25 analysis drops stop words itself; the embedding model reads
    the whole sentence, where "not" and "more" carry meaning), with two changes: each resolved
    anchor's mention becomes its catalog name ("Supplier Beta's" -> "Supplier Beta"), and a
    leading request is removed ("Show me the returns policy" -> "the returns policy"). Empty when
    nothing is left."""
    text = question.strip()
    for anchor in getattr(route, "anchors", ()):
        if anchor.resolved is not None and anchor.text:
            text = text.replace(anchor.text, anchor.resolved.name, 1)
    words = text.split()
    while words and words[0].casefold().strip(",.:;!?") in _REQUEST_WORDS:
        words.pop(0)
    return " ".join(words)


def fallback_plan(route: Any, question: str) -> Plan | None:
    """The text routes for the question's anchors, for when a structured step found no data:
    an exact identifier lookup (when the question has identifiers), then a hybrid search for the
    anchors and the topic with the identifiers as its exact branch. None when there is nothing to
    search for."""
    identifiers = list(route.identifiers) if route is not None else []
    terms = anchor_terms(route, question)
    topic = (route.topic if route is not None else None) or ""
    query = " ".join(dict.fromkeys([*terms, topic])).strip() or question.strip()
    if not query:
        return None
    steps: list[dict[str, Any]] = []
    if identifiers:
        steps.append({"id": "fallback_exact", "operator": "exact_lookup",
                      "params": {"identifiers": identifiers, "limit": 10}})
    technical = technical_terms(question)
    steps.append({"id": "fallback_text", "operator": "hybrid_search",
                  "params": {"query": query[:1000], "limit": 5, "query_class": "lexical" if terms else "semantic",
                             **({"identifiers": identifiers} if identifiers else {}),
                             **({"terms": technical[:10]} if technical else {})}})
    return validate_plan({"steps": steps, "join": {"keys": ["ids", "keys", "names"], "missing": "report_gap"}})


def rescue_plan(route: Any, question: str, missing: Sequence[str]) -> Plan | None:
    """A passage search for `question` whose `terms` are the salient terms its evidence missed
    (`query.abstain`), so the passages holding them (found by the terms branch) rank first; None
    without a searchable query or terms."""
    query = passage_query(route, question) or question.strip()
    terms = [t for t in dict.fromkeys(missing) if t.strip()][:10]
    if not query or not terms:
        return None
    return validate_plan({"steps": [{"id": "rescue", "operator": "hybrid_search",
                                     "params": {"query": query[:1000], "limit": 5, "terms": terms,
                                                "query_class": text_query_class(route),
                                                "per_document_cap": PASSAGE_DOCUMENT_CAP}}],
                          "join": {"keys": ["ids", "keys", "names"], "missing": "report_gap"}})
