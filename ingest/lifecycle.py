"""Composition of the lifecycle ports (publisher, reconciler, status) and `status`.

`build_ports(settings)` connects the manifest and the three version stores (no embedder, so it
is cheap for the CLI); nothing connects at import time. `status` reads only; with `review=True`
it also lists each document's review items, read through the relational store's own role (the
tenant's row-level security, as every other read of `status`), and `review_summary` shortens an
item's payload to one line for `manifold status --review`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from manifold.ingest.reconciler import ReconcilePorts
from manifold.shared.config import ManifoldSettings


def build_ports(settings: ManifoldSettings) -> ReconcilePorts:
    from manifold.shared import vocabulary
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.embedding_cache_pg import PostgresEmbeddingCache
    from manifold.shared.stores.ledger import PostgresVersionLedger
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest
    from manifold.shared.stores.neo4j import Neo4jGraphStore
    from manifold.shared.stores.pg_relational import PostgresRelationalStore
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    return ReconcilePorts(
        manifest=PostgresVersionManifest.from_settings(settings),
        relational=PostgresRelationalStore.from_settings(settings),
        text=ElasticsearchTextIndex.from_settings(settings),
        graph=Neo4jGraphStore.from_settings(settings, entity_types=vocabulary.ENTITY_TYPES,
                                            relation_types=vocabulary.RELATIONS),
        staging=PostgresStagingStore.from_settings(settings),
        ledger=PostgresVersionLedger(settings.postgres.ingest_conninfo()),
        cache=PostgresEmbeddingCache.from_settings(settings),
    )


# What "artifacts" means per store in `status` (vectors are a column of chunks, not counted twice).
_COUNTED = {"postgres": ("chunks", "sections", "records", "record_lines", "review_items"),
            "elasticsearch": ("chunks",), "neo4j": ("entities", "edges")}


@runtime_checkable
class ReviewReader(Protocol):
    """A relational store that lists review items (`PostgresRelationalStore.review_items`)."""

    def review_items(self, tenant_id: str,
                     keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], list[dict[str, Any]]]: ...


def status(ports: ReconcilePorts, tenant_ids: list[str], *, review: bool = False) -> dict[str, Any]:
    """Per document: its active version (or None), its state (that of its newest version, so
    `deleted` after a delete, `staged` while a first version waits) and the active version's
    artifact counts per store as recomputed by each store, and `review_items`: how many review
    items the active version has (rows that could not be read, columns not understood, ...). With a
    ledger port, `in_flight` lists the versions handed out upstream that the publisher has not seen
    yet, with their stage.

    With `review`, every document also has `review`: its active version's review items (`kind`,
    `reason`, `summary` (one line, `review_summary`), `review_id`, `chunk_id`, `record_id`,
    `status`, `payload`), read with one query per tenant through `ports.relational` (a `TypeError`
    if that store cannot list them); without it the result is unchanged."""
    reader: ReviewReader | None = None
    if review:
        if not isinstance(ports.relational, ReviewReader):
            raise TypeError(f"{type(ports.relational).__name__} cannot list review items")
        reader = ports.relational
    documents: list[dict[str, Any]] = []
    for tenant in tenant_ids:
        first = len(documents)
        by_doc: dict[str, list[Any]] = {}
        for entry in ports.manifest.entries(tenant):
            by_doc.setdefault(entry.document_id, []).append(entry)
        for document_id, entries in sorted(by_doc.items()):
            newest = max(entries, key=lambda e: e.version)
            active = next((e.version for e in entries if e.state == "active"), None)
            counts = dict.fromkeys(_COUNTED, 0)
            review_count = 0
            if active is not None:
                for name, store in zip(_COUNTED, ports.stores, strict=True):
                    m = store.manifest(tenant, document_id, active)
                    counts[name] = sum(m.counts.get(k, 0) for k in _COUNTED[name])
                    review_count += m.counts.get("review_items", 0)
            documents.append({"tenant_id": tenant, "document_id": document_id, "active_version": active,
                              "state": newest.state, "versions": {e.version: e.state for e in entries},
                              "counts": counts, "review_items": review_count})
        if reader is not None:
            _attach_review(reader, tenant, documents[first:])
    in_flight = [f.to_json() for t in tenant_ids for f in ports.ledger.in_flight(t)] if ports.ledger else []
    return {"documents": documents, "in_flight": in_flight}


def _attach_review(store: ReviewReader, tenant: str, documents: list[dict[str, Any]]) -> None:
    """Set `review` on each of one tenant's `documents`: the active version's items, summarised."""
    keys = [(d["document_id"], d["active_version"]) for d in documents
            if d["active_version"] is not None and d["review_items"]]
    found = store.review_items(tenant, keys) if keys else {}
    for d in documents:
        items = found.get((d["document_id"], d["active_version"]), []) if d["active_version"] is not None else []
        d["review"] = [{"kind": (item.get("payload") or {}).get("kind"), "reason": item["reason"],
                        "summary": review_summary(item.get("payload") or {}, reason=str(item["reason"])),
                        **{k: item.get(k) for k in ("review_id", "chunk_id", "record_id", "status", "payload")}}
                       for item in items]


SUMMARY_WIDTH = 160
"""`review_summary` shortens its line to at most this many characters."""
_CELL_WIDTH = 24


def _short(value: object, width: int = _CELL_WIDTH) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _names(values: object, limit: int = 12) -> str:
    cells = [_short(v) for v in values] if isinstance(values, list) else [_short(values)]
    more = f" (+{len(cells) - limit} more)" if len(cells) > limit else ""
    return " | ".join(cells[:limit]) + more


def _count(n: object, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def review_summary(payload: Mapping[str, Any], width: int = SUMMARY_WIDTH, *, reason: str = "") -> str:
    """One line naming a review item's most useful payload fields (its `reason` says why): the
    table's page, header and recognised fields, the rows concerned, the columns not understood,
    the relation or sentence, ... Unknown kinds list their scalar fields; a part the `reason`
    already says is left out. At most `width` characters."""
    p = dict(payload)
    parts: list[str] = []
    if p.get("page") is not None:
        parts.append(f"page {p['page']}")
    if p.get("number"):
        parts.append(f"record {_short(p['number'])}")
    if p.get("header"):
        parts.append(f"header: {_names(p['header'])}")
    if "fields" in p:
        parts.append(f"recognised: {', '.join(map(str, p['fields'] or [])) or 'nothing'}")
    if p.get("columns"):
        parts.append(f"columns: {_names(p['columns'])}")
    if p.get("lacking"):
        parts.append(f"records lack: {', '.join(map(str, p['lacking']))}")
    if isinstance(p.get("rows"), int):
        parts.append(_count(p["rows"], "data row", "data rows"))
    if p.get("row_numbers"):
        numbers = [str(n) for n in p["row_numbers"]]
        shown = ", ".join(numbers[:8]) + (f", … ({len(numbers)} rows)" if len(numbers) > 8 else "")
        parts.append(f"{'row' if len(numbers) == 1 else 'rows'} {shown}")
    if p.get("rows_omitted"):
        parts.append(f"{p['rows_omitted']} more rows not kept")
    if p.get("relation"):
        parts.append(f"{p.get('source_type')} {_short(p.get('source'))!r} -{p['relation']}-> "
                     f"{p.get('target_type')} {_short(p.get('target'))!r}")
    if p.get("entity_type") and p.get("name"):
        parts.append(f"{p['entity_type']} {_short(p['name'])!r} {p.get('field')}: "
                     f"{_short(p.get('existing'))} vs {_short(p.get('new'))}")
    if p.get("mention"):
        parts.append(f"mention {_short(p['mention'])!r}")
    text = p.get("sentence") or p.get("context")
    if text:
        parts.append(f"in {_short(text, 60)!r}")
    if not parts:  # a kind not known here: its scalar fields
        parts = [f"{k}: {_short(v)}" for k, v in p.items()
                 if k != "kind" and v not in (None, "", []) and not isinstance(v, (dict, list))]
    return _short("; ".join(part for part in parts if part not in reason), width)
