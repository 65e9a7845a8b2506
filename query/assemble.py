"""Assembles the reply from an execution: answer text from evidence only, status, and the checks.

Guarantees:
- **Evidence only.** The answer is filled from templates whose every value comes from a step's
  `result`, `outputs` or evidence; no other text source exists here. An optional narrator (an
  LLM) may rewrite it, but its text is dropped whole if it cites an evidence id that is not in
  the pack or shows a number that is not a tool result (`check_numbers`, `check_citations`).
- **Numbers are the tool's numbers.** `check_numbers` confirms every decimal shown in the answer
  equals (as a string) a value in a step result; a mismatch turns the reply into `error`
  instead of showing an unverifiable figure.
- **Completeness.** Any gap makes an otherwise answered reply `partial`, and the gaps are listed;
  a metric with `matched_line_count == 0` is "no matching data", not zero. Nothing found at all
  is `no_answer`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from manifold.query import passage
from manifold.query.engine import Execution
from manifold.query.passage import best_passage, term_pattern, units
from manifold.query.plan import REF_PATTERN, Plan
from manifold.query.types import Evidence, Gap, ReplyStatus

_NUMBER = re.compile(r"(?<![\w.-])-?\d+\.\d+(?![\w.-])")
_SNIPPET = 240


class Narrator(Protocol):
    """Optional: rewrites the templated answer. Its output is checked like the template's."""

    def narrate(self, question: str, answer: str, evidence: Sequence[Evidence]) -> str: ...


def _join(names: Iterable[str]) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _money(totals: Mapping[str, str]) -> str:
    return _join(f"{amount} {currency}" for currency, amount in sorted(totals.items()))


def _metric_text(result: Mapping[str, Any]) -> str | None:
    metric = result.get("metric")
    lines = int(result.get("matched_line_count", 0) or 0)
    if metric in ("total_spend", "revenue_at_risk") and lines == 0:
        return "No matching data: no recognised lines match these filters (this is not a total of zero)."
    if metric == "total_spend":
        return (f"Total recognised spend: {_money(result.get('totals', {}))} "
                f"over {lines} invoice and credit-note lines.")
    if metric == "revenue_at_risk":
        orders = result.get("orders") or []
        return (f"Revenue at risk: {_money(result.get('totals', {}))} across "
                f"{len(orders)} orders ({_join(orders)}).")
    if metric == "unit_price_on":
        parts = []
        for code, info in sorted((result.get("prices") or {}).items()):
            if not isinstance(info, Mapping):
                continue
            if info.get("source") == "catalog" and info.get("catalog_unit_price"):
                supplier = f" from {info['supplier']}" if info.get("supplier") else ""
                parts.append(f"{code}: {info['catalog_unit_price']} {info.get('currency') or ''}".rstrip()
                             + f" (catalog price{supplier}: price list or agreement schedule)")
            elif info.get("invoice_unit_price"):
                catalog = (f"; the catalog lists {info['catalog_unit_price']}" if info.get("catalog_unit_price")
                           and info["catalog_unit_price"] != info["invoice_unit_price"] else "")
                parts.append(f"{code}: {info['invoice_unit_price']} {info.get('currency') or ''}".rstrip()
                             + f" on invoice {info.get('invoice')} of {info.get('issued_on')}{catalog}")
        return ("Unit price " + "; ".join(parts) + ".") if parts else "No matching data: no price found for that date."
    return None


_RELATION_PHRASES = {
    "vendors": "Approved vendors",
    "vendor_products": "Products they supply",
    "supplied": "Products supplied",
    "suppliers": "Suppliers",
    "orders": "Orders",
    "groups": "Product groups",
    "group_products": "Products in the group",
    "group_suppliers": "Suppliers of those products",
}


def compose(question: str, plan: Plan, execution: Execution) -> tuple[str, dict[str, Any]]:
    """(answer text, typed result) from the executed steps, in plan order. Fallback text steps
    (`fallback_*`, see `planner.fallback_plan`) are left to `fallback_quote`."""
    sentences: list[str] = []
    result: dict[str, Any] = {}
    quoted = rescued = False
    for step in plan.steps:
        res = execution.results.get(step.id)
        if res is None or step.id.startswith(FALLBACK_PREFIX):
            continue
        if step.operator == "metric_query":
            text = _metric_text(res.result)
            if text:
                sentences.append(text)
            result[step.id] = res.result
        elif step.operator == "graph_expand":
            names = list(res.outputs.get("names", ()))
            label = _RELATION_PHRASES.get(step.id, "Related")
            sentences.append(f"{label}: {_join(names)}." if names else f"{label}: none found.")
            result[step.id] = {"ids": list(res.outputs.get("ids", ())), "names": names,
                               "keys": list(res.outputs.get("keys", ()))}
        elif step.operator == "resolve_entity":
            result[step.id] = res.result
        else:
            hits = list(res.hits)
            if not hits:
                continue
            if step.operator == "exact_lookup":
                docs = sorted({h.document_id for h in hits if h.identity})
                sentences.append(f"Exact matches in {len(docs)} documents: {_join(docs)}." if docs
                                 else "No document carries that identifier exactly.")
            result[step.id] = {"documents": list(dict.fromkeys(h.document_id for h in hits)),
                               "chunks": [h.chunk_id for h in hits]}
            if step.operator == "hybrid_search":
                if quoted and (rescued or step.id == RESCUE_STEP):
                    continue  # a rescue search (planner.rescue_plan) and its search quote one line
                quoted, rescued = True, rescued or step.id == RESCUE_STEP
            terms = tuple(getattr(step.params, "terms", ()) or ())
            picked = best_passage(question, hits, terms)
            if picked is None:
                best, snippet = hits[0], _snippet(hits[0].text)
            else:
                best, snippet = picked
            sentences.append(f"Most relevant passage ({best.document_id}): \u201c{snippet}\u201d")
            result[step.id]["best_chunk"] = best.chunk_id
    return " ".join(sentences), result


FALLBACK_PREFIX = "fallback_"
RESCUE_STEP = "rescue"
def fallback_quote(plan: Plan, execution: Execution, terms: Sequence[str], empty: Sequence[str], *,
                   documents: set[str], topic: str = "") -> tuple[str, dict[str, Any]] | None:
    """When structured steps (`empty`) found no data: the line or sentence of a fallback hit
    (exact hits first, then hybrid) that names the most anchor `terms` (each worth two topic
    words), then the most words of `topic`, quoted, with the reason that any number in it was
    read from text, not computed from records. A line must name an anchor (or, without anchors,
    two topic words). None when no line qualifies: a passage about something else would only look
    like an answer. Only hits of `documents` (those that passed the final check) count."""
    patterns = [(t, p) for t in terms if (p := term_pattern(t)) is not None]
    words = [p for w in dict.fromkeys(re.findall(r"[^\W_]+", topic.casefold()))
             if len(w) > 1 or w.isdigit()
             if (p := term_pattern(w)) is not None]
    best: tuple[float, int, Any, int, int, int, str] | None = None
    order = 0
    for step in plan.steps:
        res = execution.results.get(step.id)
        if res is None or not step.id.startswith(FALLBACK_PREFIX):
            continue
        for hit in res.hits:
            if hit.document_id not in documents:
                continue
            for start, end in units(hit.text):
                unit = hit.text[start:end]
                named = [(t, m) for t, p in patterns if (m := p.search(unit))]
                covered = [m for p in words if (m := p.search(unit))]
                if not named and (patterns or len(covered) < 2):
                    continue
                score = 2 * len(named) + len(covered)
                order += 1
                first = min(m.start() for m in [*(m for _, m in named), *covered])
                anchor = named[0][0] if named else ""
                if best is None or score > best[0]:
                    best = (score, order, hit, start, end, start + first, anchor)
    if best is None:
        return None
    _, _, hit, start, end, first, anchor = best
    quote = passage.quote(hit.text, start, end, first)
    reason = (f"{_join(list(empty))}: no data in the records; the answer quotes the text of "
              f"{hit.document_id}, so any number in it was read from text, not computed from records")
    text = f"From the text of {hit.document_id} (not computed from records): \u201c{quote}\u201d"
    return text, {"reason": reason, "document": hit.document_id, "chunk": hit.chunk_id, "anchor": anchor,
                  "quote": quote}


def _snippet(text: str, limit: int = _SNIPPET) -> str:
    """`text` with whitespace collapsed, cut to `limit` characters at a space (never inside a word
    or a number: a cut "3321.25" read as "3321.2" failed the number check) and ending in "…"."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit + 1)
    return flat[:cut if cut > 0 else limit].rstrip() + "…"


def _allowed_numbers(value: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(value, Mapping):
        for v in value.values():
            out |= _allowed_numbers(v)
    elif isinstance(value, list | tuple | set):
        for v in value:
            out |= _allowed_numbers(v)
    elif isinstance(value, str):
        out.update(_NUMBER.findall(value))
        out.add(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.add(str(value))
    return out


def check_numbers(answer: str, result: Mapping[str, Any], evidence: Sequence[Evidence]) -> list[str]:
    """Decimals in `answer` that are not a tool result or quoted evidence text (should be none).
    A fallback quote (`result["fallback"]`) is not a tool result: its numbers must be in the
    evidence text it was read from."""
    allowed = _allowed_numbers({k: v for k, v in result.items() if k != "fallback"})
    for ev in evidence:
        if ev.text:
            allowed.update(_NUMBER.findall(ev.text))
        allowed |= _allowed_numbers(ev.claims)
    return [n for n in _NUMBER.findall(answer) if n not in allowed]


def check_citations(text: str, evidence: Sequence[Evidence]) -> list[str]:
    """Evidence ids cited as `[ev_...]` in `text` that are not in the evidence pack."""
    known = {ev.evidence_id for ev in evidence}
    return [c for c in re.findall(r"\[(ev_[A-Za-z0-9_]+)\]", text) if c not in known]


def status_for(answer: str, evidence: Sequence[Evidence], gaps: Sequence[Gap],
               result: Mapping[str, Any]) -> ReplyStatus:
    """`no_answer` when nothing was found and nothing failed (missing data is an answer: there is
    none); `partial` when something failed or is missing beside what was found; else `answered`."""
    found = evidence or any(isinstance(v, Mapping) and v.get("matched_line_count") for v in result.values())
    if not found:
        failed = any(g.kind != "missing_data" for g in gaps)
        return "partial" if failed else "no_answer"
    return "partial" if gaps else "answered"


def _name_key(name: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", name.lower()).split())


def coverage_gaps(plan: Plan, execution: Execution) -> list[Gap]:
    """Suppliers a metric was scoped to (by an earlier graph step) that have no matching lines.

    "Total spend with our approved vendors" is complete only if every approved vendor was looked
    at; a vendor with no invoice data is named as missing (seed 000 "Failure Boundaries"), so
    the reply is `partial` rather than silently summing the others. Skipped when the metric's
    evidence was capped (then absence of a supplier proves nothing)."""
    gaps: list[Gap] = []
    for step in plan.steps:
        if step.operator != "metric_query" or step.id not in execution.results:
            continue
        ref = step.params.where.supplier_names
        match = REF_PATTERN.match(ref) if isinstance(ref, str) else None
        if match is None or match.group(1) not in execution.results:
            continue
        res = execution.results[step.id]
        if any(g.kind == "capped" for g in res.gaps):
            continue
        expected = execution.results[match.group(1)].outputs.get("names", ())
        seen = {_name_key(str(ev.claims.get("supplier") or "")) for ev in res.evidence if ev.kind == "record"}
        missing = [name for name in expected if _name_key(name) not in seen]
        if missing:
            gaps.append(Gap(step=step.id, kind="missing_data",
                            detail=f"no matching {step.params.metric.replace('_', ' ')} lines for: {_join(missing)}"))
    return gaps
