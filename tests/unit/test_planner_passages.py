"""The passage search of a routed question reads the question as asked, with catalog names."""

from __future__ import annotations

from datetime import date

from manifold.query.planner import compile_plan, passage_query
from manifold.query.router import route
from manifold.query.types import CatalogEntry

AS_OF = date(2026, 5, 10)
CATALOG = [
    CatalogEntry(kind="supplier", entity_id="ent_sb", key="supplier beta", name="Supplier Beta"),
    CatalogEntry(kind="supplier", entity_id="ent_as", key="acme sensors", name="Acme Sensors Ltd"),
]


def passages(question: str) -> str:
    plan = compile_plan(route(question, CATALOG, as_of=AS_OF), question, as_of=AS_OF)
    step = next(s for s in plan.steps if s.id == "passages")
    return step.params.query


def test_a_named_entity_stays_in_the_passage_search() -> None:
    # The topic alone ("delivery terms") would find every supplier's delivery terms.
    assert passages("What are Supplier Beta's delivery terms?") == "What are Supplier Beta delivery terms?"


def test_a_mention_is_searched_under_its_catalog_name() -> None:
    assert "Acme Sensors Ltd" in passages("Explain the warranty terms of acme sensors")


def test_a_leading_request_is_not_searched() -> None:
    assert passages("Can you show me the calibration requirements") == "the calibration requirements"
    assert passages("Explain the calibration requirements") == "the calibration requirements"


def test_words_that_carry_meaning_are_kept() -> None:
    claim = "Vitamin D does not reduce the risk of fractures in older adults."
    assert passage_query(route(claim, CATALOG, as_of=AS_OF), claim) == claim


def test_identifiers_are_searched_as_text_too() -> None:
    question = "What does INV-2026-0013 say about late fees?"
    assert passage_query(route(question, CATALOG, as_of=AS_OF), question) == question
