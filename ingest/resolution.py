"""Deterministic entity resolution: spelling variants and aliases → one stable entity id.

Rules, applied in this order by `EntityResolver.resolve`:
1. **Alias table** (operator settings or the document's `aliases` metadata): `alias → canonical
   name`. Aliases are compared by canonical key, so `"ACME Corp."` matches an entry `"acme corp"`.
2. **Canonical key** (`canonical_key`): a business identifier (`PRD-482`, `SUP-001`,
   `INV-2026-0148`) keys by its normalised form. Any other name is NFKD-folded (accents dropped),
   case-folded, `&` read as `and`, `.` and apostrophes removed (`S.A.` → `sa`), other punctuation
   turned into spaces, whitespace collapsed and a leading `the` dropped. For organisations
   (Company, Supplier) trailing legal suffixes are removed repeatedly (`LEGAL_SUFFIXES`), so
   `ACME Inc.`, `Acme, Inc`, `ACME Incorporated` and `The Acme Company Ltd` all key as `acme`.
   A name that would become empty keeps its last token (`"The Company"` → `company`).
3. **Supplier/Company ids**: a name seen with an external id (`SUP-001`) registers that id, so a
   later mention of the bare id in the same document resolves to the named entity.
4. **Near duplicates** (within one document and one type only): `rapidfuzz` `token_sort_ratio`
   ≥ `FUZZY_THRESHOLD` (92) on canonical keys merges into the first-seen entity, unless the keys
   differ in a digit-bearing or short (< 4 characters) token, so `Supplier A`/`Supplier B` and
   `Plant 1`/`Plant 2` never merge. Identifiers are never fuzzy-matched.

Guarantees: the same calls in the same order give the same ids; entity ids are
`ids.entity_id(tenant, type, canonical key)` and therefore global per tenant. A fuzzy merge
within a document keeps the first-seen key (later documents see only their own spellings: use
the alias table for cross-document variants). Every surface spelling merged into an entity is
kept in `Entity.aliases`; conflicting external ids are reported in `conflicts`, never overwritten.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from manifold.shared import ids
from manifold.shared.artifacts import Entity, Provenance
from manifold.shared.events import MetadataValue
from manifold.shared.identifiers import normalize_identifier
from manifold.shared.vocabulary import ENTITY_TYPES, LEGAL_SUFFIXES, is_organization

FUZZY_THRESHOLD = 92.0


_DROP = re.compile(r"[.'’`´]")
_PUNCT = re.compile(r"[^\w\s]|_")


def canonical_key(entity_type: str, name: str) -> str:
    """The key that identifies `name` among entities of `entity_type` (see the module rules).

    Returns "" for a name with no letters or digits; callers must not resolve such names.
    """
    identifier = normalize_identifier(name)
    if identifier is not None:
        return identifier
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = _PUNCT.sub(" ", _DROP.sub("", text.replace("&", " and ")))
    tokens = text.split()
    if len(tokens) > 1 and tokens[0] == "the":
        tokens = tokens[1:]
    if is_organization(entity_type):
        while len(tokens) > 1 and tokens[-1] in LEGAL_SUFFIXES:
            tokens.pop()
            if len(tokens) > 1 and tokens[-1] == "and":  # "Smith & Co" -> "smith"
                tokens.pop()
    return " ".join(tokens)


def _is_identifier_key(key: str) -> bool:
    return normalize_identifier(key) == key


def _mergeable(a: str, b: str) -> bool:
    """The guard: keys differing in a short or digit-bearing token name different things."""
    return not any(len(t) < 4 or any(c.isdigit() for c in t) for t in set(a.split()) ^ set(b.split()))


@dataclass(frozen=True)
class Conflict:
    """Two different values for one property of one entity (e.g. a supplier with two ids)."""

    entity_id: str
    entity_type: str
    name: str
    field: str
    existing: str
    new: str
    provenance: Provenance | None


@dataclass
class _Draft:
    entity_type: str
    key: str
    entity_id: str
    name: str
    aliases: list[str] = field(default_factory=list)
    properties: dict[str, MetadataValue] = field(default_factory=dict)
    provenance: list[Provenance] = field(default_factory=list)


class EntityResolver:
    """Resolves the entity mentions of one document to stable ids and accumulates the entities.

    Not thread-safe; make one per document. Deterministic: the same sequence of calls gives the
    same ids, names, aliases and provenance order.
    """

    def __init__(
        self,
        tenant_id: str,
        aliases: Mapping[str, str] | None = None,
        *,
        threshold: float = FUZZY_THRESHOLD,
    ) -> None:
        self._tenant = tenant_id
        self._aliases = dict(aliases or {})
        self._alias_keys: dict[str, dict[str, str]] = {}
        self._threshold = threshold
        self._drafts: dict[str, _Draft] = {}  # entity id -> draft, first-seen order
        self._by_key: dict[tuple[str, str], str] = {}  # (type, key or variant key) -> entity id
        self._by_external: dict[tuple[str, str], str] = {}  # (type, external id) -> entity id
        self._fuzzy: dict[str, tuple[list[str], list[str]]] = {}  # type -> (name keys, entity ids) first-seen
        self.conflicts: list[Conflict] = []

    def canonical_name(self, entity_type: str, name: str) -> str:
        """`name` through the alias table (by canonical key), or `name` itself."""
        table = self._alias_keys.get(entity_type)
        if table is None:
            table = {}
            for alias, target in sorted(self._aliases.items()):
                key = canonical_key(entity_type, alias)
                if key:
                    table.setdefault(key, target.strip())
            self._alias_keys[entity_type] = table
        return table.get(canonical_key(entity_type, name), name)

    def lookup(self, entity_type: str, name: str) -> str | None:
        """The id `name` would resolve to among entities already seen, without creating one."""
        surface = " ".join(name.split())
        key = canonical_key(entity_type, self.canonical_name(entity_type, surface))
        return self._find(entity_type, key)

    def known_types(self, name: str) -> list[str]:
        """The entity types under which `name` already resolves in this document."""
        return [t for t in ENTITY_TYPES if self.lookup(t, name) is not None]

    def entity_type(self, entity_id: str) -> str:
        return self._drafts[entity_id].entity_type

    def resolve(
        self,
        entity_type: str,
        name: str,
        provenance: Provenance | None = None,
        *,
        external_id: str | None = None,
    ) -> str:
        """The stable id of the entity `name` names; creates the entity on first sight.

        `external_id` (e.g. a supplier id next to the supplier name) is stored as the entity's
        `external_id` property and links later bare-id mentions to this entity. Raises ValueError
        for an unknown type or a name without letters or digits.
        """
        if entity_type not in ENTITY_TYPES:
            raise ValueError(f"unknown entity type {entity_type!r}")
        surface = " ".join(name.split())
        target = self.canonical_name(entity_type, surface)
        key = canonical_key(entity_type, target)
        if not key:
            raise ValueError(f"{entity_type} name {name!r} has no letters or digits")
        entity = self._find(entity_type, key)
        if entity is None:
            entity = self._create(entity_type, key, target)
        draft = self._drafts[entity]
        self._by_key.setdefault((entity_type, key), entity)
        for spelling in (target, surface):
            if spelling != draft.name and spelling not in draft.aliases:
                draft.aliases.append(spelling)
        if provenance is not None and provenance not in draft.provenance:
            draft.provenance.append(provenance)
        if external_id:
            self._link_external(draft, external_id, provenance)
        return entity

    def entities(self) -> list[Entity]:
        """Every resolved entity, sorted by (type, canonical key)."""
        drafts = sorted(self._drafts.values(), key=lambda d: (d.entity_type, d.key))
        return [
            Entity(
                entity_id=d.entity_id,
                type=d.entity_type,
                canonical_key=d.key,
                name=d.name,
                aliases=list(d.aliases),
                properties=dict(sorted(d.properties.items())),
                provenance=list(d.provenance),
            )
            for d in drafts
        ]

    def _find(self, entity_type: str, key: str) -> str | None:
        if not key:
            return None
        found = self._by_key.get((entity_type, key))
        if found is not None:
            return found
        if _is_identifier_key(key):
            return self._by_external.get((entity_type, key))
        keys, entities = self._fuzzy.get(entity_type, ([], []))
        hits = process.extract(key, keys, scorer=fuzz.token_sort_ratio, score_cutoff=self._threshold, limit=None)
        for choice, _score, index in sorted(hits, key=lambda hit: (-hit[1], hit[2])):
            if _mergeable(key, choice):
                return entities[index]
        return None

    def _create(self, entity_type: str, key: str, name: str) -> str:
        entity = ids.entity_id(self._tenant, entity_type, key)
        display = key if _is_identifier_key(key) else name
        self._drafts[entity] = _Draft(entity_type, key, entity, display)
        if not _is_identifier_key(key):
            keys, entities = self._fuzzy.setdefault(entity_type, ([], []))
            keys.append(key)
            entities.append(entity)
        return entity

    def _link_external(self, draft: _Draft, external_id: str, provenance: Provenance | None) -> None:
        ext = normalize_identifier(external_id) or " ".join(external_id.split())
        existing = draft.properties.get("external_id")
        if existing is None:
            draft.properties["external_id"] = ext
        elif existing != ext:
            self.conflicts.append(Conflict(
                draft.entity_id, draft.entity_type, draft.name, "external_id", str(existing), ext, provenance
            ))
            return
        owner = self._by_external.setdefault((draft.entity_type, ext), draft.entity_id)
        if owner != draft.entity_id:
            other = self._drafts[owner]
            self.conflicts.append(Conflict(
                draft.entity_id, draft.entity_type, draft.name, "external_id", f"{ext} (already {other.name})",
                ext, provenance,
            ))


__all__ = ["FUZZY_THRESHOLD", "LEGAL_SUFFIXES", "Conflict", "EntityResolver", "canonical_key"]
