"""The router: a question → intents, anchors, identifiers and constraints (no store access).

Guarantees of `route(question, catalog, as_of=..., classifier=...)`:
- **Pure and deterministic.** Reads only its arguments (the catalog is the tenant's resolvable
  names, given by the caller); no clock, no network. With a classifier, the classifier is the
  only model call.
- **Intents.** Each base intent (exact_lookup, lexical, semantic, aggregate, relationship) gets a
  confidence in [0, 1]: the rule evidence combined as noisy-or of the fired rules' weights, then,
  when a classifier is given: if no rule intent reaches `INTENT_THRESHOLD`, each intent gets
  `max(rules, 0.9 × classifier, mean(rules, classifier))` (the classifier decides what the rules
  could not); otherwise only the passing intents may rise, to `max(rules, mean(rules,
  classifier))`, and the others keep their rule score. The classifier never lowers a rule's
  verdict. An identifier is strong `exact_lookup` evidence only when no other intent's rule fired
  (otherwise it is a filter or an anchor of that intent: weight 0.3). `intents` keeps those
  ≥ `INTENT_THRESHOLD`, sorted by confidence (ties in `BASE_ORDER`),
  plus `mixed` (confidence = the second best base intent) when two or more base
  intents pass. At least one intent is always present (the best one, or `semantic` at 0.3 when
  no evidence at all).
- **Anchors.** Catalog names, aliases and non-identifier keys are matched on word n-grams with
  rapidfuzz (case-insensitive, legal suffixes and possessives ignored, small typos tolerated);
  identifiers are matched exactly after `normalize_identifier`. Overlapping mentions keep the best
  (then longest). A company, supplier or product-group mention must cover a distinctive word of
  the name, not only its trade words (`TRADE_WORDS`: "supply", "trading", "systems", …), so the
  verb of "which suppliers supply X?" never names "… Supply AB". An anchor whose best
  candidates are ≥ 2 entities within `AMBIGUITY_MARGIN` is ambiguous
  (unless exactly one is an exact match); a capitalised name after an entity-kind word
  ("supplier Zeta Corp") that matches nothing is unresolved. Either sets `needs_clarification`
  and `clarify` to the first such anchor in question order. Generic words ("which supplier",
  "products") are never anchors.
- **Constraints.** `time` from `timephrases.find_time`; `currency` is an ISO code (from codes,
  symbols or currency words); `statuses` are canonical status words in question order.
- `topic` is what is left after removing anchors, identifiers, time phrases and stop/question
  words, or None when nothing is left.
- Text in quotation marks is what to search for: only the lexical cues read it. A duration asked
  of a rule ("for how many years must we keep …") is not a total, and "free of charge" / "no
  charge" is a condition, not an amount. Documents that "cover" (address, apply to) something
  when the question names no entity or identifier also raise `semantic`.
- `rules_fired` lists every rule that contributed, for the trace.

The parts live in `query/routing/`: `lexicon` (word lists), `tokens` (question tokens, catalog
name forms), `mentions` (anchors), `intents` (rule cues, classifier blend), `constraints`
(currency, statuses, topic); this module composes them and resolves clarifications.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from pydantic import BaseModel, ConfigDict
from rapidfuzz import fuzz

from manifold.query.classifier import IntentClassifier
from manifold.query.routing.constraints import find_currency, find_statuses, find_topic
from manifold.query.routing.intents import INTENT_THRESHOLD, blend, intent_scores, rule_scores
from manifold.query.routing.mentions import AMBIGUITY_MARGIN, MATCH_CUTOFF, Anchor, resolve_anchors
from manifold.query.routing.tokens import tokenize
from manifold.query.timephrases import TimeRange, find_time, time_spans
from manifold.query.types import CatalogEntry, IntentScore
from manifold.shared.identifiers import find_identifiers


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Route(_Frozen):
    """What the router understood; the planner compiles it into a plan."""

    intents: tuple[IntentScore, ...]
    identifiers: tuple[str, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    time: TimeRange | None = None
    currency: str | None = None
    statuses: tuple[str, ...] = ()
    topic: str | None = None
    needs_clarification: bool = False
    clarify: Anchor | None = None
    rules_fired: tuple[str, ...] = ()


def _first_unclear(anchors: list[Anchor]) -> Anchor | None:
    return next((a for a in anchors if a.resolved is None), None)


# ---- public API ----------------------------------------------------------------------------------

def route(question: str, catalog: Sequence[CatalogEntry], *, as_of: date,
          classifier: IntentClassifier | None = None) -> Route:
    """Route `question` against the tenant's `catalog`; see the module guarantees."""
    tokens = tokenize(question)
    identifiers = find_identifiers(question)
    time = find_time(question, as_of)
    anchors, taken = resolve_anchors(question, tokens, catalog, identifiers, as_of)
    rules, fired = rule_scores(question, identifiers, anchored=bool(anchors))
    learned = classifier.predict(question) if classifier is not None else None
    if learned is not None:
        fired.append("classifier:blended")
    currency, statuses = find_currency(question), find_statuses(question)
    fired += [f"identifier:{i}" for i in identifiers]
    fired += [f"time:{time.phrase}"] if time else []
    fired += [f"currency:{currency}"] if currency else []
    fired += [f"status:{s}" for s in statuses]
    fired += [_anchor_rule(a) for a in anchors]
    clarify = _first_unclear(anchors)
    return Route(
        intents=intent_scores(blend(rules, learned)),
        identifiers=tuple(identifiers),
        anchors=tuple(anchors),
        time=time,
        currency=currency,
        statuses=statuses,
        topic=find_topic(question, tokens, taken + time_spans(question, as_of)),
        needs_clarification=clarify is not None,
        clarify=clarify,
        rules_fired=tuple(fired),
    )


def _anchor_rule(anchor: Anchor) -> str:
    if anchor.resolved is not None:
        return f"anchor:{anchor.kind}:{anchor.text}->{anchor.resolved.entity_id}"
    state = "ambiguous" if anchor.candidates else "unresolved"
    return f"anchor:{anchor.kind}:{anchor.text}:{state}"


def apply_choice(route: Route, choice: str) -> Route:
    """`route` with its `clarify` anchor resolved to the candidate `choice` names (entity id, key or
    name, case-insensitive; else the one name fuzzily ≥ 85). Raises ValueError when there is
    nothing to clarify or no candidate matches; other anchors are unchanged."""
    if route.clarify is None:
        raise ValueError("the route has nothing to clarify")
    chosen = _match_choice(route.clarify.candidates, choice)
    if chosen is None:
        names = ", ".join(c.name for c in route.clarify.candidates) or "no candidates"
        raise ValueError(f"{choice!r} is not one of the candidates for {route.clarify.text!r} ({names})")
    target = route.clarify
    fixed = target.model_copy(update={"resolved": chosen, "kind": chosen.kind,
                                      "candidates": (chosen,), "score": 1.0})
    position = route.anchors.index(target)
    anchors = (*route.anchors[:position], fixed, *route.anchors[position + 1:])
    clarify = _first_unclear(list(anchors))
    return route.model_copy(update={
        "anchors": anchors, "clarify": clarify, "needs_clarification": clarify is not None,
        "rules_fired": (*route.rules_fired, f"clarify:{target.text}->{chosen.entity_id}"),
    })


def _match_choice(candidates: Sequence[CatalogEntry], choice: str) -> CatalogEntry | None:
    wanted = choice.strip().casefold()
    if not wanted:
        return None
    for entry in candidates:
        if wanted in {entry.entity_id.casefold(), entry.key.casefold(), entry.name.casefold(),
                      *(a.casefold() for a in entry.aliases)}:
            return entry
    scored = sorted(((fuzz.WRatio(wanted, e.name.casefold()), e) for e in candidates),
                    key=lambda se: -se[0])
    if scored and scored[0][0] >= MATCH_CUTOFF and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        return scored[0][1]
    return None


__all__ = ["AMBIGUITY_MARGIN", "INTENT_THRESHOLD", "Anchor", "Route", "apply_choice", "find_currency",
           "find_statuses", "route"]
