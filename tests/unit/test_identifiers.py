from __future__ import annotations

import pytest

from manifold.shared.identifiers import find_identifiers, identifier_kind, normalize_identifier


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("INV-2026-0148", "INV-2026-0148"),
        ("inv 2026/0148", "INV-2026-0148"),
        ("INV_2026.0148", "INV-2026-0148"),
        ("PRD-482", "PRD-482"),
        ("prd482", "PRD-482"),
        ("sku#A17-3", "SKU-A17-3"),
        ("CTR 2024-07", "CTR-2024-07"),
        ("invoice", None),
        ("PO 7781 Total due", None),
        ("INV-", None),
    ],
)
def test_normalize(raw: str, expected: str | None) -> None:
    assert normalize_identifier(raw) == expected


def test_find_in_text_keeps_order_and_drops_repeats() -> None:
    text = "Supplier SUP-0042 shipped PRD482 and prd-482 on INV-2026-0148 2 units. Total INV-2026-0148."
    assert find_identifiers(text) == ["SUP-0042", "PRD-482", "INV-2026-0148"]


def test_words_are_not_identifiers() -> None:
    assert find_identifiers("The invoice and the product were supplied in support of the order.") == []


def test_kind() -> None:
    assert identifier_kind("INV-1") == "invoice"
    assert identifier_kind("SKU-A1") == "product"
    assert identifier_kind("XYZ-1") is None
