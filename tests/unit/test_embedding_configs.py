"""Embedding configurations and the migration handlers against fakes of their ports (no servers,
no model): templates, the registry's refusals, live writes from the load step, resumable backfill."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from factories import pipeline_versions

from manifold.ingest import embedding_migration as em
from manifold.shared.artifacts import Chunk, DocRef, ExtractedDocument, Section
from manifold.shared.embedding import EmbeddingInfo, bundled_model_info
from manifold.shared.embedding_configs import (
    PRIMARY,
    ConfigEmbedders,
    EmbeddingConfigMismatch,
    UnknownEmbeddingConfig,
    get,
    registry,
)
from manifold.shared.stores.embedding_pg import ChunkToEmbed, VectorRow


class FakeEmbedder:
    """Deterministic 384-d 'embedding' of the text (records what it was asked to embed)."""

    def __init__(self, info: EmbeddingInfo | None = None) -> None:
        self.info = info or bundled_model_info()
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.seen.extend(texts)
        out = []
        for t in texts:
            d = hashlib.sha256(t.encode()).digest()
            out.append([float(d[i % 32]) for i in range(384)])
        return out


class FakeStore:
    def __init__(self, chunks: list[ChunkToEmbed], live: dict[str, list[str]] | None = None) -> None:
        self.chunks = chunks
        self.live = live or {}
        self.vectors: dict[tuple[str, str, str], VectorRow] = {}
        self.state: dict[tuple[str, str], str] = {}
        self.registered: list[str] = []

    def live_configs(self, tenant_id: str) -> list[str]:
        return self.live.get(tenant_id, [])

    def upsert_vectors(self, tenant_id: str, config: str, rows: Sequence[VectorRow]) -> None:
        for r in rows:
            self.vectors[(tenant_id, r.chunk_id, config)] = r

    def register(self, tenant_id: str, config) -> None:  # type: ignore[no-untyped-def]
        self.registered.append(config.name)

    def begin_backfill(self, tenant_id: str, config: str) -> str:
        return self.state.setdefault((tenant_id, config), "backfilling")

    def mark(self, tenant_id: str, config: str, state: str, *, only_from) -> None:  # type: ignore[no-untyped-def]
        if self.state.get((tenant_id, config)) in only_from:
            self.state[(tenant_id, config)] = state

    def _missing(self, tenant_id: str, config: str) -> list[ChunkToEmbed]:
        return [c for c in self.chunks if (tenant_id, c.chunk_id, config) not in self.vectors]

    def count_missing(self, tenant_id: str, config: str) -> int:
        return len(self._missing(tenant_id, config))

    def missing_chunks(self, tenant_id: str, config: str, *, after: str = "", limit: int = 64) -> list[ChunkToEmbed]:
        return sorted((c for c in self._missing(tenant_id, config) if c.chunk_id > after),
                      key=lambda c: c.chunk_id)[:limit]


def _chunk(i: int) -> ChunkToEmbed:
    return ChunkToEmbed(f"c{i:03d}", "doc.md", 1, f"text {i}", f"Title {i % 3}", "a" * 64)


def test_registry_has_primary_and_a_titled_alternative_of_the_bundled_model() -> None:
    configs = registry()
    assert PRIMARY in configs and "minilm-titled" in configs
    info = bundled_model_info()
    for c in configs.values():
        assert (c.model, c.revision, c.dim, c.normalized) == (info.model, info.revision, info.dim, info.normalized)
    assert get(PRIMARY).render_chunk("body", "Heading") == "body"
    assert get("minilm-titled").render_chunk("body", "Heading") == "Heading\nbody"
    assert get("minilm-titled").render_query("q?") == "q?"
    with pytest.raises(UnknownEmbeddingConfig):
        get("nope")


def test_config_embedders_refuse_another_model() -> None:
    other = EmbeddingInfo(model="other", revision="x", dim=384, normalized=True)
    with pytest.raises(EmbeddingConfigMismatch):
        ConfigEmbedders(FakeEmbedder(other)).config("minilm-titled")
    base = FakeEmbedder()
    ConfigEmbedders(base).encode_chunks("minilm-titled", [("body", "Heading")])
    assert base.seen == ["Heading\nbody"]


def _doc() -> ExtractedDocument:
    sha = "b" * 64
    ref = DocRef(tenant_id="t1", document_id="doc.md", version=2, content_sha256=sha, media_type="text/markdown")
    sections = [Section(section_id="s1", ordinal=0, title="Warranty", path=["Warranty"])]
    chunks = [Chunk(chunk_id=f"k{i}", section_id="s1", ordinal=i, kind="text", text=f"body {i}",
                    content_sha256=sha) for i in range(3)]
    return ExtractedDocument(doc=ref, versions=pipeline_versions(), sections=sections, chunks=chunks,
                             vectors=[[1.0] * 384] * 3, entities=[], relations=[], records=[], review=[])


def test_live_writes_cover_every_live_parallel_config_and_are_idempotent() -> None:
    doc = _doc()
    base = FakeEmbedder()
    store = FakeStore([], live={"t1": ["minilm-titled", "retired-unknown"]})
    assert em.write_live_configs(doc, store, ConfigEmbedders(base)) == ["minilm-titled"]
    assert set(store.vectors) == {("t1", f"k{i}", "minilm-titled") for i in range(3)}
    assert base.seen == [f"Warranty\nbody {i}" for i in range(3)]
    first = dict(store.vectors)
    em.write_live_configs(doc, store, ConfigEmbedders(base))
    assert store.vectors == first
    assert all(r.version == 2 and r.document_id == "doc.md" for r in store.vectors.values())
    assert em.write_live_configs(doc, FakeStore([]), ConfigEmbedders(base)) == []  # nothing live


def test_backfill_is_batched_resumable_and_idempotent() -> None:
    store = FakeStore([_chunk(i) for i in range(10)])
    embedders = ConfigEmbedders(FakeEmbedder())
    batches: list[int] = []
    totals: list[int] = []

    class Stop(Exception):
        pass

    def interrupt(n: int) -> None:
        batches.append(n)
        if len(batches) == 2:
            raise Stop

    with pytest.raises(Stop):
        em.backfill(store, embedders, "minilm-titled", "t1", batch_size=3, progress=interrupt)
    assert len(store.vectors) == 6
    assert em.backfill(store, embedders, "minilm-titled", "t1", batch_size=3, on_total=totals.append) == 4
    assert totals == [4] and len(store.vectors) == 10
    assert em.backfill(store, embedders, "minilm-titled", "t1") == 0
    assert store.registered == ["minilm-titled"] * 3
    assert em.backfill(store, embedders, PRIMARY, "t1") == 0  # primary is written with each version
    with pytest.raises(UnknownEmbeddingConfig):
        em.backfill(store, embedders, "nope", "t1")
