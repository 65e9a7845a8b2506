"""What each ingestion stage hands to the next: frozen, typed, versioned models.

parse → `ParsedDocument` → chunk → `ChunkedDocument` → embed → `EmbeddedDocument` →
extract → `ExtractedDocument` → load → `LoadNotice`.

Every model carries the `DocRef` (tenant, document, version, content hash) and the
`PipelineVersions` it was built with, so every derived record can say exactly where it came from.
Ids are derived by `manifold.shared.ids` from (tenant, document, version, content hash, config
fingerprint, position): replaying a stage yields the same ids.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from manifold.shared.events import MetadataValue, Sha256, TenantId


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PipelineVersions(_Frozen):
    """The versions of every component that shapes derived records."""

    parser: str
    chunker: str
    embedding_model: str
    embedding_revision: str
    embedding_dim: int
    embedding_normalized: bool
    extraction: str
    pg_schema: str
    es_schema: str
    graph_schema: str
    chunk_max_chars: int
    chunk_overlap_chars: int

    def fingerprint(self) -> str:
        """A short, stable digest of the whole configuration (part of every derived id)."""
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


class DocRef(_Frozen):
    tenant_id: TenantId
    document_id: str
    version: int = Field(ge=1)
    content_sha256: Sha256
    media_type: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


ElementKind = Literal[
    "Title", "NarrativeText", "ListItem", "Table", "Text", "Address", "EmailHeader", "Identifier", "Other"
]


class Element(_Frozen):
    """One layout element from the parser, in reading order."""

    index: int = Field(ge=0)
    kind: ElementKind
    text: str
    depth: int = Field(0, ge=0, description="heading level for titles, nesting for list items")
    page: int | None = None
    rows: list[list[str]] | None = Field(None, description="table cells, header row first")


class ParsedDocument(_Frozen):
    doc: DocRef
    versions: PipelineVersions
    elements: list[Element]


class Section(_Frozen):
    section_id: str
    ordinal: int = Field(ge=0)
    title: str
    path: list[str] = Field(description="titles from the document root down to this section")


class Chunk(_Frozen):
    """A retrievable unit. Never splits a table row or an identifier block."""

    chunk_id: str
    section_id: str
    ordinal: int = Field(ge=0)
    kind: Literal["text", "table", "list", "identifiers"]
    text: str
    content_sha256: Sha256
    identifiers: list[str] = Field(default_factory=list, description="normalised ids found in the text")


class ChunkedDocument(_Frozen):
    doc: DocRef
    versions: PipelineVersions
    elements: list[Element]
    sections: list[Section]
    chunks: list[Chunk]


class EmbeddedDocument(_Frozen):
    doc: DocRef
    versions: PipelineVersions
    elements: list[Element]
    sections: list[Section]
    chunks: list[Chunk]
    vectors: list[list[float]] = Field(description="one normalised vector per chunk, same order")


class Provenance(_Frozen):
    document_id: str
    version: int
    chunk_id: str | None
    record_id: str | None = None
    extraction_version: str


class Entity(_Frozen):
    entity_id: str = Field(description="stable across documents: derived from type + canonical key")
    type: str
    canonical_key: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    properties: dict[str, MetadataValue] = Field(default_factory=dict)
    provenance: list[Provenance]


class Relation(_Frozen):
    relation_id: str
    type: str
    source_id: str
    target_id: str
    properties: dict[str, MetadataValue] = Field(default_factory=dict)
    valid_from: date | None = None
    valid_to: date | None = None
    provenance: Provenance


class RecordLine(_Frozen):
    line_no: int = Field(ge=1)
    product_code: str | None = None
    description: str | None = None
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal


class BusinessRecord(_Frozen):
    """A validated structured record: invoice, credit note, order or catalog item."""

    record_id: str
    record_type: Literal["invoice", "credit_note", "order", "catalog_item"]
    number: str = Field(description="normalised business identifier, e.g. INV-2026-0148")
    counterparty_id: str | None = None
    counterparty_name: str | None = None
    issued_on: date | None = None
    currency: str | None = Field(None, pattern=r"^[A-Z]{3}$")
    status: str | None = None
    total: Decimal | None = None
    lines: list[RecordLine] = Field(default_factory=list)
    attributes: dict[str, MetadataValue] = Field(default_factory=dict)
    provenance: Provenance


class ReviewItem(_Frozen):
    """Something extraction found but could not accept: kept for a human, never dropped."""

    review_id: str
    reason: str
    payload: dict[str, MetadataValue | list[MetadataValue]]
    provenance: Provenance


class ExtractedDocument(_Frozen):
    doc: DocRef
    versions: PipelineVersions
    sections: list[Section]
    chunks: list[Chunk]
    vectors: list[list[float]]
    entities: list[Entity]
    relations: list[Relation]
    records: list[BusinessRecord]
    review: list[ReviewItem]


class StoreManifest(_Frozen):
    """What load wrote to one store: counts and order-independent checksums per artifact kind."""

    store: Literal["postgres", "elasticsearch", "neo4j"]
    counts: dict[str, int]
    checksums: dict[str, str]


class LoadNotice(_Frozen):
    """Published to `manifold.publish` when a version's artifacts are written (non-serving)."""

    doc: DocRef
    versions: PipelineVersions
    stores: list[StoreManifest]
