"""Entity resolution: canonical keys, alias tables, near duplicates, stable ids."""

from __future__ import annotations

import pytest

from manifold.ingest.resolution import EntityResolver, canonical_key
from manifold.shared import ids
from manifold.shared.artifacts import Provenance


def prov(chunk: str) -> Provenance:
    return Provenance(document_id="d1", version=1, chunk_id=chunk, extraction_version="rules-1")


@pytest.mark.parametrize(
    "name", ["ACME Inc.", "Acme, Inc", "ACME Incorporated", "The Acme Company Ltd", "acme corp.", "  ACME   "]
)
def test_legal_suffix_variants_share_one_key(name: str) -> None:
    # Decision: "Incorporated", "Company", "Corporation", "Limited" count as legal suffixes too.
    assert canonical_key("Supplier", name) == "acme"


@pytest.mark.parametrize(
    ("entity_type", "name", "key"),
    [
        ("Supplier", "Smith & Co", "smith"),
        ("Supplier", "Beta S.A.", "beta"),
        ("Company", "Müller GmbH", "muller"),
        ("Company", "The Company", "company"),
        ("Company", "Company A", "company a"),
        ("Supplier", "O'Brien Supplies Ltd.", "obrien supplies"),
        ("ProductGroup", "Widget Co", "widget co"),  # legal suffixes apply to organisations only
        ("ProductGroup", "The  Monitoring-Products", "monitoring products"),
        ("Product", "prd 482", "PRD-482"),
        ("Supplier", "sup_001", "SUP-001"),
        ("Invoice", "inv 2026/0148", "INV-2026-0148"),
        ("Company", "!!!", ""),
    ],
)
def test_canonical_key(entity_type: str, name: str, key: str) -> None:
    assert canonical_key(entity_type, name) == key


def test_variants_resolve_to_one_stable_entity_with_aliases() -> None:
    resolver = EntityResolver("acme-tenant")
    first = resolver.resolve("Supplier", "ACME Inc.", prov("c1"))
    assert resolver.resolve("Supplier", "Acme, Inc", prov("c2")) == first
    assert resolver.resolve("Supplier", "ACME Incorporated", prov("c1")) == first
    assert first == ids.entity_id("acme-tenant", "Supplier", "acme")
    [entity] = resolver.entities()
    assert entity.name == "ACME Inc."
    assert entity.aliases == ["Acme, Inc", "ACME Incorporated"]
    assert [p.chunk_id for p in entity.provenance] == ["c1", "c2"]  # combined, no duplicates


def test_same_key_of_another_type_or_tenant_is_another_entity() -> None:
    resolver = EntityResolver("t1")
    assert resolver.resolve("Supplier", "Beta") != resolver.resolve("Company", "Beta")
    assert EntityResolver("t1").resolve("Supplier", "Beta") == EntityResolver("t1").resolve("Supplier", "BETA ltd")
    assert EntityResolver("t1").resolve("Supplier", "Beta") != EntityResolver("t2").resolve("Supplier", "Beta")


def test_alias_table_maps_to_canonical_name() -> None:
    resolver = EntityResolver("t1", {"Big Blue": "IBM Corp", "acme industries": "ACME Inc."})
    ibm = resolver.resolve("Company", "big blue")
    assert ibm == resolver.resolve("Company", "IBM") == ids.entity_id("t1", "Company", "ibm")
    assert resolver.resolve("Supplier", "ACME Industries") == ids.entity_id("t1", "Supplier", "acme")
    entities = {e.entity_id: e for e in resolver.entities()}
    assert entities[ibm].name == "IBM Corp"
    assert entities[ibm].aliases == ["big blue", "IBM"]


def test_near_duplicates_merge_into_first_seen() -> None:
    resolver = EntityResolver("t1")
    beta = resolver.resolve("Supplier", "Supplier Beta")
    assert resolver.resolve("Supplier", "Supplier Betta") == beta
    assert resolver.resolve("Supplier", "Beta Supplier") == beta  # token order does not matter
    [entity] = resolver.entities()
    assert entity.canonical_key == "supplier beta"
    assert entity.aliases == ["Supplier Betta", "Beta Supplier"]
    assert resolver.resolve("Company", "Supplier Betta") != beta  # only within one type


@pytest.mark.parametrize(
    ("entity_type", "a", "b"),
    [
        ("Supplier", "Supplier A", "Supplier B"),
        ("Supplier", "North Region Supplier A", "North Region Supplier B"),
        ("Company", "Plant 1 Operations", "Plant 2 Operations"),
        ("Product", "PRD-482", "PRD-483"),
        ("Supplier", "Acme", "Acme Industries"),
    ],
)
def test_distinct_names_do_not_merge(entity_type: str, a: str, b: str) -> None:
    resolver = EntityResolver("t1")
    assert resolver.resolve(entity_type, a) != resolver.resolve(entity_type, b)


def test_external_id_links_bare_id_mentions_and_conflicts_are_reported() -> None:
    resolver = EntityResolver("t1")
    beta = resolver.resolve("Supplier", "Supplier Beta", prov("r1"), external_id="sup 001")
    assert resolver.resolve("Supplier", "SUP-001", prov("c9")) == beta
    assert resolver.lookup("Supplier", "sup_001") == beta
    resolver.resolve("Supplier", "Supplier Beta", prov("r2"), external_id="SUP-002")
    [conflict] = resolver.conflicts
    assert (conflict.existing, conflict.new) == ("SUP-001", "SUP-002")
    [entity] = resolver.entities()
    assert entity.properties == {"external_id": "SUP-001"}  # never overwritten


def test_lookup_does_not_create_and_known_types() -> None:
    resolver = EntityResolver("t1")
    assert resolver.lookup("Company", "Company A") is None
    resolver.resolve("Company", "Company A")
    assert resolver.known_types("company a") == ["Company"]
    assert resolver.entities()[0].name == "Company A"


def test_invalid_input_raises() -> None:
    resolver = EntityResolver("t1")
    with pytest.raises(ValueError, match="unknown entity type"):
        resolver.resolve("Vendor", "Beta")
    with pytest.raises(ValueError, match="no letters or digits"):
        resolver.resolve("Company", " -- ")


def test_entities_are_sorted_and_replay_is_identical() -> None:
    def run() -> list[object]:
        resolver = EntityResolver("t1", {"Beta GmbH": "Supplier Beta"})
        for entity_type, name in [("Supplier", "Zeta"), ("Company", "Company A"), ("Supplier", "Beta GmbH"),
                                  ("Product", "PRD-482"), ("Supplier", "Supplier Beta")]:
            resolver.resolve(entity_type, name, prov("c1"))
        return [e.model_dump() for e in resolver.entities()]

    first = run()
    assert first == run()
    assert [(e["type"], e["canonical_key"]) for e in first] == [  # type: ignore[index]
        ("Company", "company a"), ("Product", "PRD-482"), ("Supplier", "supplier beta"), ("Supplier", "zeta"),
    ]
