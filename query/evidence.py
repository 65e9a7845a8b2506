"""From store rows to checked, citable evidence: shared by the text executors.

Guarantees:
- `hit_from_es` / `hit_from_row` build a `TextHit` from an Elasticsearch `_source` or a
  `serving_chunks` row; nothing else about the row leaks into the hit.
- `final_check(conn, tenant_id, items)` is the active-version check every executor runs last:
  it reads the manifest through the caller's (query-role, tenant-scoped) transaction with
  `active_versions` and keeps only items whose (document_id, version) is active *now*
  (`check_hits_active`), returning how many it dropped.
- `chunk_evidence` / `record_evidence` turn one kept hit or record row into one `Evidence`
  carrying its tenant, document and version (so later checks can run on it); claim values are
  strings or ints, never floats of money.
- `StoreClock` accumulates the wall time spent inside store calls only (`StepResult.store_ms`).
- `pg_timeout_ms` is the statement timeout every PostgreSQL read sets locally.
- `es_errors()` maps Elasticsearch connection failures, timeouts and 408/429/5xx to `Transient`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

import psycopg
from elasticsearch import ApiError, TransportError

from manifold.query.types import Evidence, HitSource, TextHit
from manifold.shared.config import QuerySettings
from manifold.shared.errors import Transient
from manifold.shared.stores.serving import active_versions, check_hits_active

T = TypeVar("T")
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}

RECORD_CLAIMS = ("number", "record_type", "counterparty", "issued_on", "currency", "status")


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


class StoreClock:
    """Sums the time spent inside `with clock:` blocks (the store calls), in milliseconds."""

    def __init__(self) -> None:
        self.ms = 0.0
        self._start = 0.0

    def __enter__(self) -> StoreClock:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ms += (time.perf_counter() - self._start) * 1000.0


@contextmanager
def es_errors(what: str = "elasticsearch") -> Iterator[None]:
    """Unreachable server, timeout or a retryable status -> `Transient` with a clear message."""
    try:
        yield
    except ApiError as exc:
        if exc.meta.status in _RETRYABLE_STATUS:
            raise Transient(f"{what} answered {exc.meta.status}: {exc.message}") from exc
        raise
    except TransportError as exc:
        raise Transient(f"{what} unreachable or timed out: {type(exc).__name__}: {exc}") from exc


def pg_timeout_ms(timeout_s: float, settings: QuerySettings) -> int:
    """The local statement timeout: the step's budget, never above `statement_timeout_ms`."""
    return max(10, min(int(timeout_s * 1000), settings.statement_timeout_ms))


def require_list(value: Sequence[str] | str | None, name: str) -> list[str] | None:
    """Step references are resolved by the engine before executors run; a str here is a bug."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{name} is an unresolved reference {value!r}; the engine must resolve it first")
    return list(value)


def hit_from_es(source: Mapping[str, Any], *, source_kind: HitSource, rank: int,
                score: float | None, identity: bool = False,
                identifiers: Sequence[str] | None = None) -> TextHit:
    return TextHit(
        chunk_id=source["chunk_id"], document_id=source["document_id"], version=int(source["version"]),
        section_id=source["section_id"], section_title=source.get("section_title") or "",
        ordinal=int(source.get("ordinal") or 0), text=source["text"],
        content_sha256=source["content_sha256"],
        identifiers=tuple(identifiers if identifiers is not None else source.get("identifiers") or ()),
        source=source_kind, rank=rank, score=score, identity=identity,
    )


CHUNK_COLUMNS = ("c.chunk_id, c.document_id, c.version, c.section_id, coalesce(s.title, ''), c.ordinal, "
                 "c.text, c.content_sha256, c.identifiers")
"""Columns `hit_from_row` expects, from `serving_chunks c LEFT JOIN serving_sections s`."""


def hit_from_row(row: Sequence[Any], *, source_kind: HitSource, rank: int, score: float | None,
                 identity: bool = False, identifiers: Sequence[str] | None = None) -> TextHit:
    chunk_id, document_id, version, section_id, title, ordinal, text, sha, ids = row[:9]
    return TextHit(
        chunk_id=chunk_id, document_id=document_id, version=int(version), section_id=section_id,
        section_title=title or "", ordinal=int(ordinal), text=text, content_sha256=str(sha).strip(),
        identifiers=tuple(identifiers if identifiers is not None else ids or ()),
        source=source_kind, rank=rank, score=score, identity=identity,
    )


def final_check(conn: psycopg.Connection[Any], tenant_id: str, items: Iterable[T]) -> tuple[list[T], int]:
    """Keep the items whose (document_id, version) is the tenant's active version right now."""
    items = list(items)
    if not items:
        return [], 0
    doc_ids = sorted({doc for i in items if (doc := _doc(i)) is not None})
    active = active_versions(conn, tenant_id, doc_ids)
    kept = check_hits_active(items, active)
    return kept, len(items) - len(kept)


def _doc(item: Any) -> str | None:
    if isinstance(item, Mapping):
        return item.get("document_id")
    return getattr(item, "document_id", None)


def chunk_evidence(hit: TextHit, *, tenant_id: str, store: str, retrieved_at: datetime,
                   routes: Sequence[str] | None = None, claims: Mapping[str, Any] | None = None) -> Evidence:
    """One citable chunk. `routes` defaults to the hit's branch."""
    base: dict[str, Any] = {"section_title": hit.section_title, "identity": hit.identity}
    if hit.identifiers:
        base["identifiers"] = list(hit.identifiers)
    if hit.score is not None:
        base["score"] = round(float(hit.score), 6)
    base.update(claims or {})
    return Evidence(
        evidence_id=f"chunk:{hit.chunk_id}", store=store, kind="chunk", tenant_id=tenant_id,  # type: ignore[arg-type]  # store: validated
        document_id=hit.document_id, version=hit.version, chunk_id=hit.chunk_id, text=hit.text,
        claims=base, retrieved_at=retrieved_at, rank=hit.rank,
        routes=tuple(routes) if routes is not None else (hit.source,),
    )


def record_evidence(row: Mapping[str, Any], *, tenant_id: str, retrieved_at: datetime, rank: int) -> Evidence:
    """One record row (invoice, credit note, order, catalog item) found by its number."""
    issued, currency = row.get("issued_on"), row.get("currency")
    claims = {
        "number": row["number"], "record_type": row["record_type"],
        "counterparty": row.get("counterparty_name"),
        "issued_on": issued.isoformat() if issued is not None else None,
        "currency": currency.strip() if currency else None,
        "status": row.get("status"),
    }
    return Evidence(
        evidence_id=f"record:{row['record_id']}", store="postgres", kind="record", tenant_id=tenant_id,
        document_id=row["document_id"], version=int(row["version"]), record_id=row["record_id"],
        chunk_id=row.get("chunk_id"), claims=claims, retrieved_at=retrieved_at, rank=rank, routes=("exact",),
    )


def unique(values: Iterable[str]) -> tuple[str, ...]:
    """Values in first-seen order without repeats."""
    return tuple(dict.fromkeys(values))
