"""Cross-document embedding with the cache (`ingest.embed.handle_batch`), against a fake model
and an in-memory cache: one encode call per batch, length-sorted, cached vectors reused bit for
bit, unchanged chunks never re-encoded, per-document outcomes."""

from __future__ import annotations

import hashlib

import pytest
from factories import pipeline_versions

from manifold.ingest import chunk, embed
from manifold.shared.artifacts import DocRef, Element, ParsedDocument
from manifold.shared.embedding import EmbeddingInfo

pytestmark = pytest.mark.unit


class FakeModel:
    """Vectors depend on the text AND on the call (like float noise from batch neighbours)."""

    def __init__(self) -> None:
        self.info = EmbeddingInfo(model="test-model", revision="r1", dim=384, normalized=True)
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        noise = len(self.calls) * 1e-7
        return [[(hashlib.sha256(t.encode()).digest()[i % 32] / 255.0) + noise for i in range(384)] for t in texts]


class MemoryCache:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], list[float]] = {}

    def lookup(self, tenant_id, config, hashes):
        return {h: self.rows[(tenant_id, config, h)] for h in hashes if (tenant_id, config, h) in self.rows}

    def fill(self, tenant_id, config, vectors):
        for h, v in vectors.items():
            self.rows.setdefault((tenant_id, config, h), v)
        return {h: self.rows[(tenant_id, config, h)] for h in vectors}

    def sweep(self, tenant_id, grace_s):
        return 0


def _doc(name: str, paragraphs: list[str], tenant: str = "acme", **versions):
    content = "\n\n".join(paragraphs).encode()
    ref = DocRef(tenant_id=tenant, document_id=name, version=1, content_sha256=hashlib.sha256(content).hexdigest(),
                 media_type="text/plain", metadata={})
    elements = [Element(index=i, kind="NarrativeText", text=p) for i, p in enumerate(paragraphs)]
    return chunk.handle(ParsedDocument(doc=ref, versions=pipeline_versions(**versions), elements=elements))


def test_one_encode_call_for_the_whole_batch_sorted_by_length() -> None:
    model = FakeModel()
    docs = [_doc("a", ["x" * 900]), _doc("b", ["short text"]), _doc("c", ["medium " * 20])]
    out = embed.handle_batch(docs, model, MemoryCache())
    assert len(model.calls) == 1
    lengths = [len(t) for t in model.calls[0]]
    assert lengths == sorted(lengths) and len(lengths) == sum(len(d.chunks) for d in docs)
    assert [o.doc.document_id for o in out] == ["a", "b", "c"]
    assert all(len(o.vectors) == len(d.chunks) for o, d in zip(out, docs, strict=True))


def test_a_replay_reuses_the_cached_vectors_bit_for_bit_and_encodes_nothing() -> None:
    model, cache = FakeModel(), MemoryCache()
    docs = [_doc("a", ["alpha " * 30, "beta " * 40]), _doc("b", ["gamma " * 10])]
    first = embed.handle_batch(docs, model, cache)
    again = embed.handle_batch(list(reversed(docs)), model, cache)  # other neighbours, other order
    assert len(model.calls) == 1
    assert again[1].vectors == first[0].vectors and again[0].vectors == first[1].vectors


def test_an_update_re_encodes_exactly_the_changed_chunks() -> None:
    model, cache = FakeModel(), MemoryCache()
    embed.handle_batch([_doc("a", ["one " * 300, "two " * 300, "three " * 200])], model, cache)
    changed = _doc("a", ["one " * 300, "two " * 300, "three, changed " * 60])
    before = {c.text for c in _doc("a", ["one " * 300, "two " * 300, "three " * 200]).chunks}
    embed.handle_batch([changed], model, cache)
    assert len(model.calls) == 2
    assert set(model.calls[1]) == {c.text for c in changed.chunks} - before


def test_without_a_cache_every_text_is_encoded() -> None:
    model = FakeModel()
    embed.handle_batch([_doc("a", ["same"]), _doc("b", ["same"])], model, None)
    embed.handle_batch([_doc("a", ["same"])], model, None)
    assert [len(c) for c in model.calls] == [1, 1]  # duplicates in one batch are encoded once


def test_a_document_of_another_configuration_is_its_own_outcome() -> None:
    model = FakeModel()
    docs = [_doc("good", ["fine"]), _doc("bad", ["other model"], embedding_model="another-model")]
    good, bad = embed.handle_batch(docs, model, MemoryCache())
    assert good.doc.document_id == "good"
    assert isinstance(bad, embed.EmbeddingMismatch)
    assert model.calls == [[docs[0].chunks[0].text]]


def test_tenants_do_not_share_cache_entries() -> None:
    model, cache = FakeModel(), MemoryCache()
    embed.handle_batch([_doc("a", ["shared text"], tenant="t1")], model, cache)
    embed.handle_batch([_doc("a", ["shared text"], tenant="t2")], model, cache)
    assert len(model.calls) == 2
