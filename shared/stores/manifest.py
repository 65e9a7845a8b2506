"""What each store should hold for one document version: checks and (id, content-hash) projections.

Pure functions, no clients. Both sides of publication verification use this module:

- `expected(doc)` (called by the load stage) projects an `ExtractedDocument` onto each store;
- each adapter's `manifest()` reads the rows, documents and nodes back and rebuilds the same
  (id, content-hash) pairs from the *stored* values with the same `*_hash` functions.

So a stored value that differs from what extraction produced (a truncated vector, a changed
amount, a missing mention link) changes a checksum, and a missing or extra artifact changes a
count. Checksums are `ids.set_checksum` (order-independent, count folded in).

Guarantees: every function here is deterministic and independent of list order; `validate`
raises `BadInput` (never a bare exception) for a document no store could hold consistently.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import date
from decimal import Decimal
from typing import Any

import numpy as np

from manifold.shared.artifacts import (
    BusinessRecord,
    Entity,
    ExtractedDocument,
    Provenance,
    RecordLine,
    Relation,
    ReviewItem,
    Section,
    StoreManifest,
)
from manifold.shared.errors import BadInput
from manifold.shared.events import TENANT_PATTERN
from manifold.shared.ids import set_checksum

EMBEDDING_DIM = 384
"""The dimension of the one vector column (`chunks.embedding vector(384)`). A model with another
dimension is a new column/index by migration, never a mix (DESIGN §3.4)."""

POSTGRES_KINDS = ("chunks", "vectors", "sections", "records", "record_lines", "review_items")
ELASTICSEARCH_KINDS = ("chunks",)
NEO4J_KINDS = ("entities", "edges")

_TENANT = re.compile(TENANT_PATTERN)
_LABEL_PART = re.compile(r"^[A-Za-z]+$")
_REL_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,62}$")
RESERVED_LABELS = frozenset({"Entity", "DocumentVersion"})
RESERVED_REL_TYPES = frozenset({"MENTIONED_IN"})


# ---------------------------------------------------------------- canonical values and hashes


def _canon(value: Any) -> Any:
    """A JSON-stable form: integral floats become ints (jsonb and Neo4j may hand them back as
    ints), Decimals become plain strings, dates ISO strings; dict keys are sorted on dump."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _canon(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    raise TypeError(f"cannot canonicalise {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) of JSON-like values."""
    return json.dumps(_canon(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decimal_text(value: Decimal | None) -> str | None:
    """The exact value of a Decimal as plain text, independent of its scale: 10.50 -> '10.5'."""
    if value is None:
        return None
    text = format(value.normalize(), "f")
    return "0" if text in {"-0", "0"} else text


def _date_text(value: Any) -> str | None:
    if value is None:
        return None
    iso = getattr(value, "iso_format", None)  # neo4j.time.Date
    text: str = iso() if iso is not None else value.isoformat()
    return text


def _digest(*parts: Any) -> str:
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()


def vector_hash(vector: Sequence[float] | np.ndarray | Any) -> str:
    """sha256 of the vector as little-endian float32: what pgvector stores, bit for bit.
    Accepts a sequence, a numpy array or a `pgvector.Vector` (anything with `to_numpy()`)."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return hashlib.sha256(np.asarray(vector, dtype="<f4").tobytes()).hexdigest()


def section_hash(ordinal: int, title: str, path: Sequence[str]) -> str:
    return _digest("section", ordinal, title, list(path))


def record_hash(
    *, record_type: str, number: str, counterparty_id: str | None, counterparty_name: str | None,
    issued_on: date | None, currency: str | None, status: str | None, total: Decimal | None,
    attributes: Mapping[str, Any], chunk_id: str | None, extraction_version: str,
) -> str:
    return _digest(
        "record", record_type, number, counterparty_id, counterparty_name, _date_text(issued_on),
        currency, status, decimal_text(total), _canon(dict(attributes)), chunk_id, extraction_version,
    )


def record_line_id(record_id: str, line_no: int) -> str:
    return f"{record_id}#{line_no}"


def record_line_hash(
    *, product_code: str | None, description: str | None, quantity: Decimal,
    unit_price: Decimal, amount: Decimal,
) -> str:
    return _digest(
        "record_line", product_code, description,
        decimal_text(quantity), decimal_text(unit_price), decimal_text(amount),
    )


def review_hash(*, reason: str, payload: Mapping[str, Any], chunk_id: str | None,
                record_id: str | None, extraction_version: str) -> str:
    return _digest("review", reason, _canon(dict(payload)), chunk_id, record_id, extraction_version)


Mention = tuple[str | None, str | None, str]
"""(chunk_id, record_id, extraction_version): one provenance link of an entity to a version."""


def mention_key(entity_id: str, mention: Mention) -> str:
    return _digest("mention", entity_id, *mention)[:32]


def entity_hash(entity_type: str, canonical_key: str, mentions: Iterable[Mention]) -> str:
    """Only what the version owns: identity and its mention links. Name, aliases and properties
    are shared by every document naming the entity (last writer wins), so they are left out;
    otherwise loading document B would break document A's verified checksum."""
    links = sorted(canonical_json(list(m)) for m in set(mentions))
    return _digest("entity", entity_type, canonical_key, links)


def relation_hash(
    *, rel_type: str, source_id: str, target_id: str, properties_json: str,
    valid_from: Any, valid_to: Any, chunk_id: str | None, record_id: str | None,
    extraction_version: str,
) -> str:
    return _digest(
        "relation", rel_type, source_id, target_id, properties_json, _date_text(valid_from),
        _date_text(valid_to), chunk_id, record_id, extraction_version,
    )


def build_manifest(store: str, kinds: Sequence[str], pairs: Mapping[str, Iterable[tuple[str, str]]]) -> StoreManifest:
    """A StoreManifest from (id, hash) pairs per kind; every kind in `kinds` is present."""
    counts: dict[str, int] = {}
    checksums: dict[str, str] = {}
    for kind in kinds:
        items = list(pairs.get(kind, ()))
        counts[kind] = len(items)
        checksums[kind] = set_checksum(items)
    return StoreManifest(store=store, counts=counts, checksums=checksums)  # type: ignore[arg-type]  # store: validated by StoreManifest


# ---------------------------------------------------------------- document-side projections


def check_vocabulary(doc: ExtractedDocument, entity_types: Collection[str] | None,
                     relation_types: Collection[str] | None) -> None:
    """Raises `BadInput` naming any entity or relation type outside the given vocabulary (None:
    that kind is not restricted). Both graph stores call it before writing anything."""
    if entity_types is not None:
        unknown = {e.type for e in doc.entities} - set(entity_types)
        if unknown:
            raise BadInput(f"entity types outside the graph vocabulary: {sorted(unknown)}")
    if relation_types is not None:
        unknown = {r.type for r in doc.relations} - set(relation_types)
        if unknown:
            raise BadInput(f"relation types outside the graph vocabulary: {sorted(unknown)}")


def entity_mentions(entity: Entity, default_extraction: str) -> set[Mention]:
    """The mention links an entity gets from its provenance; an entity without provenance is
    linked to the version as a whole (chunk and record None)."""
    if not entity.provenance:
        return {(None, None, default_extraction)}
    return {(p.chunk_id, p.record_id, p.extraction_version) for p in entity.provenance}


def graph_label(entity_type: str) -> str:
    """The node label for an entity type: `supplier` -> `Supplier`, `credit_note` -> `CreditNote`.
    Only ASCII letters survive; anything else is `BadInput` (labels cannot be parameterised in
    every Cypher clause, so they are validated, never passed through)."""
    parts = entity_type.split("_")
    if not entity_type or len(entity_type) > 64 or not all(_LABEL_PART.fullmatch(p) for p in parts):
        raise BadInput(f"entity type {entity_type!r} is not a valid graph label (letters and '_' only)")
    label = "".join(p[:1].upper() + p[1:] for p in parts)
    if label in RESERVED_LABELS:
        raise BadInput(f"entity type {entity_type!r} collides with a reserved label")
    return label


def check_relation_type(rel_type: str) -> str:
    if not _REL_TYPE.fullmatch(rel_type) or rel_type in RESERVED_REL_TYPES:
        raise BadInput(f"relation type {rel_type!r} is not an allowed relationship type (UPPER_SNAKE)")
    return rel_type


def check_tenant(tenant_id: str) -> str:
    if not isinstance(tenant_id, str) or not _TENANT.fullmatch(tenant_id):
        raise BadInput(f"invalid tenant id {tenant_id!r}")
    return tenant_id


def _section_pair(s: Section) -> tuple[str, str]:
    return s.section_id, section_hash(s.ordinal, s.title, s.path)


def _record_pair(r: BusinessRecord) -> tuple[str, str]:
    return r.record_id, record_hash(
        record_type=r.record_type, number=r.number, counterparty_id=r.counterparty_id,
        counterparty_name=r.counterparty_name, issued_on=r.issued_on, currency=r.currency,
        status=r.status, total=r.total, attributes=r.attributes, chunk_id=r.provenance.chunk_id,
        extraction_version=r.provenance.extraction_version,
    )


def _line_pair(record_id: str, line: RecordLine) -> tuple[str, str]:
    return record_line_id(record_id, line.line_no), record_line_hash(
        product_code=line.product_code, description=line.description, quantity=line.quantity,
        unit_price=line.unit_price, amount=line.amount,
    )


def _review_pair(item: ReviewItem) -> tuple[str, str]:
    p = item.provenance
    return item.review_id, review_hash(
        reason=item.reason, payload=item.payload, chunk_id=p.chunk_id, record_id=p.record_id,
        extraction_version=p.extraction_version,
    )


def relation_properties_json(relation: Relation) -> str:
    return canonical_json(relation.properties)


def _relation_pair(r: Relation) -> tuple[str, str]:
    return r.relation_id, relation_hash(
        rel_type=r.type, source_id=r.source_id, target_id=r.target_id,
        properties_json=relation_properties_json(r), valid_from=r.valid_from, valid_to=r.valid_to,
        chunk_id=r.provenance.chunk_id, record_id=r.provenance.record_id,
        extraction_version=r.provenance.extraction_version,
    )


def expected_postgres(doc: ExtractedDocument) -> StoreManifest:
    return build_manifest("postgres", POSTGRES_KINDS, {
        "chunks": [(c.chunk_id, c.content_sha256) for c in doc.chunks],
        "vectors": [(c.chunk_id, vector_hash(v)) for c, v in zip(doc.chunks, doc.vectors, strict=True)],
        "sections": [_section_pair(s) for s in doc.sections],
        "records": [_record_pair(r) for r in doc.records],
        "record_lines": [_line_pair(r.record_id, ln) for r in doc.records for ln in r.lines],
        "review_items": [_review_pair(i) for i in doc.review],
    })


def expected_elasticsearch(doc: ExtractedDocument) -> StoreManifest:
    return build_manifest("elasticsearch", ELASTICSEARCH_KINDS, {
        "chunks": [(c.chunk_id, c.content_sha256) for c in doc.chunks],
    })


def expected_neo4j(doc: ExtractedDocument) -> StoreManifest:
    default = doc.versions.extraction
    return build_manifest("neo4j", NEO4J_KINDS, {
        "entities": [
            (e.entity_id, entity_hash(e.type, e.canonical_key, entity_mentions(e, default)))
            for e in doc.entities
        ],
        "edges": [_relation_pair(r) for r in doc.relations],
    })


def expected(doc: ExtractedDocument) -> list[StoreManifest]:
    """The manifests of postgres, elasticsearch and neo4j, in that order."""
    validate(doc)
    return [expected_postgres(doc), expected_elasticsearch(doc), expected_neo4j(doc)]


# ---------------------------------------------------------------- validation


def _unique(kind: str, ids: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise BadInput(f"duplicate {kind} id {item!r}")
        seen.add(item)
    return seen


def validate(doc: ExtractedDocument) -> None:
    """Raise `BadInput` unless every store can hold `doc` exactly as the manifests describe it.

    Checked: a valid tenant; unique ids per kind (a duplicate would count twice in the expected
    manifest but once in the store); one finite 384-dim vector per chunk; chunks point at known
    sections; provenance points at this document version and at its own chunks and records;
    relations join entities of this document; graph labels and relationship types are allowlisted.
    """
    ref = doc.doc
    check_tenant(ref.tenant_id)
    section_ids = _unique("section", (s.section_id for s in doc.sections))
    chunk_ids = _unique("chunk", (c.chunk_id for c in doc.chunks))
    record_ids = _unique("record", (r.record_id for r in doc.records))
    _unique("review item", (i.review_id for i in doc.review))
    entity_ids = _unique("entity", (e.entity_id for e in doc.entities))
    _unique("relation", (r.relation_id for r in doc.relations))
    for record in doc.records:
        _unique(f"line of record {record.record_id}", (str(ln.line_no) for ln in record.lines))

    if doc.versions.embedding_dim != EMBEDDING_DIM:
        raise BadInput(f"embedding_dim {doc.versions.embedding_dim} != {EMBEDDING_DIM} (needs a migration)")
    if len(doc.vectors) != len(doc.chunks):
        raise BadInput(f"{len(doc.vectors)} vectors for {len(doc.chunks)} chunks")
    for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
        if len(vector) != EMBEDDING_DIM or not all(math.isfinite(x) for x in vector):
            raise BadInput(f"vector of chunk {chunk.chunk_id} is not {EMBEDDING_DIM} finite floats")
        if chunk.section_id not in section_ids:
            raise BadInput(f"chunk {chunk.chunk_id} names unknown section {chunk.section_id!r}")

    def check_prov(what: str, prov: Provenance) -> None:
        if (prov.document_id, prov.version) != (ref.document_id, ref.version):
            raise BadInput(f"{what}: provenance names {prov.document_id}@{prov.version}, "
                           f"not {ref.document_id}@{ref.version}")
        if prov.chunk_id is not None and prov.chunk_id not in chunk_ids:
            raise BadInput(f"{what}: provenance names unknown chunk {prov.chunk_id!r}")
        if prov.record_id is not None and prov.record_id not in record_ids:
            raise BadInput(f"{what}: provenance names unknown record {prov.record_id!r}")

    for record in doc.records:
        check_prov(f"record {record.record_id}", record.provenance)
    for item in doc.review:
        check_prov(f"review item {item.review_id}", item.provenance)
    for entity in doc.entities:
        graph_label(entity.type)
        for prov in entity.provenance:
            check_prov(f"entity {entity.entity_id}", prov)
    for relation in doc.relations:
        check_relation_type(relation.type)
        check_prov(f"relation {relation.relation_id}", relation.provenance)
        for end in (relation.source_id, relation.target_id):
            if end not in entity_ids:
                raise BadInput(f"relation {relation.relation_id} joins unknown entity {end!r}")


def serving_drift(per_version: Mapping[tuple[str, int], tuple[int, int]],
                  active: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """(document, version) pairs whose serving marks disagree with the manifest's active set.

    `per_version` maps each stored version to (artifacts held, artifacts marked serving): an
    active version must be fully marked, any other version not marked at all.
    """
    return {key for key, (total, on) in per_version.items() if (on != total if key in active else on > 0)}
