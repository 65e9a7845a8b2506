"""Embedding migration: backfill a parallel configuration, verify it, switch to it atomically.

DESIGN §3.4: a new embedding configuration never mixes with the old one. Its vectors go to the
parallel table `chunk_vectors` (keyed by tenant, chunk, configuration) while queries keep reading
the active configuration; once every chunk has a verified vector the tenant's active
configuration is switched in one PostgreSQL transaction. Queries read the active configuration
in the same transaction as their search (`query/executors/vector.py`), so one query uses one
configuration.

Handlers (plain functions over the ports they are given):
- `write_live_configs(doc, store, embedders)` — called by the load step after a version's
  artifacts are written and before its LoadNotice leaves: embeds the version's chunks for every
  live parallel configuration of the tenant. Idempotent (upserts), so replays are safe. The
  version's config fingerprint is NOT affected: parallel vectors are not part of the version's
  artifacts or checksums (a configuration is added without re-identifying any document).
- `backfill(...)` — resumable, idempotent: embeds, in id order and in batches, each chunk of a
  non-retired version lacking a current vector, and upserts it.
- `verify(...)` — per tenant counts and an order-independent checksum; marks `verified` only
  if every tenant asked about passes.
- `activate(...)` / `retire(...)` — see `PostgresEmbeddingStore`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from manifold.shared.artifacts import ExtractedDocument
from manifold.shared.embedding_configs import PRIMARY, ConfigEmbedders, UnknownEmbeddingConfig
from manifold.shared.stores.embedding_pg import ChunkToEmbed, PostgresEmbeddingStore, VectorRow, Verification

log = logging.getLogger(__name__)


class ParallelVectorStore(Protocol):
    """The narrow port the load step needs: which configurations are live, and an idempotent
    upsert of their vectors."""

    def live_configs(self, tenant_id: str) -> list[str]: ...

    def upsert_vectors(self, tenant_id: str, config: str, rows: Sequence[VectorRow]) -> None: ...


def write_live_configs(doc: ExtractedDocument, store: ParallelVectorStore, embedders: ConfigEmbedders) -> list[str]:
    """Embed and store `doc`'s chunks for each live parallel configuration of its tenant;
    returns the configurations written. A configuration this code does not know is skipped
    with a warning (its verification will then fail, so it can never be activated stale)."""
    ref = doc.doc
    titles = {s.section_id: s.title for s in doc.sections}
    written = []
    for name in store.live_configs(ref.tenant_id):
        try:
            vectors = embedders.encode_chunks(name, [(c.text, titles.get(c.section_id, "")) for c in doc.chunks])
        except UnknownEmbeddingConfig:
            log.warning("embedding configuration %r is live for %s but unknown to this code", name, ref.tenant_id)
            continue
        store.upsert_vectors(ref.tenant_id, name, [
            VectorRow(c.chunk_id, ref.document_id, ref.version, c.content_sha256, v)
            for c, v in zip(doc.chunks, vectors, strict=True)])
        written.append(name)
    return written


def backfill(store: PostgresEmbeddingStore, embedders: ConfigEmbedders, config: str, tenant_id: str, *,
             batch_size: int = 64, progress: Callable[[int], object] | None = None,
             on_total: Callable[[int], object] | None = None) -> int:
    """Give every chunk of the tenant's non-retired versions a current vector for `config`;
    returns how many were embedded. Safe to interrupt and rerun (it resumes where vectors are
    missing) and to run while ingestion writes the same configuration."""
    embedders.config(config)  # unknown name or wrong model: refuse before touching anything
    if config == PRIMARY:
        return 0  # primary vectors are written with each version and verified by the publisher
    store.register(tenant_id, embedders.config(config))
    state = store.begin_backfill(tenant_id, config)
    total = store.count_missing(tenant_id, config)
    if on_total is not None:
        on_total(total)
    if total and state == "verified":
        store.mark(tenant_id, config, "backfilling", only_from=("verified",))
    done, after = 0, ""
    while True:
        batch: list[ChunkToEmbed] = store.missing_chunks(tenant_id, config, after=after, limit=batch_size)
        if not batch:
            return done
        vectors = embedders.encode_chunks(config, [(c.text, c.title) for c in batch])
        store.upsert_vectors(tenant_id, config, [
            VectorRow(c.chunk_id, c.document_id, c.version, c.content_sha256, v)
            for c, v in zip(batch, vectors, strict=True)])
        done += len(batch)
        after = batch[-1].chunk_id
        if progress is not None:
            progress(len(batch))


def verify(store: PostgresEmbeddingStore, embedders: ConfigEmbedders, config: str,
           tenant_ids: Sequence[str]) -> tuple[bool, list[Verification]]:
    """Verify `config` for every tenant; mark it verified for all of them only if all pass."""
    cfg = embedders.config(config)
    reports = [store.verify(t, cfg) for t in tenant_ids]
    ok = all(r.ok for r in reports)
    if ok and config != PRIMARY:
        store.mark_verified(reports)
    return ok, reports


def activate(store: PostgresEmbeddingStore, embedders: ConfigEmbedders, config: str,
             tenant_ids: Sequence[str]) -> dict[str, Verification]:
    """Switch every tenant to `config` in one transaction (raises `ActivationRefused`)."""
    return store.activate(list(tenant_ids), embedders.config(config))


def retire(store: PostgresEmbeddingStore, config: str, tenant_ids: Sequence[str]) -> dict[str, int]:
    """Retire `config` per tenant and delete its vectors; returns vectors deleted per tenant."""
    return {t: store.retire(t, config) for t in tenant_ids}
