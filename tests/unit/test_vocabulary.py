"""The controlled graph vocabulary: types, directions, required properties, temporal rules."""

from __future__ import annotations

from datetime import date

import pytest

from manifold.shared.identifiers import PREFIXES
from manifold.shared.vocabulary import (
    ENTITY_TYPES,
    GRAPH_SCHEMA_VERSION,
    RELATIONS,
    entity_type_for_identifier_kind,
    is_organization,
    validate_relation,
)

LINE = {"line_no": 1, "quantity": "3", "unit_price": "19.99", "amount": "59.97"}


def test_schema_version_is_named() -> None:
    assert isinstance(GRAPH_SCHEMA_VERSION, str) and GRAPH_SCHEMA_VERSION


def test_required_entity_types_exist() -> None:
    required = {"Company", "Supplier", "Product", "ProductGroup", "Contract", "Invoice", "CreditNote", "Order",
                "Person"}
    assert required <= set(ENTITY_TYPES)
    assert is_organization("Company") and is_organization("Supplier")
    assert not is_organization("ProductGroup") and not is_organization("Nope")


@pytest.mark.parametrize(
    ("name", "sources", "targets", "temporal"),
    [
        ("APPROVED_VENDOR", {"Company"}, {"Supplier"}, True),
        ("SUPPLIES", {"Supplier"}, {"Product"}, True),
        ("BELONGS_TO", {"Product"}, {"ProductGroup"}, True),
        ("PART_OF", {"ProductGroup"}, {"ProductGroup"}, True),
        ("PARTY_TO", {"Company", "Supplier"}, {"Contract"}, True),
        ("ISSUED_BY", {"Invoice", "CreditNote"}, {"Supplier"}, False),
        ("BILLED_TO", {"Invoice", "CreditNote"}, {"Company"}, False),
        ("ORDERED_BY", {"Order"}, {"Company"}, False),
        ("COVERS", {"Contract"}, {"Product", "ProductGroup"}, True),
    ],
)
def test_relationship_specs(name: str, sources: set[str], targets: set[str], temporal: bool) -> None:
    spec = RELATIONS[name]
    assert spec.source_types == sources
    assert spec.target_types == targets
    assert spec.temporal is temporal
    assert set(spec.source_types | spec.target_types) <= set(ENTITY_TYPES)


def test_contains_covers_invoices_and_orders_and_requires_line_properties() -> None:
    spec = RELATIONS["CONTAINS"]
    assert {"Invoice", "Order"} <= spec.source_types
    assert spec.target_types == {"Product"}
    assert set(spec.required_properties) == {"line_no", "quantity", "unit_price", "amount"}
    assert spec.direction == "(CreditNote|Invoice|Order)-[:CONTAINS]->(Product)"


def test_identifier_kinds_map_to_entity_types() -> None:
    expected = {"invoice": "Invoice", "credit_note": "CreditNote", "order": "Order", "contract": "Contract",
                "supplier": "Supplier", "product": "Product"}
    assert {kind: entity_type_for_identifier_kind(kind) for kind in set(PREFIXES.values())} == expected
    assert entity_type_for_identifier_kind(None) is None
    assert entity_type_for_identifier_kind("spaceship") is None


def test_valid_relations_pass() -> None:
    assert validate_relation("APPROVED_VENDOR", "Company", "Supplier", {}) is None
    assert validate_relation("PARTY_TO", "Supplier", "Contract", {"role": "seller"}) is None
    assert validate_relation("CONTAINS", "Order", "Product", {**LINE, "currency": "EUR"}) is None
    assert validate_relation("SUPPLIES", "Supplier", "Product", {},
                             valid_from=date(2026, 1, 1), valid_to=date(2026, 12, 31)) is None
    assert validate_relation("SUPPLIES", "Supplier", "Product", {"valid_from": "2026-01-01"}) is None


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("SUPPLIER_OF", "Supplier", "Product", {}), "unknown relationship type 'SUPPLIER_OF'"),
        (("SUPPLIES", "Product", "Supplier", {}), "SUPPLIES source must be Supplier, not Product"),
        (("APPROVED_VENDOR", "Company", "Company", {}), "target must be Supplier, not Company"),
        (("BELONGS_TO", "Invoice", "ProductGroup", {}), "source must be Product, not Invoice"),
        (("SUPPLIES", "Vendor", "Product", {}), "unknown entity type 'Vendor'"),
        (("CONTAINS", "Invoice", "Product", {"line_no": 1}), "requires properties: quantity, unit_price, amount"),
        (("CONTAINS", "Invoice", "Product", {**LINE, "amount": ""}), "requires properties: amount"),
        (("CONTAINS", "Invoice", "Product", {**LINE, "colour": "red"}), "does not allow properties: colour"),
        (("SUPPLIES", "Supplier", "Product", {"nested": ["a"]}), "does not allow properties: nested"),
        (("ISSUED_BY", "Invoice", "Supplier", {"valid_from": "2026-01-01"}), "not temporal"),
        (("SUPPLIES", "Supplier", "Product", {"valid_from": "31/01/2026"}), "invalid validity date"),
        (("SUPPLIES", "Supplier", "Product", {"valid_from": "2026-12-31", "valid_to": "2026-01-01"}),
         "validity is empty"),
    ],
)
def test_invalid_relations_give_a_reason(args: tuple[str, str, str, dict[str, object]], fragment: str) -> None:
    reason = validate_relation(*args)
    assert reason is not None and fragment in reason


def test_non_temporal_relation_rejects_validity_keywords() -> None:
    reason = validate_relation("BILLED_TO", "Invoice", "Company", {}, valid_to=date(2026, 1, 1))
    assert reason is not None and "not temporal" in reason
