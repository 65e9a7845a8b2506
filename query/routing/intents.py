"""Intent scoring: rule cues over the question, optionally blended with a classifier (pure).

Each base intent gets a confidence in [0, 1]: the fired cues' weights combined as noisy-or (see
`rule_scores`), then `blend` with the classifier's scores as the router's docstring states, and
`intent_scores` keeps those ≥ `INTENT_THRESHOLD` (plus `mixed` when two or more pass).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from manifold.query.types import IntentScore, IntentType

INTENT_THRESHOLD = 0.5
BASE_ORDER: tuple[IntentType, ...] = ("exact_lookup", "relationship", "aggregate", "semantic", "lexical")


_QUOTED = re.compile(r"\"[^\"]{2,}\"|“[^”]{2,}”|(?<![A-Za-z])'[^']{3,}'(?![A-Za-z])")
_DURATION = (r"how\s+(?:many|much)\s+(?:more\s+)?(?:years?|months?|weeks?|days?|hours?|minutes?|time)\s+"
             r"(?:must|should|do|does|did|can|could|may|will|would|shall|have|has|is|are|need)\b")
"""A duration asked of a rule or practice ("for how many years must we keep …"): not a count of
records but a question about what the documents require."""
_NO_PRICE = r"(?<!free\sof\s)(?<!\bno\s)(?<!without\s)(?<!\bno\sextra\s)"
"""Before a price word: "free of charge", "no charge", "without charge" state a condition, not an amount."""


_DOCUMENTS_ABOUT = re.compile(
    r"\b(?:which|what)\s+(?:contracts?|agreements?|polic(?:y|ies)|documents?|clauses?|terms)\s+"
    r"(?:cover|covers|address|addresses|deal\s+with|deals\s+with|apply\s+to|applies\s+to|govern|governs)\b",
    re.IGNORECASE)
"""Documents as the subject of a covering verb: with no entity named, the object is a topic."""


@dataclass(frozen=True)
class _Cue:
    intent: IntentType
    weight: float
    name: str
    pattern: re.Pattern[str]


def _cue(intent: IntentType, weight: float, name: str, pattern: str) -> _Cue:
    return _Cue(intent, weight, name, re.compile(pattern, re.IGNORECASE))


CUES: tuple[_Cue, ...] = (
    _cue("exact_lookup", 0.8, "lookup_verb_record",
         r"\b(?:find|show|open|get|fetch|retrieve|look\s*up|pull\s+up|display)\s+(?:me\s+)?(?:the\s+)?"
         r"(?:invoice|order|purchase\s+order|po|contract|credit\s+note|product|sku)\b"),
    _cue("exact_lookup", 0.7, "record_number", r"\b(?:invoice|order|contract|credit\s+note)\s+(?:no\.?|"
         r"number|#)?\s*\d[\d/-]{2,}"),
    _cue("exact_lookup", 0.5, "status_or_details_of",
         r"\b(?:status|details?|line\s+items|copy)\s+(?:of|for|on)\s+(?:invoice|order|po|contract)\b"),
    _cue("lexical", 0.8, "mentions_term",
         r"\b(?:mention(?:s|ed|ing)?|contain(?:s|ing)?\s+the\s+(?:word|term|phrase|string)|"
         r"exact\s+(?:phrase|wording|term)|keyword|literally|verbatim|spelled|the\s+term)\b"),
    _cue("lexical", 0.6, "technical_code",
         r"(?<![\w-])(?:ip\d{2}|iso\s?\d{3,5}|en\s?\d{3,5}|iec\s?\d{3,5}|din\s?\d{2,5}|atex|dn\d{2,3}|"
         r"pn\d{2}|\d+\s?-\s?\d+\s?ma|\d+(?:\.\d+)?\s?(?:bar|psi|kpa|mpa|nm|vac|vdc|mm))(?![\w-])"),
    _cue("lexical", 0.6, "technical_term",
         r"\b(?:differential\s+pressure|calibration\s+(?:bench|certificates?)|lockout|tag-?out|"
         r"torque|firmware|shielded|thermocouple|rtd|hart|modbus|profibus|incoterms?|"
         r"ex-?works|fob|ddp|penalty\s+clause)\b"),
    _cue("lexical", 0.5, "search_for", r"\b(?:search|grep)\s+(?:for|the)\b"),
    _cue("semantic", 0.8, "explain",
         r"\b(?:explain|describe|summari[sz]e|summary|overview|outline|elaborate|clarify)\b"),
    _cue("semantic", 0.75, "why_how",
         r"\b(?:why|how\s+(?:do|does|did|should|can|could|is|are|to|would|must|often|long))\b"),
    _cue("semantic", 0.75, "what_does_say",
         r"\bwhat\s+(?:does|do|did)\b.{0,60}\b(?:say|says|mean|require|cover|state|specify|allow)\b|"
         r"\bwhat\s+(?:is|are)\s+the\s+(?:rules?|process|procedure|policy|terms|conditions|"
         r"requirements?|obligations?)\b"),
    _cue("semantic", 0.75, "duration_requirement", r"\b" + _DURATION),
    _cue("semantic", 0.6, "permission_question",
         r"^\s*(?:can|may|must|should|do|does|is|are)\s+(?:i|we|they|you|the\s+supplier|suppliers|"
         r"installers|the\s+buyer)\b"),
    _cue("semantic", 0.7, "policy_terms",
         r"\b(?:polic(?:y|ies)|requirements?|procedures?|guidelines?|guidance|obligations?|"
         r"conditions|terms|warranty|warranties|clauses?|rules?|instructions|process|"
         r"best\s+practices?|safety|compliance|responsib\w+)\b"),
    _cue("semantic", 0.55, "document_reference",
         r"\b(?:notices?|notifications?|announcements?|letters?|emails?|memos?|manuals?|"
         r"site\s+visit\s+notes?)\b"),
    _cue("aggregate", 0.9, "sum_total",
         r"\b(?:total|totals|sum|summed|spend|spent|spending|revenue|turnover|(?!" + _DURATION + r")(?:how\s+much|"
         r"how\s+many)|count|number\s+of|average|avg|mean|median|at\s+risk|aggregate\w*|"
         r"subtotal|volume\s+of)\b"),
    _cue("aggregate", 0.75, "price_amount",
         r"\b" + _NO_PRICE + r"(?:unit\s+price|price|prices|priced|cost|costs|costing|amount|amounts|value|"
         r"paid\s+for|pay|paid|charge|charges|charged|billed|invoiced\s+amount)\b"),
    _cue("aggregate", 0.6, "ranking",
         r"\b(?:top\s+\d+|largest|biggest|highest|lowest|cheapest|most\s+expensive|minimum|maximum|"
         r"min|max|ranking|rank)\b"),
    _cue("relationship", 0.85, "which_entities",
         r"\b(?:which|what)\s+(?:of\s+(?:our|the)\s+)?(?:(?!(?:is|was|are|were|did|does|do|has|have|had|"
         r"will|would|can|could|should)\b)\w+\s+)?(?:suppliers?|vendors?|products?|companies|company|"
         r"customers?|groups?|contracts?|orders?|invoices?|manufacturers?|items)\b"),
    _cue("relationship", 0.7, "list_entities",
         r"\b(?:list|name|show)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?:\w+\s+)?(?:suppliers|vendors|"
         r"products|companies|customers|groups|manufacturers)\b"),
    _cue("relationship", 0.9, "relation_verb",
         r"\b(?:suppl(?:y|ies|ied|ying)|approved\s+(?:vendors?|suppliers?)|approved\s+for|"
         r"belongs?\s+to|belonging\s+to|part\s+of|connected\s+(?:to|with)|linked\s+(?:to|with)|"
         r"related\s+to|affected\s+by|impacted\s+by|covered\s+by|covers?|party\s+to|ordered\s+by|"
         r"placed\s+with|issued\s+by|billed\s+to|sourced?\s+from|buy\s+from|bought\s+from|"
         r"purchased?\s+from|provided?\s+by|provides?|sells?|sold\s+by|work\s+with|relationship)\b"),
    _cue("relationship", 0.85, "who_supplies", r"\bwho\s+(?:supplies|sells|provides|makes|delivers)\b"),
)


def rule_scores(question: str, identifiers: list[str],
                 anchored: bool = True) -> tuple[dict[IntentType, float], list[str]]:
    """Rule confidence per base intent (noisy-or of the fired cues' weights) and the fired rule names."""
    misses: dict[IntentType, float] = {i: 1.0 for i in BASE_ORDER}
    fired: list[str] = []

    def fire(intent: IntentType, weight: float, name: str) -> None:
        misses[intent] *= 1.0 - weight
        fired.append(f"intent:{intent}:{name}")

    if _QUOTED.search(question):
        fire("lexical", 0.9, "quoted_phrase")
    # A quoted phrase is what to search for, not what is asked: only the lexical cues read it
    # ("which documents mention \"free of charge\"" asks for a search, not for an amount).
    unquoted = _QUOTED.sub(" ", question)
    for cue in CUES:
        if cue.pattern.search(question if cue.intent == "lexical" else unquoted):
            fire(cue.intent, cue.weight, cue.name)
    if not anchored and not identifiers and _DOCUMENTS_ABOUT.search(question):
        # Documents that "cover" something when nothing named is the object ("which contracts
        # cover the return of damaged goods?") asks what the documents say about a topic: a
        # search as much as a traversal.
        fire("semantic", 0.75, "documents_about_topic")
    if identifiers:
        # An identifier asks for its record only when nothing else is asked of it ("INV-0148?",
        # "status of PO-7001"); in "what did we spend on PRD-482" it is a filter of the total and
        # in "who supplies PRD-482" an anchor of the traversal, so it is weak evidence there.
        asked_else = any(misses[i] < 1.0 for i in BASE_ORDER if i != "exact_lookup")
        if asked_else:
            fire("exact_lookup", 0.3, "identifier_as_filter")
        else:
            fire("exact_lookup", 0.9, "identifier")
    return {i: round(1.0 - m, 4) for i, m in misses.items()}, fired


def blend(rules: dict[IntentType, float],
           learned: dict[IntentType, float] | None) -> dict[IntentType, float]:
    """Rule scores blended with the classifier's (`learned`), which never lowers a rule's verdict."""
    if learned is None:
        return dict(rules)
    # When a rule already decides some intent, the classifier may only reinforce the intents the
    # rules passed: its labelled set tags every identifier as a lookup and every named supplier as
    # a relationship, which added a false second intent to most totals (golden set, 2026-11-29:
    # exact intent-set accuracy 0.61 with free blending, 0.96 with this one).
    decided = any(rule >= INTENT_THRESHOLD for rule in rules.values())
    out = {}
    for intent, rule in rules.items():
        model = float(learned.get(intent, 0.0))
        if decided:
            out[intent] = round(min(1.0, max(rule, (rule + model) / 2)), 4) if rule >= INTENT_THRESHOLD else rule
        else:
            out[intent] = round(min(1.0, max(rule, 0.9 * model, (rule + model) / 2)), 4)
    return out


def intent_scores(scores: dict[IntentType, float]) -> tuple[IntentScore, ...]:
    """The passing intents, best first (plus `mixed`); never empty (see the router's guarantees)."""
    order = {intent: k for k, intent in enumerate(BASE_ORDER)}
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    passing = [IntentScore(type=i, confidence=c) for i, c in ranked if c >= INTENT_THRESHOLD]
    if len(passing) >= 2:
        passing.append(IntentScore(type="mixed", confidence=passing[1].confidence))
    elif not passing:
        best, confidence = ranked[0]
        passing = [IntentScore(type=best, confidence=confidence) if confidence > 0
                   else IntentScore(type="semantic", confidence=0.3)]
    return tuple(sorted(passing, key=lambda s: -s.confidence))
