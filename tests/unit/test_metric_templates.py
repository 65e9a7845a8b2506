"""The metric template registry is closed, its SQL is constant and parameterised, its binders
produce typed parameters; graph templates and relation validation are closed too. No services."""

from __future__ import annotations

import ast
import inspect
import re
from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from manifold.query.executors import graph, metric
from manifold.query.executors.graph import ALLOWED_RELATIONS, validate_relations
from manifold.query.executors.graph import TEMPLATES as GRAPH_TEMPLATES
from manifold.query.executors.metric import TEMPLATES, UnknownMetric, template_for
from manifold.query.plan import GraphExpandParams, MetricParams, MetricQueryParams, Period

Q1 = Period(start=date(2026, 1, 1), end=date(2026, 4, 1))
PLACEHOLDER = re.compile(r"%\((?P<name>[a-z_]+)\)s|%s")


def test_registry_is_closed() -> None:
    assert set(TEMPLATES) == {"total_spend", "revenue_at_risk", "unit_price_on"}
    with pytest.raises(UnknownMetric):
        template_for("drop_tables")
    with pytest.raises(UnknownMetric):
        template_for("total_spend; DELETE FROM records")
    with pytest.raises(TypeError):
        TEMPLATES["extra"] = TEMPLATES["total_spend"]  # type: ignore[index]


def test_plan_rejects_unknown_metric() -> None:
    with pytest.raises(ValidationError):
        MetricQueryParams.model_validate({"metric": "arbitrary_sql", "where": {"period": {"start": "2026-01-01",
                                                                                          "end": "2026-04-01"}}})


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_sql_is_constant_and_parameterised(name: str) -> None:
    template = TEMPLATES[name]
    assert template.definition.strip()
    for text in template.queries.values():
        assert isinstance(text, str)
        assert "{" not in text and "}" not in text
        assert ";" not in text
        stripped = PLACEHOLDER.sub("", text)
        assert "%" not in stripped, "only %s / %(name)s placeholders are allowed"
        assert "tenant_id = %(tenant)s" in text
        lowered = text.lower()
        for verb in ("insert ", "update ", "delete ", "drop ", "alter ", "grant ", "truncate "):
            assert verb not in lowered
        assert "serving_records" in text
        assert " manifold.records" not in text and " records r" not in text


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_placeholder_is_bound(name: str) -> None:
    template = TEMPLATES[name]
    where = MetricParams(product_codes=["PRD-1"], on=date(2026, 3, 1)) if name == "unit_price_on" \
        else MetricParams(period=Q1)
    bound = template.binder(where, "t1")
    for text in template.queries.values():
        names = {m.group("name") for m in PLACEHOLDER.finditer(text)}
        assert None not in names, "positional %s is not used in templates"
        assert names <= set(bound), names - set(bound)


def test_sql_module_has_no_fstrings_or_format_calls() -> None:
    tree = ast.parse(Path(inspect.getfile(metric)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_SQL")
                                                 for t in node.targets):
            assert not any(isinstance(n, ast.JoinedStr) for n in ast.walk(node.value))
            assert not any(isinstance(n, ast.Call) for n in ast.walk(node.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in ("format", "format_map") or not _in_sql_context(node)


def _in_sql_context(node: ast.Call) -> bool:
    return "SELECT" in ast.unparse(node)


def test_total_spend_binder_is_typed() -> None:
    where = MetricParams(company_names=["  Northstar   Manufacturing "], supplier_names=["Supplier Beta"],
                         product_codes=["prd-482 "], period=Q1, currency="EUR")
    bound = TEMPLATES["total_spend"].binder(where, "tenant-a")
    assert bound["tenant"] == "tenant-a"
    assert bound["record_types"] == ["invoice", "credit_note"]
    assert bound["statuses"] == ["posted", "paid"]
    assert bound["start"] == date(2026, 1, 1) and bound["end"] == date(2026, 4, 1)
    assert isinstance(bound["start"], date)
    assert bound["companies"] == ["northstar manufacturing"]
    assert bound["suppliers"] == ["supplier beta"]
    assert bound["products"] == ["PRD482"]  # compared without punctuation (metric.code_key)
    assert bound["currency"] == "EUR"
    assert bound["numbers"] is None
    assert isinstance(bound["evidence_limit"], int)


def test_binder_keeps_injection_as_a_value() -> None:
    bound = TEMPLATES["total_spend"].binder(MetricParams(supplier_names=["Beta' OR '1'='1"], period=Q1), "t")
    # a parameter value (compared ignoring case and punctuation: metric.name_key), never SQL text
    assert bound["suppliers"] == ["beta or 1 1"]


def test_empty_filter_list_means_match_nothing_not_no_filter() -> None:
    bound = TEMPLATES["total_spend"].binder(MetricParams(supplier_names=[], period=Q1), "t")
    assert bound["suppliers"] == []
    assert TEMPLATES["total_spend"].binder(MetricParams(period=Q1), "t")["suppliers"] is None


def test_binders_reject_parameters_they_do_not_take() -> None:
    with pytest.raises(ValueError, match="order_numbers"):
        TEMPLATES["total_spend"].binder(MetricParams(period=Q1, order_numbers=["PO-1"]), "t")
    with pytest.raises(ValueError, match="period"):
        TEMPLATES["unit_price_on"].binder(MetricParams(product_codes=["P"], on=date(2026, 1, 1), period=Q1), "t")
    with pytest.raises(ValueError, match="reference"):
        TEMPLATES["total_spend"].binder(MetricParams(supplier_names="$s.names", period=Q1), "t")


def test_revenue_and_price_binders() -> None:
    risk = TEMPLATES["revenue_at_risk"].binder(MetricParams(supplier_names=["Supplier Beta"],
                                                            order_numbers=["po-7001"]), "t")
    assert risk["record_types"] == ["order"] and risk["statuses"] == ["delayed"]
    assert risk["numbers"] == ["PO-7001"] and risk["start"] is None
    price = TEMPLATES["unit_price_on"].binder(MetricParams(product_codes=["PRD-482"], on=date(2026, 3, 1),
                                                           statuses=("paid",)), "t")
    assert price["on"] == date(2026, 3, 1) and price["statuses"] == ["paid"] and price["products"] == ["PRD482"]


def test_product_codes_compare_without_case_or_punctuation() -> None:
    from manifold.query.executors.metric import code_key

    assert code_key("HX-2210") == code_key("hx 2210") == code_key("HX_2210") == code_key(" hx/2210 ") == "HX2210"
    assert code_key("HX-2210") != code_key("HX-2201")
    bound = TEMPLATES["unit_price_on"].binder(MetricParams(product_codes=["hx 2210", "HX-2210"],
                                                           on=date(2026, 3, 1)), "t")
    assert bound["products"] == ["HX2210"]


def test_names_compare_without_case_or_punctuation() -> None:
    from manifold.query.executors.metric import name_key

    assert name_key("Valebrook Bearings Inc.") == name_key("valebrook  bearings inc") == "valebrook bearings inc"
    assert name_key("Supplier A") != name_key("Supplier B")


def test_price_source_is_only_for_unit_prices() -> None:
    with pytest.raises(ValueError, match="price_source"):
        TEMPLATES["total_spend"].binder(MetricParams(period=Q1, price_source="catalog"), "t")


def test_graph_templates_are_constant_and_bounded() -> None:
    assert set(GRAPH_TEMPLATES) == {(d, h) for d in ("out", "in") for h in (1, 2, 3)}
    for (direction, hops), text in GRAPH_TEMPLATES.items():
        assert f"*1..{hops}]" in text
        assert "__PATTERN__" not in text
        assert "$tenant" in text and "r.active = true" in text and "type(r) IN $types" in text
        assert ("]->(b" in text) == (direction == "out")


def test_relation_validation_rejects_anything_off_the_allowlist() -> None:
    assert validate_relations("SUPPLIES") == ("SUPPLIES",)
    assert validate_relations(["SUPPLIES", "BELONGS_TO", "SUPPLIES"]) == ("BELONGS_TO", "SUPPLIES")
    assert "MENTIONED_IN" not in ALLOWED_RELATIONS
    for bad in ("MENTIONED_IN", "SUPPLIES]->(x) DETACH DELETE x //", "supplies", "", ["SUPPLIES", "X"], []):
        with pytest.raises(ValueError):
            validate_relations(bad)
    with pytest.raises(ValidationError):
        GraphExpandParams(from_ids=["ent_1"], relation="SUPPLIES]->() DETACH DELETE n //")
    with pytest.raises(ValidationError):
        GraphExpandParams(from_ids=["ent_1"], relation="SUPPLIES", max_hops=4)
    assert graph.PATHS_PER_TARGET > 0
