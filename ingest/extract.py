"""Extract stage: records, entities and relationships from an embedded document (pure handler).

`handle(doc, column_map, aliases) -> ExtractedDocument` applies deterministic, schema-constrained
rules, in this order:

(a) **Tables** (every `Table` element, via `tables.reader.records_from_table`): validated records,
    their entities (Invoice / CreditNote / Order by number, Supplier and Company counterparties,
    Product by code, ProductGroup) and relations: ISSUED_BY and BILLED_TO (invoices, credit
    notes), PLACED_WITH and ORDERED_BY (orders), CONTAINS (one edge per line with a product code,
    carrying line_no, quantity, unit_price, amount as exact strings), SUPPLIES (supplier → each
    product it invoiced or lists in a catalog), BELONGS_TO (product → its group column).
(b) **Sentences** in non-table chunks (`sentence_rules.SENTENCE_PATTERNS` lists them), each
    with an optional validity clause ("from <date> to <date>", "between <date> and <date>",
    "effective <date>", "until <date>") that becomes valid_from / valid_to.
(c) **Identifiers** in every chunk (`chunk.identifiers`): an entity of the type the prefix names
    (PRD/SKU → Product, CTR → Contract, INV → Invoice, CN → CreditNote, PO/ORD → Order, SUP →
    Supplier: a supplier id already seen next to a name resolves to that named supplier).

Guarantees:
- Pure and deterministic: no I/O; the same input gives byte-identical output (entities sorted by
  type and key, relations by type, source, target and id, records and review items in document
  order). Replays therefore upsert onto the same ids.
- Ids: records `child_id("rec", scope, record_type, number)` (catalog items add supplier and
  valid_from), relations `child_id("rel", scope, type, source_id, target_id)` plus the line
  number for CONTAINS and the validity dates when given, review items `child_id("rev", scope,
  ...)`; scope is `version_scope(tenant, document, version, content hash, config fingerprint)`.
  Entity ids are `entity_id(tenant, type, canonical key)`: global per tenant, stable across
  documents. A relation found several times is kept once, with its first provenance.
- Every entity, relation, record and review item carries `Provenance` (document, version, chunk
  or record id, `EXTRACTION_VERSION`); entities merged within the document combine their
  provenance lists.
- Nothing outside the vocabulary is written and nothing is dropped: a relation that fails
  `vocabulary.validate_relation`, a row or record that fails validation, an unreadable date, a
  party whose type cannot be told, or conflicting entity ids becomes a `ReviewItem`. A table
  whose rows are not turned into records says why in a review item of kind `table_skipped`
  (reason: `TableRecords.skipped`) when its header names a number, type or money column, or when
  the document holds nothing but tables (a spreadsheet or CSV/TSV/JSON data file); a plain table
  in prose (options, specifications) is left as text without one.
- Raises `BadInput` when the document was built for another extraction or graph schema version,
  when vectors and chunks differ in number, or when the column map names an unknown field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import date
from typing import Any

from manifold.ingest.resolution import EntityResolver
from manifold.ingest.sentence_rules import (
    GROUP_SUFFIX,
    KEYWORDS,
    RULES,
    SENTENCE_PATTERNS,
    VALIDITY_FROM,
    VALIDITY_UNTIL,
    Mention,
    sentences,
    split_items,
    typed_mention,
)
from manifold.ingest.tables.catalog import catalog_key
from manifold.ingest.tables.headers import map_header
from manifold.ingest.tables.parsed import ParsedRecord, build_record
from manifold.ingest.tables.reader import records_from_table
from manifold.ingest.tables.rows import RowIssue
from manifold.ingest.tables.values import decimal_text, parse_date
from manifold.shared import ids
from manifold.shared.artifacts import (
    BusinessRecord,
    Chunk,
    Element,
    EmbeddedDocument,
    ExtractedDocument,
    Provenance,
    Relation,
    ReviewItem,
)
from manifold.shared.errors import BadInput
from manifold.shared.events import MetadataValue
from manifold.shared.identifiers import find_identifiers, identifier_kind, normalize_identifier
from manifold.shared.vocabulary import GRAPH_SCHEMA_VERSION, entity_type_for_identifier_kind, validate_relation

EXTRACTION_VERSION = "rules-3"
MAX_ISSUE_ROWS = 100
"""A table review item keeps at most this many raw rows (and counts the rest in `rows_omitted`),
so one bad table of a large file cannot stage its whole content a second time."""

_RECORD_ENTITY = {"invoice": "Invoice", "credit_note": "CreditNote", "order": "Order"}
_RECORD_KINDS = frozenset(_RECORD_ENTITY)
_RECORD_SIGNALS = frozenset({"number", "record_type", "amount", "total", "unit_price", "subtotal", "tax"})
"""A table whose header matches one of these but whose rows are not records gets a review item
saying why (kind `table_skipped`); in a document made only of tables (CSV, TSV, XLSX, JSON
records) every such table does."""



class _Extraction:
    """Accumulates one document's records, relations and review items."""

    def __init__(self, doc: EmbeddedDocument, aliases: Mapping[str, str]) -> None:
        ref = doc.doc
        self.doc = doc
        self.scope = ids.version_scope(ref.tenant_id, ref.document_id, ref.version, ref.content_sha256,
                                       doc.versions.fingerprint())
        self.resolver = EntityResolver(ref.tenant_id, aliases)
        self.records: dict[str, BusinessRecord] = {}
        self.parsed: dict[str, ParsedRecord] = {}
        self.relations: dict[str, Relation] = {}
        self.review: dict[str, ReviewItem] = {}

    def provenance(self, chunk_id: str | None = None, record_id: str | None = None) -> Provenance:
        return Provenance(document_id=self.doc.doc.document_id, version=self.doc.doc.version,
                          chunk_id=chunk_id, record_id=record_id, extraction_version=EXTRACTION_VERSION)

    def flag(self, kind: str, anchor: tuple[object, ...], reason: str,
             payload: dict[str, MetadataValue | list[MetadataValue]], provenance: Provenance) -> None:
        review_id = ids.child_id("rev", self.scope, kind, *anchor)
        self.review.setdefault(review_id, ReviewItem(
            review_id=review_id, reason=reason, payload={"kind": kind, **payload}, provenance=provenance,
        ))

    def entity(self, mention: Mention, provenance: Provenance) -> str:
        return self.resolver.resolve(mention.type, mention.name, provenance, external_id=mention.external_id)

    def relate(self, relation_type: str, source: Mention, target: Mention, provenance: Provenance, *,
               properties: dict[str, MetadataValue] | None = None,
               valid: tuple[date | None, date | None] = (None, None),
               position: tuple[object, ...] = (), context: str | None = None) -> None:
        """Add a relation if it conforms to the vocabulary, else a review item."""
        valid_from, valid_to = valid
        props = dict(properties or {})
        reason = validate_relation(relation_type, source.type, target.type, props,
                                   valid_from=valid_from, valid_to=valid_to)
        if reason is not None:
            self.flag("relation", (provenance.chunk_id or provenance.record_id, relation_type, source.type, source.name,
                                   target.type, target.name, valid_from, valid_to), reason, {
                "relation": relation_type, "source_type": source.type, "source": source.name,
                "target_type": target.type, "target": target.name, "context": context,
                "valid_from": valid_from.isoformat() if valid_from else None,
                "valid_to": valid_to.isoformat() if valid_to else None,
            }, provenance)
            return
        source_id, target_id = self.entity(source, provenance), self.entity(target, provenance)
        validity = (valid_from, valid_to) if valid_from or valid_to else ()
        relation_id = ids.child_id("rel", self.scope, relation_type, source_id, target_id, *position, *validity)
        self.relations.setdefault(relation_id, Relation(
            relation_id=relation_id, type=relation_type, source_id=source_id, target_id=target_id,
            properties=props, valid_from=valid_from, valid_to=valid_to, provenance=provenance,
        ))

    # (a) tables -------------------------------------------------------------------------------

    def table(self, element: Element, column_map: Mapping[str, str], default_number: str | None,
              *, data_file: bool = False) -> None:
        result = records_from_table(element.rows or [], column_map, default_number=default_number)
        if result.skipped and (data_file or set(result.fields) & _RECORD_SIGNALS):
            self.flag("table_skipped", (element.index, result.skipped), f"table rows not read as records: "
                      f"{result.skipped}", {
                          "element_index": element.index, "page": element.page, "header": list(result.header),
                          "fields": list(result.fields), "rows": len(element.rows or []) - 1,
                      }, self.provenance())
        for issue in result.issues:
            self._table_issue(element, result.header, issue)
        self._unmapped(element, result, column_map)
        for parsed in result.records:
            position = catalog_key(parsed) if parsed.record_type == "catalog_item" else (parsed.number,)
            record_id = ids.child_id("rec", self.scope, parsed.record_type, *position)
            provenance = self.provenance(record_id=record_id)
            previous = self.parsed.get(record_id)
            if previous is not None:
                if _content(previous) != _content(parsed):
                    reason = f"{parsed.record_type} {parsed.number} appears in several tables with different content"
                    self._table_issue(element, result.header, RowIssue(
                        (reason,), parsed.row_numbers, (), parsed.number), record_id)
                continue
            self.parsed[record_id] = parsed
            self.records[record_id] = build_record(parsed, record_id, provenance)
            self._record_graph(parsed, provenance)

    def _unmapped(self, element: Element, result: Any, column_map: Mapping[str, str]) -> None:
        """A review item naming the columns no field mapping understood, when the table could
        not be read fully: some rows went to review, or a record lacks a date, currency, amount or
        counterparty that one of those columns may hold. The operator can add a
        `record_column_map` entry; the values stay verbatim in the records' attributes."""
        if not result.record_like:
            return
        fields = map_header(result.header, column_map)
        unmapped = [h for h, f in zip(result.header, fields, strict=True) if f is None and h]
        if not unmapped:
            return
        lacking = sorted({name for r in result.records for name, value in (
            ("issued_on", r.issued_on if r.record_type != "catalog_item" else True),
            ("currency", r.currency), ("supplier", r.supplier or r.supplier_id),
            ("amount", r.total is not None or r.subtotal is not None or r.lines or r.unit_price is not None),
        ) if not value})
        if not result.issues and not lacking:
            return
        missing = f"; records lack {', '.join(lacking)}" if lacking else ""
        reason = (f"columns not understood: {', '.join(unmapped)}{missing}; map them with record_column_map "
                  "(their values are kept verbatim in the records' attributes)")
        self.flag("columns", (element.index, *unmapped), reason, {
            "element_index": element.index, "page": element.page, "columns": list(unmapped),
            "header": list(result.header), "lacking": list(lacking),
        }, self.provenance())

    def _table_issue(self, element: Element, header: tuple[str, ...], issue: RowIssue,
                     record_id: str | None = None) -> None:
        self.flag("table", (element.index, *issue.row_numbers, issue.reason), issue.reason, {
            "element_index": element.index, "page": element.page, "number": issue.number,
            "reasons": list(issue.reasons), "header": list(header), "row_numbers": list(issue.row_numbers),
            "rows": [json.dumps(list(row), ensure_ascii=False) for row in issue.rows[:MAX_ISSUE_ROWS]],
            "rows_omitted": max(0, len(issue.rows) - MAX_ISSUE_ROWS),
        }, self.provenance(record_id=record_id))

    def _record_graph(self, parsed: ParsedRecord, provenance: Provenance) -> None:
        supplier = _organisation("Supplier", parsed.supplier, parsed.supplier_id)
        customer = _organisation("Company", parsed.customer, parsed.customer_id)
        context = f"{parsed.record_type} {parsed.number}"
        if parsed.record_type == "catalog_item":
            product = typed_mention("Product", parsed.number)
            assert product is not None
            if product.type == "Product":
                self.entity(product, provenance)
            if supplier is not None:
                self.relate("SUPPLIES", supplier, product, provenance, valid=(parsed.valid_from, parsed.valid_to),
                            context=context)
            self._group(product, parsed.product_group, provenance, context)
            return
        document = Mention(_RECORD_ENTITY[parsed.record_type], parsed.number)
        self.entity(document, provenance)
        is_order = parsed.record_type == "order"
        if supplier is not None:
            self.relate("PLACED_WITH" if is_order else "ISSUED_BY", document, supplier, provenance, context=context)
        if customer is not None:
            self.relate("ORDERED_BY" if is_order else "BILLED_TO", document, customer, provenance, context=context)
        for line in parsed.lines:
            product = typed_mention("Product", line.product_code) if line.product_code else None
            if product is None:
                continue
            properties: dict[str, MetadataValue] = {
                "line_no": line.line_no, "quantity": decimal_text(line.quantity),
                "unit_price": decimal_text(line.unit_price), "amount": decimal_text(line.amount),
            }
            if parsed.currency:
                properties["currency"] = parsed.currency
            line_context = f"{context} line {line.line_no}"
            self.relate("CONTAINS", document, product, provenance, properties=properties,
                        position=(line.line_no,), context=line_context)
            if supplier is not None and parsed.record_type != "credit_note":
                self.relate("SUPPLIES", supplier, product, provenance, context=line_context)
            self._group(product, line.product_group, provenance, line_context)

    def _group(self, product: Mention, group: str | None, provenance: Provenance, context: str) -> None:
        target = typed_mention("ProductGroup", group) if group else None
        if target is not None:
            self.relate("BELONGS_TO", product, target, provenance, context=context)

    # (b) sentences ----------------------------------------------------------------------------

    def chunk_sentences(self, chunk: Chunk) -> None:
        provenance = self.provenance(chunk_id=chunk.chunk_id)
        for sentence in sentences(chunk.text):
            valid = self._validity(sentence, provenance)
            if valid is None:
                continue
            for rule, pattern in RULES:
                if not KEYWORDS[rule].search(sentence):
                    continue
                for match in pattern.finditer(sentence):
                    for relation_type, source, target in self._rule(rule, match, sentence, provenance):
                        self.relate(relation_type, source, target, provenance, valid=valid, context=sentence)

    def _validity(self, sentence: str, provenance: Provenance) -> tuple[date | None, date | None] | None:
        """(valid_from, valid_to) stated in the sentence; None (and a review item) if unreadable."""
        match = VALIDITY_FROM.search(sentence) or VALIDITY_UNTIL.search(sentence)
        if match is None:
            return (None, None)
        found = match.groupdict()
        try:
            return tuple(parse_date(found[k]) if found.get(k) else None for k in ("f", "t"))  # type: ignore[return-value]  # a 2-tuple: two keys
        except ValueError as exc:
            if any(pattern.search(sentence) for _, pattern in RULES):
                self.flag("validity", (provenance.chunk_id, sentence), f"unreadable validity date: {exc}",
                          {"sentence": sentence, "clause": match.group(0)}, provenance)
            return None

    def _rule(self, rule: str, match: re.Match[str], sentence: str,
              provenance: Provenance) -> list[tuple[str, Mention, Mention]]:
        a, b = match["a"], match["b"]
        if rule in ("approves", "approved_of"):
            company, supplier = typed_mention("Company", a), typed_mention("Supplier", b)
            return [("APPROVED_VENDOR", company, supplier)] if company and supplier else []
        if rule == "supplies":
            supplier = typed_mention("Supplier", a)
            if supplier is None:
                return []
            known = self.resolver.lookup("Supplier", supplier.name) is not None
            products = [m for item in split_items(b) if (m := typed_mention("Product", item))]
            return [("SUPPLIES", supplier, p) for p in products  # a product *name* needs a known party
                    if known or normalize_identifier(p.name) or self.resolver.lookup("Product", p.name)]
        if rule == "belongs":
            return self._belongs(match)
        if rule == "covers":
            contract = typed_mention("Contract", a)
            if contract is None or normalize_identifier(contract.name) is None:
                return []  # "This agreement covers ...": no contract id to anchor the edge
            marked = bool(match["post"])
            targets = [self._covered(item, marked, sentence, provenance) for item in split_items(b)]
            return [("COVERS", contract, t) for t in targets if t is not None]
        contract = typed_mention("Contract", match["c"] if rule == "between" else b)
        if contract is None or normalize_identifier(contract.name) is None:
            return []
        parties = [a, b] if rule == "between" else [a]
        typed = [self._party(p, sentence, provenance) for p in parties]
        return [("PARTY_TO", party, contract) for party in typed if party is not None]

    def _belongs(self, match: re.Match[str]) -> list[tuple[str, Mention, Mention]]:
        group = typed_mention("ProductGroup", match["b"])
        if group is None:
            return []
        if match["sub"]:
            source = typed_mention("ProductGroup", match["a"])
            return [("PART_OF", source, group)] if source else []
        out: list[tuple[str, Mention, Mention]] = []
        marked = bool(match["pre"] or match["post"])
        for item in split_items(match["a"]):
            subject = typed_mention("Product", item)
            if subject is None:
                continue
            is_code = normalize_identifier(subject.name) is not None
            is_group = self.resolver.lookup("ProductGroup", subject.name) or GROUP_SUFFIX.search(subject.name)
            if not is_code and is_group:
                out.append(("PART_OF", Mention("ProductGroup", GROUP_SUFFIX.sub("", subject.name)), group))
            elif is_code or self.resolver.lookup("Product", subject.name) or (match["belongs"] and marked):
                out.append(("BELONGS_TO", subject, group))
            elif match["part"] and (marked or self.resolver.lookup("ProductGroup", group.name)):
                out.append(("PART_OF", Mention("ProductGroup", subject.name), group))
        return out

    def _covered(self, item: str, marked: bool, sentence: str, provenance: Provenance) -> Mention | None:
        mention = typed_mention("ProductGroup", item)
        if mention is None or normalize_identifier(mention.name) is not None:
            return mention
        known = [t for t in ("Product", "ProductGroup") if self.resolver.lookup(t, mention.name)]
        if marked or known == ["ProductGroup"]:
            return mention
        if known == ["Product"]:
            return Mention("Product", mention.name)
        self.flag("typing", (provenance.chunk_id, sentence, mention.name),
                  f"cannot tell whether {mention.name!r} is a product or a group",
                  {"sentence": sentence, "mention": mention.name}, provenance)
        return None

    def _party(self, name: str, sentence: str, provenance: Provenance) -> Mention | None:
        mention = typed_mention("Company", name)
        if mention is None or normalize_identifier(mention.name) is not None:
            return mention
        known = [t for t in ("Company", "Supplier") if self.resolver.lookup(t, mention.name)]
        if len(known) == 1:
            return Mention(known[0], mention.name)
        self.flag("typing", (provenance.chunk_id, sentence, mention.name),
                  f"cannot tell whether {mention.name!r} is a company or a supplier",
                  {"sentence": sentence, "mention": mention.name}, provenance)
        return None

    # (c) identifiers --------------------------------------------------------------------------

    def chunk_identifiers(self, chunk: Chunk) -> None:
        provenance = self.provenance(chunk_id=chunk.chunk_id)
        for identifier in chunk.identifiers:
            entity_type = entity_type_for_identifier_kind(identifier_kind(identifier))
            if entity_type is not None:
                self.resolver.resolve(entity_type, identifier, provenance)

    def conflicts(self) -> None:
        for conflict in self.resolver.conflicts:
            provenance = conflict.provenance or self.provenance()
            reason = (f"{conflict.entity_type} {conflict.name!r} has two {conflict.field} values: "
                      f"{conflict.existing}, {conflict.new}")
            self.flag("entity", (conflict.entity_id, conflict.field, conflict.existing, conflict.new), reason, {
                "entity_id": conflict.entity_id, "entity_type": conflict.entity_type, "name": conflict.name,
                "field": conflict.field, "existing": conflict.existing, "new": conflict.new,
            }, provenance)


def _organisation(entity_type: str, name: str | None, external_id: str | None) -> Mention | None:
    if name:
        return typed_mention(entity_type, name, external_id)
    return typed_mention(entity_type, external_id) if external_id else None


def _content(parsed: ParsedRecord) -> ParsedRecord:
    return replace(parsed, row_numbers=())


def _document_number(elements: list[Element]) -> str | None:
    """The one invoice / credit-note / order number the document's text names, if exactly one."""
    found = {
        identifier
        for element in elements if element.kind != "Table"
        for identifier in find_identifiers(element.text)
        if identifier_kind(identifier) in _RECORD_KINDS
    }
    return next(iter(found)) if len(found) == 1 else None


def parse_aliases(raw: MetadataValue) -> dict[str, str]:
    """An alias table from document metadata: a JSON object, or `alias = canonical` pairs
    separated by `;` or new lines. ValueError when it is neither."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        raise ValueError(f"aliases must be text, got {type(raw).__name__}")
    text = raw.strip()
    if text.startswith("{"):
        table = json.loads(text)
        if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            raise ValueError("aliases JSON must map strings to strings")
        return table
    out: dict[str, str] = {}
    for pair in re.split(r"[;\n]", text):
        if not pair.strip():
            continue
        alias, sep, canonical = pair.partition("=")
        if not sep or not alias.strip() or not canonical.strip():
            raise ValueError(f"alias entry {pair.strip()!r} is not 'alias = canonical'")
        out[alias.strip()] = canonical.strip()
    return out


def handle(
    doc: EmbeddedDocument,
    column_map: dict[str, str] | None = None,
    aliases: dict[str, str] | None = None,
) -> ExtractedDocument:
    """Extract records, entities, relations and review items from one document version.

    `column_map` is the operator's `IngestSettings.record_column_map`; `aliases` (alias →
    canonical name) wins over the document's `aliases` metadata. Pure and deterministic.
    """
    if doc.versions.extraction != EXTRACTION_VERSION or doc.versions.graph_schema != GRAPH_SCHEMA_VERSION:
        raise BadInput(
            f"document built for extraction {doc.versions.extraction!r} / graph schema {doc.versions.graph_schema!r}; "
            f"this handler is {EXTRACTION_VERSION!r} / {GRAPH_SCHEMA_VERSION!r}"
        )
    if len(doc.vectors) != len(doc.chunks):
        raise BadInput(f"{len(doc.vectors)} vectors for {len(doc.chunks)} chunks")
    column_map = dict(column_map or {})
    try:
        map_header([], column_map)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    table: dict[str, str] = {}
    alias_error = None
    try:
        table = parse_aliases(doc.doc.metadata.get("aliases"))
    except (ValueError, json.JSONDecodeError) as exc:
        alias_error = str(exc)
    table.update(aliases or {})
    run = _Extraction(doc, table)
    if alias_error is not None:
        run.flag("metadata", ("aliases",), f"unreadable aliases metadata: {alias_error}",
                 {"aliases": doc.doc.metadata.get("aliases")}, run.provenance())
    elements = sorted(doc.elements, key=lambda e: e.index)
    default_number = _document_number(elements)
    data_file = bool(elements) and all(e.kind in ("Table", "Title") for e in elements)
    for element in elements:
        if element.kind == "Table" and element.rows:
            run.table(element, column_map, default_number, data_file=data_file)
    chunks = sorted(doc.chunks, key=lambda c: c.ordinal)
    for chunk in chunks:
        if chunk.kind != "table":
            run.chunk_sentences(chunk)
    for chunk in chunks:
        run.chunk_identifiers(chunk)
    run.conflicts()
    relations = sorted(run.relations.values(), key=lambda r: (r.type, r.source_id, r.target_id, r.relation_id))
    return ExtractedDocument(
        doc=doc.doc, versions=doc.versions, sections=doc.sections, chunks=doc.chunks, vectors=doc.vectors,
        entities=run.resolver.entities(), relations=relations, records=list(run.records.values()),
        review=list(run.review.values()),
    )


__all__ = ["EXTRACTION_VERSION", "SENTENCE_PATTERNS", "handle", "parse_aliases", "sentences"]
