"""Documents for the contract suites: small, deterministic `ExtractedDocument`s.

`build_doc` is the one-version fixture of the store suites (3 chunks, 2 entities, 1 relation).
`WORLD_SPECS` is the query suites' world: three documents of one tenant whose text and graph
give each query a known answer (best BM25 chunk, exact-id chunks, graph targets and paths with
time validity, a cycle and a fact repeated by two documents).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import date

from factories import pipeline_versions

from manifold.shared.artifacts import Chunk, DocRef, Entity, ExtractedDocument, Provenance, Relation, Section
from manifold.shared.ids import child_id, entity_id, version_scope

VERSIONS = pipeline_versions(parser="parser-1", chunker="chunker-1", extraction="extract-1")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def vector(seed: int) -> list[float]:
    raw = [math.sin(seed * 7.0 + i * 0.37) for i in range(384)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


@dataclass(frozen=True)
class EntitySpec:
    type: str
    key: str
    name: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelationSpec:
    type: str
    source: str
    target: str
    valid_from: date | None = None
    valid_to: date | None = None


@dataclass(frozen=True)
class DocSpec:
    document_id: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    """(section title, chunk texts)."""
    entities: tuple[str, ...] = ()
    relations: tuple[RelationSpec, ...] = ()
    identifiers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """chunk text -> its identifiers."""


ENTITIES: dict[str, EntitySpec] = {
    "acme": EntitySpec("Company", "acme", "ACME Industrial", ("Acme",)),
    "beta": EntitySpec("Supplier", "beta-gmbh", "Beta GmbH"),
    "gamma": EntitySpec("Supplier", "gamma-ltd", "Gamma Ltd"),
    "delta": EntitySpec("Supplier", "delta-sa", "Delta SA"),
    "epsilon": EntitySpec("Supplier", "epsilon-oy", "Epsilon Oy"),
    "p482": EntitySpec("Product", "PRD-482", "Differential pressure sensor"),
    "p9": EntitySpec("Product", "PRD-9", "Shielded cable"),
    "sensors": EntitySpec("ProductGroup", "sensors", "Sensors"),
}

AGREEMENT = DocSpec(
    document_id="agreement-acme",
    sections=(
        ("Approved vendors", ("ACME approves Beta GmbH, Gamma Ltd and Delta SA as vendors for the period stated.",)),
        ("Calibration", ("Every differential pressure sensor must be delivered with a calibration certificate "
                         "traceable to a national standard; calibration is repeated every twelve months.",
                         "Returns of calibrated instruments are accepted within 30 days.")),
        ("Differential pressure sensor PRD-482", ("The sensor covers a range of 0 to 10 bar.",)),
    ),
    entities=("acme", "beta", "gamma", "delta", "p482", "p9", "sensors"),
    relations=(
        RelationSpec("APPROVED_VENDOR", "acme", "beta", date(2026, 1, 1), date(2026, 12, 31)),
        RelationSpec("APPROVED_VENDOR", "acme", "gamma", date(2025, 1, 1), date(2025, 6, 30)),
        RelationSpec("APPROVED_VENDOR", "acme", "delta"),
        RelationSpec("SUPPLIES", "beta", "p482", date(2026, 1, 1)),
        RelationSpec("SUPPLIES", "gamma", "p482", None, date(2025, 6, 30)),
        RelationSpec("SUPPLIES", "gamma", "p9"),
        RelationSpec("BELONGS_TO", "p482", "sensors"),
        RelationSpec("BELONGS_TO", "p9", "sensors"),
        RelationSpec("PART_OF", "p482", "p9"),
        RelationSpec("PART_OF", "p9", "p482"),
    ),
)
INVOICE = DocSpec(
    document_id="invoice-inv-2026-0148",
    sections=(
        ("Invoice INV-2026-0148", ("Invoice INV-2026-0148 from Beta GmbH to ACME Industrial.",
                                   "2 x PRD-482 differential pressure sensor at 10.50 EUR")),
    ),
    entities=("acme", "beta", "p482"),
    relations=(RelationSpec("SUPPLIES", "beta", "p482", date(2026, 3, 1)),),
    identifiers={"Invoice INV-2026-0148 from Beta GmbH to ACME Industrial.": ("INV-2026-0148",),
                 "2 x PRD-482 differential pressure sensor at 10.50 EUR": ("PRD-482",)},
)
NOTICE = DocSpec(
    document_id="notice-delay",
    sections=(("Supplier notice", ("Shipments of shielded cable are delayed by two weeks because of a strike.",)),),
    entities=("gamma", "p9"),
    relations=(),
)
STAGED_ONLY = DocSpec(
    document_id="draft-agreement",
    sections=(("Draft", ("Draft: ACME approves Epsilon Oy; calibration certificate wording pending.",)),),
    entities=("acme", "epsilon"),
    relations=(RelationSpec("APPROVED_VENDOR", "acme", "epsilon"),),
)
WORLD_SPECS = (AGREEMENT, INVOICE, NOTICE)
"""Activated in the query suites; `STAGED_ONLY` is written but never activated."""


def eid(tenant: str, name: str) -> str:
    spec = ENTITIES[name]
    return entity_id(tenant, spec.type, spec.key)


def doc_from_spec(tenant: str, spec: DocSpec, version: int = 1) -> ExtractedDocument:
    ref = DocRef(tenant_id=tenant, document_id=spec.document_id, version=version,
                 content_sha256=sha(f"{spec.document_id}@{version}"), media_type="text/markdown")
    scope = version_scope(tenant, spec.document_id, version, ref.content_sha256, VERSIONS.fingerprint())
    sections, chunks = [], []
    for s_no, (title, texts) in enumerate(spec.sections):
        section = Section(section_id=child_id("sec", scope, s_no), ordinal=s_no, title=title, path=[title])
        sections.append(section)
        for text in texts:
            chunks.append(Chunk(chunk_id=child_id("chunk", scope, len(chunks)), section_id=section.section_id,
                                ordinal=len(chunks), kind="text", text=text, content_sha256=sha(text),
                                identifiers=list(spec.identifiers.get(text, ()))))
    prov = Provenance(document_id=spec.document_id, version=version, chunk_id=chunks[0].chunk_id,
                      extraction_version="extract-1")
    entities = [Entity(entity_id=eid(tenant, n), type=ENTITIES[n].type, canonical_key=ENTITIES[n].key,
                       name=ENTITIES[n].name, aliases=list(ENTITIES[n].aliases), provenance=[prov])
                for n in spec.entities]
    relations = [Relation(relation_id=child_id("rel", scope, i), type=r.type, source_id=eid(tenant, r.source),
                          target_id=eid(tenant, r.target), valid_from=r.valid_from, valid_to=r.valid_to,
                          properties={"source": "contract-test"}, provenance=prov)
                 for i, r in enumerate(spec.relations)]
    return ExtractedDocument(doc=ref, versions=VERSIONS, sections=sections, chunks=chunks,
                             vectors=[vector(i) for i in range(len(chunks))], entities=entities,
                             relations=relations, records=[], review=[])


def build_doc(tenant: str, document_id: str = "contract-7", version: int = 1) -> ExtractedDocument:
    """The store suites' version: 3 chunks (one with an id), 2 entities, 1 temporal relation."""
    spec = DocSpec(
        document_id=document_id,
        sections=(("Parties", ("ACME buys sensors from Beta GmbH.",)),
                  ("Invoice", ("Invoice INV-2026-0148 from Beta GmbH.", "2 x PRD-482 at 10.50 EUR"))),
        entities=("acme", "beta"),
        relations=(RelationSpec("APPROVED_VENDOR", "acme", "beta", date(2026, 1, 1), date(2026, 12, 31)),),
        identifiers={"Invoice INV-2026-0148 from Beta GmbH.": ("INV-2026-0148",),
                     "2 x PRD-482 at 10.50 EUR": ("PRD-482",)},
    )
    return doc_from_spec(tenant, spec, version)
