"""The controlled graph vocabulary: entity types, relationship types and their rules (pure data).

Guarantees:
- Extraction may only produce the entity types in `ENTITY_TYPES` and the relationship types in
  `RELATIONS`; anything else is rejected by `validate_relation` with a reason and must be routed
  to review by the caller, never written to the graph.
- Every relationship has one direction (source → target), a closed set of allowed source and
  target types, required properties, an allow-list of optional properties, and says whether it
  may carry validity dates (`valid_from` / `valid_to`). Non-temporal relationships must not carry
  them.
- `GRAPH_SCHEMA_VERSION` names this exact vocabulary; change it whenever a type, direction or
  rule changes, so derived graph artifacts get new ids instead of mixing with the old ones.
- `LEGAL_SUFFIXES` are the company-form words both sides read the same way: ingestion drops them
  from organisation names when it keys entities (`ingest.resolution.canonical_key`), the query
  router drops them from organisation mentions and never treats them as a name of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

GRAPH_SCHEMA_VERSION = "graph-1"

LEGAL_SUFFIXES: frozenset[str] = frozenset({
    "ab", "ag", "bv", "co", "company", "corp", "corporation", "gmbh", "inc", "incorporated", "kg",
    "llc", "llp", "lp", "ltd", "limited", "nv", "oy", "plc", "pte", "pty", "sa", "sarl", "sas",
    "spa", "srl",
})
"""Trailing legal-form words of organisation names (`ACME Inc.` and `Acme Ltd` are one `acme`)."""


@dataclass(frozen=True)
class EntityTypeSpec:
    """One node label. `identifier_kinds` are the `identifiers.PREFIXES` kinds that name it;
    `organization` types get legal-suffix normalisation in entity resolution."""

    name: str
    description: str
    identifier_kinds: tuple[str, ...] = ()
    organization: bool = False


@dataclass(frozen=True)
class RelationSpec:
    """One relationship type: `(source)-[:name]->(target)`."""

    name: str
    source_types: frozenset[str]
    target_types: frozenset[str]
    temporal: bool
    description: str
    required_properties: tuple[str, ...] = ()
    optional_properties: tuple[str, ...] = ()

    @property
    def direction(self) -> str:
        """The pattern in Cypher notation, e.g. `(Company)-[:APPROVED_VENDOR]->(Supplier)`."""
        src = "|".join(sorted(self.source_types))
        tgt = "|".join(sorted(self.target_types))
        return f"({src})-[:{self.name}]->({tgt})"


def _types(*names: str) -> frozenset[str]:
    return frozenset(names)


ENTITY_TYPES: dict[str, EntityTypeSpec] = {
    spec.name: spec
    for spec in (
        EntityTypeSpec("Company", "an organisation that buys (the tenant or a customer)", organization=True),
        EntityTypeSpec("Supplier", "an organisation that sells to a company", ("supplier",), organization=True),
        EntityTypeSpec("Product", "a product or SKU, keyed by its code", ("product",)),
        EntityTypeSpec("ProductGroup", "a product group or category"),
        EntityTypeSpec("Contract", "an agreement, keyed by its contract id", ("contract",)),
        EntityTypeSpec("Invoice", "an invoice, keyed by its number", ("invoice",)),
        EntityTypeSpec("CreditNote", "a credit note, keyed by its number", ("credit_note",)),
        EntityTypeSpec("Order", "a purchase or sales order, keyed by its number", ("order",)),
        EntityTypeSpec("Person", "a named person (signatory, contact)"),
    )
}

_LINE_PROPERTIES = ("line_no", "quantity", "unit_price", "amount")

RELATIONS: dict[str, RelationSpec] = {
    spec.name: spec
    for spec in (
        RelationSpec("APPROVED_VENDOR", _types("Company"), _types("Supplier"), True,
                     "the company has approved the supplier as a vendor"),
        RelationSpec("SUPPLIES", _types("Supplier"), _types("Product"), True,
                     "the supplier supplies the product"),
        RelationSpec("BELONGS_TO", _types("Product"), _types("ProductGroup"), True,
                     "the product is in the product group"),
        RelationSpec("PART_OF", _types("ProductGroup"), _types("ProductGroup"), True,
                     "the group is a sub-group of the target group"),
        RelationSpec("PARTY_TO", _types("Company", "Supplier"), _types("Contract"), True,
                     "the organisation is a party to the contract", optional_properties=("role",)),
        RelationSpec("COVERS", _types("Contract"), _types("Product", "ProductGroup"), True,
                     "the contract covers the product or group"),
        RelationSpec("SIGNED_BY", _types("Contract"), _types("Person"), False,
                     "the contract was signed by the person"),
        RelationSpec("ISSUED_BY", _types("Invoice", "CreditNote"), _types("Supplier"), False,
                     "the invoice or credit note was issued by the supplier"),
        RelationSpec("BILLED_TO", _types("Invoice", "CreditNote"), _types("Company"), False,
                     "the invoice or credit note was billed to the company"),
        RelationSpec("CONTAINS", _types("Invoice", "CreditNote", "Order"), _types("Product"), False,
                     "one line of the document is for the product (one edge per line)",
                     required_properties=_LINE_PROPERTIES, optional_properties=("currency",)),
        RelationSpec("ORDERED_BY", _types("Order"), _types("Company"), False,
                     "the order was placed by the company"),
        RelationSpec("PLACED_WITH", _types("Order"), _types("Supplier"), False,
                     "the order was placed with the supplier"),
    )
}


def entity_type_for_identifier_kind(kind: str | None) -> str | None:
    """The entity type an identifier kind names (`"product"` → `"Product"`), if any."""
    for spec in ENTITY_TYPES.values():
        if kind is not None and kind in spec.identifier_kinds:
            return spec.name
    return None


def is_organization(entity_type: str) -> bool:
    spec = ENTITY_TYPES.get(entity_type)
    return spec is not None and spec.organization


def validate_relation(
    relation_type: str,
    source_type: str,
    target_type: str,
    properties: Mapping[str, object] | None = None,
    *,
    valid_from: date | None = None,
    valid_to: date | None = None,
) -> str | None:
    """None if the relationship conforms to the vocabulary, else the reason it does not.

    Validity may be passed as keywords or as `valid_from` / `valid_to` entries in `properties`.
    Required properties must be present and non-empty; property names outside the spec are
    rejected (a misspelt property would otherwise become a silently different graph).
    """
    spec = RELATIONS.get(relation_type)
    if spec is None:
        return f"unknown relationship type {relation_type!r} (allowed: {', '.join(sorted(RELATIONS))})"
    for role, given, allowed in (("source", source_type, spec.source_types),
                                 ("target", target_type, spec.target_types)):
        if given not in ENTITY_TYPES:
            return f"unknown entity type {given!r} as {role} of {relation_type}"
        if given not in allowed:
            return f"{relation_type} {role} must be {' or '.join(sorted(allowed))}, not {given} ({spec.direction})"
    props = dict(properties or {})
    try:
        valid_from = valid_from if valid_from is not None else _as_date(props.pop("valid_from", None))
        valid_to = valid_to if valid_to is not None else _as_date(props.pop("valid_to", None))
    except ValueError as exc:
        return f"{relation_type} has an invalid validity date: {exc}"
    props.pop("valid_from", None)
    props.pop("valid_to", None)
    missing = [name for name in spec.required_properties if props.get(name) in (None, "")]
    if missing:
        return f"{relation_type} requires properties: {', '.join(missing)}"
    allowed_props = set(spec.required_properties) | set(spec.optional_properties)
    unexpected = sorted(set(props) - allowed_props)
    if unexpected:
        return f"{relation_type} does not allow properties: {', '.join(unexpected)}"
    for name, value in props.items():
        if not isinstance(value, str | int | float | bool) and value is not None:
            return f"{relation_type} property {name!r} must be a scalar, got {type(value).__name__}"
    if (valid_from is not None or valid_to is not None) and not spec.temporal:
        return f"{relation_type} is not temporal and cannot carry valid_from/valid_to"
    if valid_from is not None and valid_to is not None and valid_from > valid_to:
        return f"{relation_type} validity is empty: valid_from {valid_from} is after valid_to {valid_to}"
    return None


def _as_date(value: object) -> date | None:
    """A validity value from properties: a date, an ISO date string, or empty; else ValueError."""
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        return date.fromisoformat(value)
    raise ValueError(f"{value!r} is not an ISO date")


__all__ = [
    "ENTITY_TYPES",
    "GRAPH_SCHEMA_VERSION",
    "RELATIONS",
    "EntityTypeSpec",
    "RelationSpec",
    "entity_type_for_identifier_kind",
    "is_organization",
    "validate_relation",
]
