"""The extract handler: typed entities and relations with provenance, records, review, replay."""

from __future__ import annotations

import hashlib
import json
from datetime import date
from decimal import Decimal

import pytest
from factories import pipeline_versions

from manifold.ingest.extract import EXTRACTION_VERSION, handle, parse_aliases, sentences
from manifold.shared import ids
from manifold.shared.artifacts import (
    Chunk,
    DocRef,
    Element,
    EmbeddedDocument,
    ExtractedDocument,
    PipelineVersions,
    Section,
)
from manifold.shared.errors import BadInput
from manifold.shared.identifiers import find_identifiers
from manifold.shared.vocabulary import GRAPH_SCHEMA_VERSION, validate_relation

TENANT = "acme"
PROCUREMENT = (
    "Company A has approved Supplier Beta as an approved vendor from 2026-01-01 to 2026-12-31. "
    "Supplier Beta supplies PRD-482. PRD-482 belongs to the Monitoring Products product group."
)
INVOICE_TABLE = [
    ["Invoice No", "Vendor", "Customer", "Date", "Currency", "SKU", "Description", "Qty", "Unit Price", "Line Total",
     "Category"],
    ["INV-2026-0148", "Supplier Beta", "Company A", "2026-03-31", "EUR", "PRD-482", "Sensor", "3", "19.99", "59.97",
     "Monitoring Products"],
    ["INV-2026-0148", "Supplier Beta", "Company A", "2026-03-31", "EUR", "PRD-483", "Cable", "2", "5.00", "10.00", ""],
    ["INV-2026-0149", "Supplier Beta", "Company A", "2026-03-31", "EUR", "PRD-482", "Sensor", "2", "19.99", "40.00",
     ""],
]


def versions(**overrides: object) -> PipelineVersions:
    return pipeline_versions(**{
        "parser": "parser-1", "chunker": "chunker-1", "embedding_model": "all-MiniLM-L6-v2", "embedding_dim": 3,
        "extraction": EXTRACTION_VERSION, "pg_schema": "pg-1", "es_schema": "es-1",
        "graph_schema": GRAPH_SCHEMA_VERSION, **overrides,
    })


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_doc(
    texts: list[str],
    tables: list[list[list[str]]] | None = None,
    *,
    document_id: str = "agreement-2026-04",
    version: int = 1,
    metadata: dict[str, str] | None = None,
    pipeline: PipelineVersions | None = None,
) -> EmbeddedDocument:
    elements = [Element(index=i, kind="NarrativeText", text=t) for i, t in enumerate(texts)]
    elements += [Element(index=len(texts) + i, kind="Table", text="", rows=rows) for i, rows in enumerate(tables or [])]
    chunks = [
        Chunk(chunk_id=f"chk-{document_id}-{i}", section_id="sec-1", ordinal=i, kind="text", text=t,
              content_sha256=sha(t), identifiers=find_identifiers(t))
        for i, t in enumerate(texts)
    ]
    for rows in tables or []:
        text = "\n".join(" | ".join(row) for row in rows)
        chunks.append(Chunk(chunk_id=f"chk-{document_id}-{len(chunks)}", section_id="sec-1", ordinal=len(chunks),
                            kind="table", text=text, content_sha256=sha(text), identifiers=find_identifiers(text)))
    body = json.dumps([texts, tables])
    ref = DocRef(tenant_id=TENANT, document_id=document_id, version=version, content_sha256=sha(body),
                 media_type="text/plain", metadata=metadata or {})
    return EmbeddedDocument(
        doc=ref, versions=pipeline or versions(), elements=elements,
        sections=[Section(section_id="sec-1", ordinal=0, title="Agreement", path=["Agreement"])],
        chunks=chunks, vectors=[[0.0] * 3 for _ in chunks],
    )


def scope_of(doc: EmbeddedDocument) -> str:
    ref = doc.doc
    fingerprint = doc.versions.fingerprint()
    return ids.version_scope(ref.tenant_id, ref.document_id, ref.version, ref.content_sha256, fingerprint)


def by_name(out: ExtractedDocument) -> dict[tuple[str, str], str]:
    return {(e.type, e.name): e.entity_id for e in out.entities}


def triples(out: ExtractedDocument) -> set[tuple[str, str, str, date | None, date | None]]:
    names = {e.entity_id: e.name for e in out.entities}
    return {(r.type, names[r.source_id], names[r.target_id], r.valid_from, r.valid_to) for r in out.relations}


def test_procurement_text_yields_typed_entities_and_relations() -> None:
    doc = make_doc([PROCUREMENT])
    out = handle(doc)
    assert {(e.type, e.name) for e in out.entities} == {
        ("Company", "Company A"), ("Supplier", "Supplier Beta"), ("Product", "PRD-482"),
        ("ProductGroup", "Monitoring Products"),
    }
    assert triples(out) == {
        ("APPROVED_VENDOR", "Company A", "Supplier Beta", date(2026, 1, 1), date(2026, 12, 31)),
        ("SUPPLIES", "Supplier Beta", "PRD-482", None, None),
        ("BELONGS_TO", "PRD-482", "Monitoring Products", None, None),
    }
    assert out.review == [] and out.records == []
    for relation in out.relations:
        source_type = next(e.type for e in out.entities if e.entity_id == relation.source_id)
        target_type = next(e.type for e in out.entities if e.entity_id == relation.target_id)
        assert validate_relation(relation.type, source_type, target_type, relation.properties,
                                 valid_from=relation.valid_from, valid_to=relation.valid_to) is None


def test_ids_and_provenance() -> None:
    doc = make_doc([PROCUREMENT])
    out = handle(doc)
    names = by_name(out)
    company, supplier = names[("Company", "Company A")], names[("Supplier", "Supplier Beta")]
    assert supplier == ids.entity_id(TENANT, "Supplier", "supplier beta")
    assert names[("Product", "PRD-482")] == ids.entity_id(TENANT, "Product", "PRD-482")
    approved = next(r for r in out.relations if r.type == "APPROVED_VENDOR")
    assert approved.relation_id == ids.child_id("rel", scope_of(doc), "APPROVED_VENDOR", company, supplier,
                                                date(2026, 1, 1), date(2026, 12, 31))
    supplies = next(r for r in out.relations if r.type == "SUPPLIES")
    product = names[("Product", "PRD-482")]
    assert supplies.relation_id == ids.child_id("rel", scope_of(doc), "SUPPLIES", supplier, product)
    expected = {"document_id": "agreement-2026-04", "version": 1, "chunk_id": "chk-agreement-2026-04-0",
                "record_id": None, "extraction_version": EXTRACTION_VERSION}
    assert all(r.provenance.model_dump() == expected for r in out.relations)
    assert all([p.model_dump() for p in e.provenance] == [expected] for e in out.entities)


def test_entity_ids_are_stable_across_documents_and_relation_ids_are_version_scoped() -> None:
    one = handle(make_doc([PROCUREMENT], document_id="a", version=1))
    two = handle(make_doc([PROCUREMENT], document_id="b", version=3))
    assert [e.entity_id for e in one.entities] == [e.entity_id for e in two.entities]
    assert {r.relation_id for r in one.relations}.isdisjoint({r.relation_id for r in two.relations})


def test_invalid_relation_goes_to_review_not_to_the_graph() -> None:
    out = handle(make_doc(["INV-2026-0148 belongs to the Monitoring Products group. Supplier Beta supplies CTR-9."]))
    assert out.relations == []
    reasons = sorted(item.reason for item in out.review)
    assert reasons == [
        "BELONGS_TO source must be Product, not Invoice ((Product)-[:BELONGS_TO]->(ProductGroup))",
        "SUPPLIES target must be Product, not Contract ((Supplier)-[:SUPPLIES]->(Product))",
    ]
    item = next(i for i in out.review if i.payload["relation"] == "SUPPLIES")
    assert item.payload["source"] == "Supplier Beta" and item.payload["target"] == "CTR-9"
    assert item.provenance.chunk_id == "chk-agreement-2026-04-0"
    assert {(e.type, e.name) for e in out.entities} == {("Invoice", "INV-2026-0148"), ("Contract", "CTR-9")}


def test_empty_validity_goes_to_review() -> None:
    text = "Company A has approved Supplier Beta as an approved vendor from 2026-12-31 to 2026-01-01."
    out = handle(make_doc([text]))
    assert out.relations == []
    assert "validity is empty" in out.review[0].reason


def test_more_sentence_patterns() -> None:
    text = ("Supplier Beta is an approved vendor for Company A effective 1 March 2026. "
            "ACME Inc. supplies PRD-1, PRD-2 and SKU-77 until 31/12/2026. "
            "Monitoring Products is part of the Instrumentation product group. "
            "CTR-2026-01 covers PRD-1 and the Monitoring Products group. "
            "Company A is a party to CTR-2026-01. CTR-2026-02 is an agreement between Company A and Supplier Beta.")
    assert triples(handle(make_doc([text]))) == {
        ("APPROVED_VENDOR", "Company A", "Supplier Beta", date(2026, 3, 1), None),
        ("SUPPLIES", "ACME Inc", "PRD-1", None, date(2026, 12, 31)),
        ("SUPPLIES", "ACME Inc", "PRD-2", None, date(2026, 12, 31)),
        ("SUPPLIES", "ACME Inc", "SKU-77", None, date(2026, 12, 31)),
        ("PART_OF", "Monitoring Products", "Instrumentation", None, None),
        ("COVERS", "CTR-2026-01", "PRD-1", None, None),
        ("COVERS", "CTR-2026-01", "Monitoring Products", None, None),
        ("PARTY_TO", "Company A", "CTR-2026-01", None, None),
        ("PARTY_TO", "Company A", "CTR-2026-02", None, None),
        ("PARTY_TO", "Supplier Beta", "CTR-2026-02", None, None),
    }


def test_party_of_unknown_type_is_reviewed() -> None:
    out = handle(make_doc(["Gamma Holdings is a party to CTR-7."]))
    assert out.relations == []
    assert out.review[0].reason == "cannot tell whether 'Gamma Holdings' is a company or a supplier"


def test_table_records_entities_and_relations() -> None:
    doc = make_doc([PROCUREMENT], [INVOICE_TABLE])
    out = handle(doc)
    scope = scope_of(doc)
    [first] = [r for r in out.records if r.number == "INV-2026-0148"]
    assert first.record_id == ids.child_id("rec", scope, "invoice", "INV-2026-0148")
    assert first.total is None and first.currency == "EUR" and first.counterparty_name == "Supplier Beta"
    assert [line.amount for line in first.lines] == [Decimal("59.97"), Decimal("10.00")]
    assert first.provenance.record_id == first.record_id and first.provenance.chunk_id is None
    # INV-2026-0149 has 2 × 19.99 = 39.98, not 40.00: review, not a record
    assert [r.number for r in out.records] == ["INV-2026-0148"]
    [issue] = out.review
    assert issue.payload["number"] == "INV-2026-0149" and issue.payload["row_numbers"] == [3]
    assert json.loads(issue.payload["rows"][0]) == INVOICE_TABLE[3]  # type: ignore[index,arg-type]
    facts = triples(out)
    assert {
        ("ISSUED_BY", "INV-2026-0148", "Supplier Beta", None, None),
        ("BILLED_TO", "INV-2026-0148", "Company A", None, None),
        ("CONTAINS", "INV-2026-0148", "PRD-482", None, None),
        ("CONTAINS", "INV-2026-0148", "PRD-483", None, None),
        ("SUPPLIES", "Supplier Beta", "PRD-483", None, None),
    } <= facts
    contains = next(r for r in out.relations if r.type == "CONTAINS" and r.properties["line_no"] == 1)
    assert contains.properties == {
        "line_no": 1, "quantity": "3", "unit_price": "19.99", "amount": "59.97", "currency": "EUR",
    }
    assert contains.provenance.record_id == first.record_id
    # the supplier seen in the table and in the text is one entity with both provenances
    beta = next(e for e in out.entities if e.name == "Supplier Beta")
    kinds = [(p.record_id is not None, p.chunk_id is not None) for p in beta.provenance]
    assert kinds == [(True, False), (False, True)]
    # the same SUPPLIES fact from the table and the sentence is one edge, first provenance kept
    prd_482 = by_name(out)[("Product", "PRD-482")]
    supplies_482 = [r for r in out.relations if r.type == "SUPPLIES" and r.target_id == prd_482]
    assert len(supplies_482) == 1 and supplies_482[0].provenance.record_id == first.record_id


def test_column_map_and_aliases() -> None:
    table = [["Beleg", "Lieferant", "Menge", "Preis", "Betrag", "Artikel"],
             ["INV-9", "Beta GmbH", "2", "1.234,50", "2.469,00", "PRD-1"]]
    doc = make_doc(["Supplier Beta supplies PRD-2."], [table], metadata={"aliases": "Beta GmbH = Supplier Beta"})
    column_map = {"Beleg": "number", "Lieferant": "supplier", "Menge": "quantity", "Preis": "unit_price",
                  "Betrag": "amount", "Artikel": "product_code"}
    assert handle(doc).records == []  # unmapped German headers: just a table
    out = handle(doc, column_map=column_map)
    [record] = out.records
    assert record.lines[0].amount == Decimal("2469.00")
    [supplier] = [e for e in out.entities if e.type == "Supplier"]
    assert supplier.name == "Supplier Beta" and supplier.aliases == ["Beta GmbH"]
    assert supplier.entity_id == ids.entity_id(TENANT, "Supplier", "supplier beta")
    override = handle(doc, column_map=column_map, aliases={"Beta GmbH": "Beta"})
    assert {e.name for e in override.entities if e.type == "Supplier"} == {"Beta", "Supplier Beta"}


def test_unreadable_aliases_metadata_is_reviewed() -> None:
    out = handle(make_doc([PROCUREMENT], metadata={"aliases": "{not json"}))
    assert out.review[0].payload["kind"] == "metadata" and len(out.relations) == 3
    assert parse_aliases('{"a": "b"}') == {"a": "b"}
    assert parse_aliases("a = b; c=d\ne = f") == {"a": "b", "c": "d", "e": "f"}
    with pytest.raises(ValueError):
        parse_aliases("just words")


def test_identifiers_in_chunks_become_typed_entities() -> None:
    table = [["Supplier", "Supplier ID", "SKU", "Price"], ["Supplier Beta", "SUP-001", "PRD-9", "5.00"]]
    text = "See CTR-2026-01, PO-77, CN-3 and INV-2026-0148 for SKU 100 supplied by SUP-001."
    out = handle(make_doc([text], [table]))
    assert {(e.type, e.name) for e in out.entities} == {
        ("Contract", "CTR-2026-01"), ("Order", "PO-77"), ("CreditNote", "CN-3"), ("Invoice", "INV-2026-0148"),
        ("Product", "SKU-100"), ("Product", "PRD-9"), ("Supplier", "Supplier Beta"),
    }
    beta = next(e for e in out.entities if e.type == "Supplier")
    assert beta.properties == {"external_id": "SUP-001"} and len(beta.provenance) == 3  # record, text, table chunk
    assert out.records[0].record_type == "catalog_item" and out.records[0].counterparty_id == "SUP-001"


def test_replay_is_identical() -> None:
    doc = make_doc([PROCUREMENT, "Supplier Betta supplies PRD-9 from 01/02/2026."], [INVOICE_TABLE])
    first, second = handle(doc), handle(doc)
    assert first.model_dump_json() == second.model_dump_json()
    shuffled = doc.model_copy(update={"elements": list(reversed(doc.elements)), "chunks": doc.chunks})
    assert handle(shuffled).model_dump_json() == first.model_dump_json()
    assert [e.canonical_key for e in first.entities if e.type == "Supplier"] == ["supplier beta"]
    assert ("SUPPLIES", "Supplier Beta", "PRD-9", date(2026, 2, 1), None) in triples(first)


def test_handler_rejects_mismatched_inputs() -> None:
    with pytest.raises(BadInput, match="extraction"):
        handle(make_doc([PROCUREMENT], pipeline=versions(extraction="rules-0")))
    with pytest.raises(BadInput, match="graph schema"):
        handle(make_doc([PROCUREMENT], pipeline=versions(graph_schema="graph-0")))
    doc = make_doc([PROCUREMENT])
    with pytest.raises(BadInput, match="vectors"):
        handle(doc.model_copy(update={"vectors": []}))
    with pytest.raises(BadInput, match="unknown field"):
        handle(doc, column_map={"Qty": "qty"})


def test_sentences() -> None:
    assert sentences("ACME Inc. supplies PRD-1. Total 19.99 EUR.\n\n- Beta supplies PRD-2") == [
        "ACME Inc. supplies PRD-1.", "Total 19.99 EUR.", "- Beta supplies PRD-2",
    ]


def test_loose_sentences_do_not_invent_relations() -> None:
    text = ("This Agreement provides Payment Terms. Our Team supplies Goodwill. "
            "Supplier Beta supplies Pressure Sensors. The Board Report is part of Annex B.")
    out = handle(make_doc([text]))
    assert out.relations == [] and out.review == []
    known = "Company A has approved Supplier Beta as an approved vendor. Supplier Beta supplies Pressure Sensors."
    assert ("SUPPLIES", "Supplier Beta", "Pressure Sensors", None, None) in triples(handle(make_doc([known])))


def test_invoice_document_with_a_line_table_and_a_price_list() -> None:
    lines = [["Item", "Qty", "Price", "Amount"], ["Sensor PRD-482", "3", "19.99", "59.97"], ["", "", "Total", "59.97"]]
    price_list = [["SKU", "Price", "Supplier"], ["PRD-482", "19.99", "Supplier Beta"]]
    out = handle(make_doc(["Invoice INV-2026-0148 from Supplier Beta."], [lines, price_list]))
    assert [(r.record_type, r.number, r.total) for r in out.records] == [
        ("invoice", "INV-2026-0148", Decimal("59.97")), ("catalog_item", "PRD-482", None),
    ]
    assert out.review == []
    assert ("CONTAINS", "INV-2026-0148", "PRD-482", None, None) in triples(out)
    assert ("SUPPLIES", "Supplier Beta", "PRD-482", None, None) in triples(out)


def test_a_table_review_item_keeps_a_bounded_number_of_raw_rows() -> None:
    """Finding 4 of issue 13: one bad table of a large file must not stage its whole content again."""
    from manifold.ingest.extract import MAX_ISSUE_ROWS

    lines = [["product_code", "description", "quantity", "amount"]]
    lines += [[f"PRD-{i}", f"part {i}", "1", "2.00"] for i in range(MAX_ISSUE_ROWS + 50)]
    out = handle(make_doc(["A list of parts."], [lines]))  # line items, but no record number anywhere
    [issue] = out.review
    assert len(issue.payload["rows"]) == MAX_ISSUE_ROWS  # type: ignore[arg-type]
    assert issue.payload["rows_omitted"] == 50
    assert issue.payload["row_numbers"] == list(range(1, MAX_ISSUE_ROWS + 51))
def test_columns_not_understood_are_named_in_review_when_a_record_lacks_a_field() -> None:
    table = [["Invoice No", "Buchungsdatum", "Vendor", "Item Code", "Qty", "Unit Price", "Line Total", "Currency"],
             ["INV-77", "14.04.2026", "Supplier Beta", "PRD-1", "2", "5.00", "10.00", "EUR"]]
    out = handle(make_doc([], [table]))
    [record] = out.records
    assert record.issued_on is None and record.attributes["Buchungsdatum#1"] == "14.04.2026"  # kept per line
    [item] = [i for i in out.review if i.payload["kind"] == "columns"]
    assert item.payload["columns"] == ["Buchungsdatum"] and item.payload["lacking"] == ["issued_on"]
    assert "columns not understood: Buchungsdatum" in item.reason and "record_column_map" in item.reason
    mapped = handle(make_doc([], [table]), column_map={"Buchungsdatum": "issued_on"})
    assert not mapped.review and mapped.records[0].issued_on == date(2026, 4, 14)


def test_a_fully_read_table_with_extra_columns_is_not_reviewed() -> None:
    table = [["Invoice No", "Invoice Date", "Vendor", "Item Code", "Qty", "Unit Price", "Line Total", "Currency",
              "Cost Centre"],
             ["INV-78", "2026-04-14", "Supplier Beta", "PRD-1", "2", "5.00", "10.00", "EUR", "CC-12"]]
    out = handle(make_doc([], [table]))
    assert len(out.records) == 1 and out.review == []
