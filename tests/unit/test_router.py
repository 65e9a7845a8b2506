from __future__ import annotations

from datetime import date

import pytest
from pydantic import ValidationError

from manifold.query.router import Anchor, Route, apply_choice, find_currency, find_statuses, route
from manifold.query.types import CatalogEntry

AS_OF = date(2026, 5, 10)


def _entry(kind: str, eid: str, name: str, key: str | None = None,
           aliases: tuple[str, ...] = ()) -> CatalogEntry:
    return CatalogEntry(kind=kind, entity_id=eid, key=key or name.lower(), name=name, aliases=aliases)


CATALOG = [
    _entry("company", "ent_ca", "Company A"),
    _entry("company", "ent_nw", "Northwind Traders"),
    _entry("company", "ent_co", "Contoso Manufacturing"),
    _entry("supplier", "ent_sb", "Supplier Beta"),
    _entry("supplier", "ent_sg", "Supplier Gamma"),
    _entry("supplier", "ent_as", "Acme Sensors Ltd", key="acme sensors"),
    _entry("supplier", "ent_av", "Acme Valves Inc", key="acme valves"),
    _entry("supplier", "ent_dc", "Delta Controls GmbH", key="delta controls"),
    _entry("supplier", "ent_ps", "Precision Sensors GmbH", key="precision sensors"),
    _entry("product_group", "ent_gm", "Monitoring Products"),
    _entry("product_group", "ent_gc", "Control Modules"),
    _entry("product_group", "ent_gv", "Valves"),
    _entry("product", "ent_p401", "temperature sensor", key="PRD-401"),
    _entry("product", "ent_p402", "flow meter", key="PRD-402"),
    _entry("product", "ent_p403", "control module", key="PRD-403"),
    _entry("product", "ent_p482", "differential pressure transmitter", key="PRD-482"),
    _entry("invoice", "ent_inv13", "INV-2026-0013", key="INV-2026-0013"),
]


def r(question: str) -> Route:
    return route(question, CATALOG, as_of=AS_OF)


def types(result: Route) -> list[str]:
    return [i.type for i in result.intents]


def resolved(result: Route) -> dict[str, str]:
    return {a.text: a.resolved.entity_id for a in result.anchors if a.resolved}


# ---- intents ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("question", "intent"), [
    ("Find invoice INV-2026-0013", "exact_lookup"),
    ("Show me order 2026-0042", "exact_lookup"),
    ("Which documents mention \"differential pressure calibration\"?", "lexical"),
    ("Search for IP67 housings", "lexical"),
    ("Explain the calibration requirements", "semantic"),
    ("What is the returns policy?", "semantic"),
    ("Why are late deliveries penalised?", "semantic"),
    ("What was the total spend last quarter?", "aggregate"),
    ("How many invoices were posted in March?", "aggregate"),
    ("Which suppliers supply flow meters?", "relationship"),
    ("Who supplies Control Modules?", "relationship"),
    ("Is Delta Controls an approved vendor for Company A?", "relationship"),
])
def test_each_intent_fires(question: str, intent: str) -> None:
    result = r(question)
    assert types(result)[0] == intent or intent in types(result), result.intents
    assert all(0.0 <= i.confidence <= 1.0 for i in result.intents)


def test_intents_sorted_and_thresholded_and_never_empty() -> None:
    result = r("Was it from supplier Beta or Gamma?")
    assert len(result.intents) >= 1
    confidences = [i.confidence for i in r("What was Company A's total spend last quarter?").intents]
    assert confidences == sorted(confidences, reverse=True)
    assert all(c >= 0.5 for c in confidences)
    assert r("hello").intents[0].type == "semantic"


def test_multi_intent_question_is_mixed() -> None:
    result = r("Which delayed orders are affected by the Supplier Beta notice, "
               "and what is the revenue at risk?")
    found = set(types(result))
    assert {"relationship", "aggregate", "mixed"} <= found
    assert found & {"semantic", "lexical"}
    mixed = next(i for i in result.intents if i.type == "mixed")
    assert mixed.confidence >= 0.5
    assert resolved(result) == {"Supplier Beta": "ent_sb"}
    assert result.statuses == ("delayed",)
    assert result.topic is not None and "notice" in result.topic and "Beta" not in result.topic


@pytest.mark.parametrize("question", [
    "For how many years must we keep the calibration certificates?",
    "How many days do we have to report a damaged delivery?",
    "How many weeks should a sensor be stored before installation?",
])
def test_a_duration_asked_of_a_rule_is_not_a_total(question: str) -> None:
    result = r(question)
    assert "aggregate" not in types(result), result.rules_fired
    assert "semantic" in types(result)


def test_how_many_records_is_still_a_total() -> None:
    assert "aggregate" in types(r("How many invoices were posted in March?"))
    assert "aggregate" in types(r("How many days late were the delayed orders on average?"))


@pytest.mark.parametrize("question", [
    'Which documents mention "free of charge"?',
    "Which documents mention “total cost of ownership”?",
])
def test_quoted_text_is_searched_not_asked(question: str) -> None:
    result = r(question)
    assert types(result)[0] == "lexical"
    assert "aggregate" not in types(result), result.rules_fired


@pytest.mark.parametrize("question", [
    "Is a faulty item replaced free of charge?",
    "Are repairs done at no charge during the warranty?",
])
def test_free_of_charge_is_a_condition_not_an_amount(question: str) -> None:
    assert "aggregate" not in types(r(question))


def test_price_words_still_ask_for_amounts() -> None:
    assert "aggregate" in types(r("What does Supplier Beta charge for the flow meter?"))
    assert "aggregate" in types(r("What was the unit price of the control module in March?"))


def test_a_relation_verb_with_nothing_named_is_also_a_search() -> None:
    result = r("Which contracts cover the return of damaged goods?")
    assert "semantic" in types(result), result.rules_fired
    named = r("Which contracts cover Control Modules?")
    assert "semantic" not in types(named)
    assert "relationship" in types(named)


def test_single_intent_is_not_mixed() -> None:
    assert "mixed" not in types(r("Explain the warranty policy"))


class StubClassifier:
    def __init__(self, probs: dict[str, float]) -> None:
        self.probs = probs
        self.seen: list[str] = []

    def predict(self, text: str) -> dict[str, float]:
        self.seen.append(text)
        return self.probs


def test_classifier_blends_with_rules() -> None:
    question = "Tell me everything about valves"
    stub = StubClassifier({"exact_lookup": 0.0, "lexical": 0.0, "semantic": 0.9, "aggregate": 0.0,
                           "relationship": 0.1})
    result = route(question, CATALOG, as_of=AS_OF, classifier=stub)  # type: ignore[arg-type]
    assert stub.seen == [question]
    assert result.intents[0].type == "semantic"
    assert result.intents[0].confidence == pytest.approx(0.81)
    assert "classifier:blended" in result.rules_fired
    # a confident rule is never lowered by a doubtful classifier
    ruled = route("What was the total spend last quarter?", CATALOG, as_of=AS_OF,
                  classifier=StubClassifier({"aggregate": 0.0}))  # type: ignore[arg-type]
    assert ruled.intents[0].type == "aggregate" and ruled.intents[0].confidence >= 0.9



def test_classifier_only_reinforces_when_the_rules_decided() -> None:
    # The rules decide "aggregate"; a classifier sure of a second intent cannot add it...
    eager = StubClassifier({"exact_lookup": 0.99, "lexical": 0.0, "semantic": 0.0, "aggregate": 0.99,
                            "relationship": 0.99})
    ruled = route("What did we spend on PRD-401 last quarter?", CATALOG, as_of=AS_OF,
                  classifier=eager)  # type: ignore[arg-type]
    assert set(types(ruled)) == {"aggregate"}
    assert ruled.intents[0].confidence > 0.9  # ...but it may reinforce the passing one
    # With no decisive rule, the classifier decides (0.9 x its probability).
    silent = route("Tell me everything about valves", CATALOG, as_of=AS_OF,
                   classifier=eager)  # type: ignore[arg-type]
    assert {"exact_lookup", "aggregate", "relationship"} <= set(types(silent))


def test_an_identifier_is_a_lookup_only_when_nothing_else_is_asked() -> None:
    assert set(types(r("INV-2026-0013?"))) == {"exact_lookup"}
    assert set(types(r("Find invoice INV-2026-0013 and explain the payment terms"))) >= {"exact_lookup", "semantic"}
    assert "exact_lookup" not in types(r("What did we spend on PRD-401 last quarter?"))
    assert "exact_lookup" not in types(r("Who supplies PRD-401?"))
    assert "intent:exact_lookup:identifier_as_filter" in r("Who supplies PRD-401?").rules_fired


# ---- identifiers, time, currency, statuses ------------------------------------------------------

def test_identifiers_are_normalised_and_anchor_catalog_entries() -> None:
    result = r("Compare inv 2026/0013 with PO 7002 and prd401")
    assert result.identifiers == ("INV-2026-0013", "PO-7002", "PRD-401")
    assert resolved(result) == {"INV-2026-0013": "ent_inv13", "PRD-401": "ent_p401"}
    assert "exact_lookup" in types(result)


def test_time_currency_and_statuses() -> None:
    result = r("Total of unpaid and overdue invoices in € between 2026-01-01 and 2026-03-31")
    assert result.time is not None
    assert (result.time.start, result.time.end) == (date(2026, 1, 1), date(2026, 4, 1))
    assert result.currency == "EUR"
    assert result.statuses == ("unpaid", "overdue")


@pytest.mark.parametrize(("text", "code"), [
    ("spend in USD", "USD"), ("in euros", "EUR"), ("£ 300", "GBP"), ("$40", "USD"),
    ("in pounds sterling", "GBP"), ("total spend", None), ("supplier Euro Valves", None),
])
def test_currency(text: str, code: str | None) -> None:
    assert find_currency(text) == code


def test_weak_statuses_need_a_record_noun() -> None:
    assert find_statuses("list open invoices and paid orders") == ("open", "paid")
    assert find_statuses("Can we open a new account? Who paid attention?") == ()
    assert find_statuses("orders that are late") == ("delayed",)


# ---- entity resolution --------------------------------------------------------------------------

def test_resolves_names_typos_suffixes_and_possessives() -> None:
    result = r("What was Company A's spend with Acme Sensors and Supplier Betta on Monitoring Products?")
    assert resolved(result) == {"Company A's": "ent_ca", "Acme Sensors": "ent_as",
                                "Supplier Betta": "ent_sb", "Monitoring Products": "ent_gm"}
    assert not result.needs_clarification
    typo = next(a for a in result.anchors if a.text == "Supplier Betta")
    assert 0.85 <= typo.score < 1.0


def test_product_by_name_and_kind_hint() -> None:
    assert resolved(r("Who supplies flow meters?")) == {"flow meters": "ent_p402"}
    assert resolved(r("Which products belong to the Control Modules product group?")) == {
        "Control Modules": "ent_gc"}
    assert resolved(r("What is the price of one control module?")) == {"control module": "ent_p403"}


def test_generic_words_are_not_anchors() -> None:
    for question in ("Which supplier supplies PRD-401?", "List all products and suppliers",
                     "Which sensors are delayed?", "select the cheapest supplier for a quote"):
        result = r(question)
        assert not result.needs_clarification, result.anchors
        assert all(a.resolved is not None for a in result.anchors)


def test_two_partial_names_are_two_anchors() -> None:
    result = r("Was it from supplier Beta or Gamma?")
    assert resolved(result) == {"supplier Beta": "ent_sb", "Gamma": "ent_sg"}


def test_ambiguous_partial_name_needs_clarification() -> None:
    result = r("Which invoices from the Acme supplier are overdue?")
    assert result.needs_clarification
    assert result.clarify is not None and result.clarify.text == "Acme"
    assert {c.entity_id for c in result.clarify.candidates} == {"ent_as", "ent_av"}
    assert result.clarify.resolved is None


def test_kind_word_partial_is_ambiguous() -> None:
    result = r("Did the sensors supplier deliver on time?")
    assert result.clarify is not None
    assert {c.entity_id for c in result.clarify.candidates} == {"ent_as", "ent_ps"}


def test_bare_capitalised_kind_word_is_ambiguous() -> None:
    result = r("Did the Supplier deliver the flow meters?")
    assert result.clarify is not None and result.clarify.kind == "supplier"
    assert {c.entity_id for c in result.clarify.candidates} == {"ent_sb", "ent_sg"}


def test_unknown_named_entity_is_unresolved() -> None:
    result = r("What did supplier Zeta Corp charge us in March?")
    assert result.needs_clarification
    assert result.clarify == Anchor(kind="supplier", text="Zeta Corp", candidates=(), resolved=None,
                                    score=0.0)
    assert any(rule.endswith(":unresolved") for rule in result.rules_fired)


TRADE_CATALOG = [
    _entry("supplier", "ent_bs", "Brambleton Supply AB", key="brambleton supply"),
    _entry("supplier", "ent_qt", "Quillfeather Trading Ltd", key="quillfeather trading"),
    _entry("supplier", "ent_ol", "Osprey Lab Supplies Oy", key="osprey lab supplies"),
    _entry("supplier", "ent_hi", "Harrowgate Industrial Systems", key="harrowgate industrial systems"),
    _entry("supplier", "ent_gs", "General Supplies Ltd", key="general supplies"),
    _entry("product_group", "ent_gw", "Welding Supplies"),
    _entry("product", "ent_kx", "brass elbow", key="KX-4410"),
]


def trade(question: str) -> Route:
    return route(question, TRADE_CATALOG, as_of=AS_OF)


@pytest.mark.parametrize("question", [
    "Which suppliers supply KX-4410?",
    "Which suppliers supplies KX-4410?",
    "Which supplier supplied KX-4410?",
    "Who supplies KX-4410?",
    "Which vendors trading in KX-4410 do we use?",
    "Which suppliers provide systems and services for KX-4410?",
])
def test_a_verb_or_trade_word_of_the_question_names_no_organisation(question: str) -> None:
    result = trade(question)
    assert resolved(result) == {"KX-4410": "ent_kx"}
    assert not result.needs_clarification


@pytest.mark.parametrize(("question", "text", "entity"), [
    ("What did we spend with Brambleton?", "Brambleton", "ent_bs"),
    ("Who does Brambleton Supply supply?", "Brambleton Supply", "ent_bs"),
    ("What did we buy from Quillfeather Trading?", "Quillfeather Trading", "ent_qt"),
    ("What did Osprey Lab supply last year?", "Osprey Lab", "ent_ol"),
    ("Total spend with Harrowgate Industrial Systems", "Harrowgate Industrial Systems", "ent_hi"),
    ("Total spend with General Supplies", "General Supplies", "ent_gs"),
    ("Which suppliers supply welding supplies?", "welding supplies", "ent_gw"),
])
def test_names_with_trade_words_still_resolve_by_their_distinctive_part(question: str, text: str,
                                                                       entity: str) -> None:
    assert resolved(trade(question)) == {text: entity}


# ---- clarification ------------------------------------------------------------------------------

def test_apply_choice_by_id_key_or_fuzzy_name() -> None:
    ambiguous = r("Which invoices from the Acme supplier are overdue?")
    for choice in ("ent_av", "ACME VALVES", "Acme Valves Inc", "acme valvs inc"):
        chosen = apply_choice(ambiguous, choice)
        assert not chosen.needs_clarification and chosen.clarify is None
        anchor = next(a for a in chosen.anchors if a.text == "Acme")
        assert anchor.resolved is not None and anchor.resolved.entity_id == "ent_av"
        assert chosen.rules_fired[-1] == "clarify:Acme->ent_av"


def test_apply_choice_moves_to_the_next_unclear_anchor() -> None:
    route_ = r("Did the Acme supplier ship to supplier Zeta Corp?")
    assert route_.clarify is not None and route_.clarify.text == "Acme"
    after = apply_choice(route_, "ent_as")
    assert after.needs_clarification and after.clarify is not None and after.clarify.text == "Zeta Corp"
    with pytest.raises(ValueError):
        apply_choice(after, "Zeta Corp")


def test_apply_choice_rejects_non_candidates() -> None:
    ambiguous = r("Which invoices from the Acme supplier are overdue?")
    with pytest.raises(ValueError):
        apply_choice(ambiguous, "Supplier Beta")
    with pytest.raises(ValueError):
        apply_choice(r("Explain the warranty policy"), "anything")


def test_route_is_frozen_and_topic_is_the_rest() -> None:
    result = r("Explain the calibration requirements for PRD-482 last quarter")
    assert result.topic == "calibration requirements"
    assert result.time is not None and result.time.phrase == "last quarter"
    with pytest.raises(ValidationError):
        result.topic = "x"  # type: ignore[misc]
