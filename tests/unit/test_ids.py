from __future__ import annotations

from manifold.shared import ids


def test_ids_are_deterministic_and_scoped() -> None:
    scope = ids.version_scope("acme", "a.md", 1, "f" * 64, "cfg1")
    assert scope == ids.version_scope("acme", "a.md", 1, "f" * 64, "cfg1")
    assert scope != ids.version_scope("acme", "a.md", 2, "f" * 64, "cfg1")
    assert scope != ids.version_scope("acme", "a.md", 1, "f" * 64, "cfg2")
    assert scope != ids.version_scope("other", "a.md", 1, "f" * 64, "cfg1")
    assert ids.child_id("chk", scope, 0) == ids.child_id("chk", scope, 0) != ids.child_id("chk", scope, 1)
    assert ids.child_id("chk", scope, 0).startswith(f"chk_{scope}_")


def test_entity_ids_are_global_per_tenant() -> None:
    assert ids.entity_id("acme", "Supplier", "beta") == ids.entity_id("acme", "Supplier", "beta")
    assert ids.entity_id("acme", "Supplier", "beta") != ids.entity_id("acme", "Company", "beta")
    assert ids.entity_id("acme", "Supplier", "beta") != ids.entity_id("zeta", "Supplier", "beta")


def test_set_checksum_ignores_order_but_not_content_or_duplicates() -> None:
    a = [("c1", "h1"), ("c2", "h2")]
    assert ids.set_checksum(a) == ids.set_checksum(reversed(a))
    assert ids.set_checksum(a) != ids.set_checksum([("c1", "h1"), ("c2", "hX")])
    assert ids.set_checksum(a) != ids.set_checksum(a + [("c2", "h2")])
    assert ids.set_checksum([]).startswith("0:")
