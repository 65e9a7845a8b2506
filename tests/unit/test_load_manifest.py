"""Expected store manifests are pure, deterministic and order-independent; the load handler
validates before writing, writes every store and announces the expected manifests."""

from __future__ import annotations

import hashlib
import math
from datetime import date
from decimal import Decimal

import pytest
from factories import pipeline_versions

from manifold.ingest.load import expected_manifests, handle, handle_batch
from manifold.shared.artifacts import (
    BusinessRecord,
    Chunk,
    DocRef,
    Entity,
    ExtractedDocument,
    LoadNotice,
    Provenance,
    RecordLine,
    Relation,
    ReviewItem,
    Section,
    StoreManifest,
)
from manifold.shared.errors import BadInput, Transient
from manifold.shared.ids import child_id, entity_id, version_scope

VERSIONS = pipeline_versions(parser="parser-1", chunker="chunker-1", embedding_model="all-MiniLM-L6-v2",
                             extraction="extract-1")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _vector(seed: int) -> list[float]:
    raw = [math.sin(seed * 7.0 + i * 0.37) for i in range(384)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def build_doc(tenant: str = "acme", document_id: str = "contract-7", version: int = 1) -> ExtractedDocument:
    ref = DocRef(tenant_id=tenant, document_id=document_id, version=version,
                 content_sha256=_sha(f"{document_id}@{version}"), media_type="text/markdown")
    scope = version_scope(tenant, document_id, version, ref.content_sha256, VERSIONS.fingerprint())
    sections = [Section(section_id=child_id("sec", scope, i), ordinal=i, title=t, path=["Agreement", t])
                for i, t in enumerate(["Parties", "Invoice"])]
    texts = ["ACME buys sensors from Beta GmbH.", "Invoice INV-2026-0148 from Beta GmbH.", "2 x PRD-482 at 10.50 EUR"]
    chunks = [Chunk(chunk_id=child_id("chunk", scope, i), section_id=sections[min(i, 1)].section_id, ordinal=i,
                    kind="text" if i < 2 else "table", text=t, content_sha256=_sha(t),
                    identifiers=["INV-2026-0148"] if i == 1 else [])
              for i, t in enumerate(texts)]
    prov = Provenance(document_id=document_id, version=version, chunk_id=chunks[0].chunk_id,
                      extraction_version="extract-1")
    record_id = child_id("rec", scope, 0)
    record = BusinessRecord(
        record_id=record_id, record_type="invoice", number="INV-2026-0148", counterparty_id="SUP-9",
        counterparty_name="Beta GmbH", issued_on=date(2026, 3, 31), currency="EUR", status="open",
        total=Decimal("31.00"),
        lines=[RecordLine(line_no=1, product_code="PRD-482", description="sensor", quantity=Decimal("2"),
                          unit_price=Decimal("10.50"), amount=Decimal("21.00")),
               RecordLine(line_no=2, product_code="PRD-9", description="cable", quantity=Decimal("1"),
                          unit_price=Decimal("10"), amount=Decimal("10.00"))],
        attributes={"po": "PO-1", "discount": 0.5},
        provenance=prov.model_copy(update={"chunk_id": chunks[1].chunk_id}),
    )
    acme = Entity(entity_id=entity_id(tenant, "company", "acme"), type="company", canonical_key="acme",
                  name="ACME", aliases=["Acme Corp"], provenance=[prov])
    beta = Entity(entity_id=entity_id(tenant, "supplier", "beta-gmbh"), type="supplier", canonical_key="beta-gmbh",
                  name="Beta GmbH", provenance=[prov, prov.model_copy(update={"chunk_id": chunks[1].chunk_id})])
    relation = Relation(relation_id=child_id("rel", scope, 0), type="SUPPLIES", source_id=beta.entity_id,
                        target_id=acme.entity_id, properties={"category": "sensors", "share": 0.25},
                        valid_from=date(2026, 1, 1), provenance=prov)
    review = ReviewItem(review_id=child_id("rev", scope, 0), reason="unknown relation type VENDOR_OF",
                        payload={"type": "VENDOR_OF", "tokens": ["Beta", "ACME"], "score": 1.0},
                        provenance=prov)
    return ExtractedDocument(doc=ref, versions=VERSIONS, sections=sections, chunks=chunks,
                             vectors=[_vector(i) for i in range(3)], entities=[acme, beta],
                             relations=[relation], records=[record], review=[review])


def _by_store(manifests: list[StoreManifest]) -> dict[str, StoreManifest]:
    return {m.store: m for m in manifests}


def test_counts_per_store() -> None:
    got = _by_store(expected_manifests(build_doc()))
    assert list(got) == ["postgres", "elasticsearch", "neo4j"]
    assert got["postgres"].counts == {"chunks": 3, "vectors": 3, "sections": 2, "records": 1,
                                      "record_lines": 2, "review_items": 1}
    assert got["elasticsearch"].counts == {"chunks": 3}
    assert got["neo4j"].counts == {"entities": 2, "edges": 1}
    for manifest in got.values():
        assert set(manifest.checksums) == set(manifest.counts)
        assert all(manifest.checksums[k].startswith(f"{n}:") for k, n in manifest.counts.items())


def test_deterministic() -> None:
    assert expected_manifests(build_doc()) == expected_manifests(build_doc())
    assert expected_manifests(build_doc()) != expected_manifests(build_doc(tenant="other"))


def test_order_independent() -> None:
    doc = build_doc()
    record = doc.records[0]
    shuffled = doc.model_copy(update={
        "sections": doc.sections[::-1],
        "chunks": doc.chunks[::-1],
        "vectors": doc.vectors[::-1],  # vectors stay paired with their chunks
        "entities": [e.model_copy(update={"provenance": e.provenance[::-1]}) for e in doc.entities[::-1]],
        "records": [record.model_copy(update={"lines": record.lines[::-1],
                                              "attributes": dict(reversed(record.attributes.items()))})],
    })
    assert expected_manifests(shuffled) == expected_manifests(doc)


def test_checksums_follow_content_not_representation() -> None:
    doc = build_doc()
    base = _by_store(expected_manifests(doc))["postgres"].checksums
    record = doc.records[0]

    same_value = record.model_copy(update={"lines": [
        record.lines[0].model_copy(update={"unit_price": Decimal("10.5000")}), record.lines[1]]})
    assert _by_store(expected_manifests(doc.model_copy(update={"records": [same_value]})))["postgres"].checksums == base

    other_amount = record.model_copy(update={"lines": [
        record.lines[0].model_copy(update={"amount": Decimal("21.01")}), record.lines[1]]})
    changed = _by_store(expected_manifests(doc.model_copy(update={"records": [other_amount]})))["postgres"].checksums
    assert changed["record_lines"] != base["record_lines"] and changed["records"] == base["records"]

    vectors = [list(v) for v in doc.vectors]
    vectors[2][100] += 1e-3
    changed = _by_store(expected_manifests(doc.model_copy(update={"vectors": vectors})))["postgres"].checksums
    assert changed["vectors"] != base["vectors"] and changed["chunks"] == base["chunks"]


def test_entity_checksum_ignores_shared_attributes_but_not_mentions() -> None:
    doc = build_doc()
    base = _by_store(expected_manifests(doc))["neo4j"]
    renamed = [e.model_copy(update={"name": "Acme Inc.", "aliases": ["A"]}) for e in doc.entities]
    assert _by_store(expected_manifests(doc.model_copy(update={"entities": renamed})))["neo4j"] == base
    fewer = [doc.entities[0], doc.entities[1].model_copy(update={"provenance": doc.entities[1].provenance[:1]})]
    assert _by_store(expected_manifests(doc.model_copy(update={"entities": fewer})))["neo4j"] != base


@pytest.mark.parametrize("change", [
    "duplicate_chunk", "short_vector", "missing_vector", "unknown_endpoint", "unsafe_relation_type",
    "unsafe_entity_type", "foreign_provenance", "unknown_section", "nan_vector",
])
def test_invalid_documents_are_bad_input(change: str) -> None:
    doc = build_doc()
    update: dict[str, object]
    if change == "duplicate_chunk":
        update = {"chunks": [*doc.chunks, doc.chunks[0]], "vectors": [*doc.vectors, doc.vectors[0]]}
    elif change == "short_vector":
        update = {"vectors": [doc.vectors[0][:383], *doc.vectors[1:]]}
    elif change == "missing_vector":
        update = {"vectors": doc.vectors[:2]}
    elif change == "nan_vector":
        update = {"vectors": [[math.nan] * 384, *doc.vectors[1:]]}
    elif change == "unknown_endpoint":
        update = {"relations": [doc.relations[0].model_copy(update={"target_id": "ent_nobody"})]}
    elif change == "unsafe_relation_type":
        update = {"relations": [doc.relations[0].model_copy(update={"type": "SUPPLIES]->() DETACH DELETE n//"})]}
    elif change == "unsafe_entity_type":
        update = {"entities": [doc.entities[0].model_copy(update={"type": "Company:Admin"}), doc.entities[1]]}
    elif change == "foreign_provenance":
        other = doc.relations[0].provenance.model_copy(update={"document_id": "elsewhere"})
        update = {"relations": [doc.relations[0].model_copy(update={"provenance": other})]}
    else:
        update = {"chunks": [doc.chunks[0].model_copy(update={"section_id": "sec_nowhere"}), *doc.chunks[1:]]}
    with pytest.raises(BadInput):
        expected_manifests(doc.model_copy(update=update))


class FakeStore:
    """A store that keeps the last manifest it was asked to hold (a test double of the ports)."""

    def __init__(self, store: str, tamper: bool = False) -> None:
        self.store = store
        self.tamper = tamper
        self.writes = 0
        self.batches = 0

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        self.writes += 1
        manifest = _by_store(expected_manifests(doc))[self.store]
        if self.tamper:
            kind = next(iter(manifest.counts))
            return manifest.model_copy(update={"counts": {**manifest.counts, kind: manifest.counts[kind] - 1}})
        return manifest

    def write_versions(self, docs: list[ExtractedDocument]) -> list[StoreManifest | Exception]:
        self.batches += 1
        out: list[StoreManifest | Exception] = []
        for doc in docs:
            try:
                out.append(self.write_version(doc))
            except Exception as err:  # noqa: BLE001 - the port's per-document outcome
                out.append(err)
        return out

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        raise NotImplementedError

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        raise NotImplementedError

    def manifests(self, tenant_id: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        raise NotImplementedError


def test_handle_writes_every_store_and_announces_expected() -> None:
    doc = build_doc()
    stores = FakeStore("postgres"), FakeStore("elasticsearch"), FakeStore("neo4j")
    notice = handle(doc, *stores)
    assert notice.doc == doc.doc and notice.versions == doc.versions
    assert notice.stores == expected_manifests(doc)
    assert [s.writes for s in stores] == [1, 1, 1]


def test_handle_rejects_before_writing() -> None:
    doc = build_doc()
    bad = doc.model_copy(update={"vectors": doc.vectors[:1]})
    stores = FakeStore("postgres"), FakeStore("elasticsearch"), FakeStore("neo4j")
    with pytest.raises(BadInput):
        handle(bad, *stores)
    assert [s.writes for s in stores] == [0, 0, 0]


def test_handle_read_back_mismatch_is_transient() -> None:
    stores = FakeStore("postgres"), FakeStore("elasticsearch", tamper=True), FakeStore("neo4j")
    with pytest.raises(Transient, match="elasticsearch.*chunks: 2 stored vs 3 expected"):
        handle(build_doc(), *stores)
    assert [s.writes for s in stores] == [1, 1, 0]


def test_handle_batch_writes_each_store_once_per_batch_and_keeps_outcomes_per_document() -> None:
    good, other = build_doc(), build_doc(document_id="d2")
    bad = good.model_copy(update={"vectors": good.vectors[:1]})  # rejected before any write
    stores = FakeStore("postgres"), FakeStore("elasticsearch"), FakeStore("neo4j")
    outcomes = handle_batch([good, bad, other], *stores)
    assert [s.batches for s in stores] == [1, 1, 1]  # one batch call per store, not one per document
    assert [s.writes for s in stores] == [2, 2, 2]
    assert isinstance(outcomes[1], BadInput)
    assert [o.doc.document_id for o in (outcomes[0], outcomes[2])] == [good.doc.document_id, "d2"]


def test_handle_batch_a_version_one_store_refuses_fails_alone_and_goes_no_further() -> None:
    class Refusing(FakeStore):
        def write_version(self, doc: ExtractedDocument) -> StoreManifest:
            if doc.doc.document_id == "d2":
                raise BadInput("elasticsearch refused chunk c (status 400): immense term")
            return super().write_version(doc)

    good, refused = build_doc(), build_doc(document_id="d2")
    stores = FakeStore("postgres"), Refusing("elasticsearch"), FakeStore("neo4j")
    outcomes = handle_batch([good, refused], *stores)
    assert isinstance(outcomes[0], LoadNotice)
    assert isinstance(outcomes[1], BadInput) and "immense term" in str(outcomes[1])
    assert stores[2].writes == 1  # the refused version is not written to the next store
