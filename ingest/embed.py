"""Stage `embed`: one normalised vector per chunk, from the configured embedding model.

Guarantees:
- Pure apart from the `Embedder` (and the optional `EmbeddingCache`) it is given; vectors come
  back in chunk order; the embedder must be the model the version's configuration names (model,
  revision, dimension, normalisation), otherwise the stage refuses rather than mixing
  incompatible vectors.
- `handle_batch` embeds several documents with ONE encode call over the texts not in the cache,
  sorted by length (so a forward pass pads little). With a cache, a text's vector is whatever the
  cache stores for (tenant, configuration, sha256 of the exact text): the first vector ever
  computed for it, reused bit for bit by every replay, re-ingest and update, so the float32
  noise of batching (about 1e-7 with different batch neighbours) never changes a checksum, and
  an unchanged chunk is never re-encoded. Without a cache every text is encoded.
- Per-document outcomes: a document whose configuration does not match is returned as its own
  `EmbeddingMismatch`; the others are embedded.
"""

from __future__ import annotations

from prometheus_client import Counter

from manifold.shared.artifacts import ChunkedDocument, EmbeddedDocument
from manifold.shared.embedding import Embedder
from manifold.shared.ids import sha256_text
from manifold.shared.ports import EmbeddingCache

ENCODED = Counter("manifold_embed_encoded_total", "Chunk texts encoded by the model (cache misses)")
CACHED = Counter("manifold_embed_cache_hits_total", "Chunk vectors taken from the embedding cache")


class EmbeddingMismatch(RuntimeError):
    """The embedder is not the model this version's configuration was fingerprinted with."""


def config_key(embedder: Embedder) -> str:
    """The embedding configuration a cached vector belongs to."""
    i = embedder.info
    return f"{i.model}@{i.revision}/dim={i.dim}/normalized={i.normalized}"


def check(chunked: ChunkedDocument, embedder: Embedder) -> None:
    v, info = chunked.versions, embedder.info
    expected = (v.embedding_model, v.embedding_revision, v.embedding_dim, v.embedding_normalized)
    actual = (info.model, info.revision, info.dim, info.normalized)
    if expected != actual:
        raise EmbeddingMismatch(f"configuration names embedding {expected}, embedder is {actual}")


def _embedded(chunked: ChunkedDocument, vectors: list[list[float]], dim: int) -> EmbeddedDocument:
    if len(vectors) != len(chunked.chunks) or any(len(vec) != dim for vec in vectors):
        raise EmbeddingMismatch("embedder returned the wrong number or size of vectors")
    return EmbeddedDocument(
        doc=chunked.doc,
        versions=chunked.versions,
        elements=chunked.elements,
        sections=chunked.sections,
        chunks=chunked.chunks,
        vectors=vectors,
    )


def handle(chunked: ChunkedDocument, embedder: Embedder, cache: EmbeddingCache | None = None) -> EmbeddedDocument:
    """Embed one document (see `handle_batch`); raises instead of returning an outcome."""
    [outcome] = handle_batch([chunked], embedder, cache)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def handle_batch(docs: list[ChunkedDocument], embedder: Embedder,
                 cache: EmbeddingCache | None = None) -> list[EmbeddedDocument | Exception]:
    """Embed `docs` with at most one encode call; one outcome per document, in order."""
    outcomes: list[EmbeddedDocument | Exception | None] = [None] * len(docs)
    ok: list[int] = []
    for i, chunked in enumerate(docs):
        try:
            check(chunked, embedder)
            ok.append(i)
        except EmbeddingMismatch as err:
            outcomes[i] = err
    config = config_key(embedder)
    # (tenant, sha256) -> text, for every chunk of the accepted documents (duplicates once)
    wanted: dict[tuple[str, str], str] = {}
    for i in ok:
        tenant = docs[i].doc.tenant_id
        for chunk in docs[i].chunks:
            wanted.setdefault((tenant, sha256_text(chunk.text)), chunk.text)
    known: dict[tuple[str, str], list[float]] = {}
    tenants = sorted({t for t, _ in wanted})
    if cache is not None:
        for tenant in tenants:
            hashes = [h for t, h in wanted if t == tenant]
            known.update({(tenant, h): v for h, v in cache.lookup(tenant, config, hashes).items()})
    missing = sorted((k for k in wanted if k not in known), key=lambda k: (len(wanted[k]), k))
    if missing:
        fresh = embedder.encode([wanted[k] for k in missing])
        if len(fresh) != len(missing):
            raise EmbeddingMismatch("embedder returned the wrong number of vectors")
        computed = dict(zip(missing, fresh, strict=True))
        if cache is not None:  # what the cache stores wins (an earlier writer's vector, if any)
            for tenant in tenants:
                mine = {h: v for (t, h), v in computed.items() if t == tenant}
                if mine:
                    stored = cache.fill(tenant, config, mine)
                    computed.update({(tenant, h): v for h, v in stored.items()})
        known.update(computed)
    ENCODED.inc(len(missing))
    CACHED.inc(sum(len(docs[i].chunks) for i in ok) - len(missing))
    for i in ok:
        tenant = docs[i].doc.tenant_id
        try:
            outcomes[i] = _embedded(docs[i], [known[(tenant, sha256_text(c.text))] for c in docs[i].chunks],
                                    embedder.info.dim)
        except EmbeddingMismatch as err:
            outcomes[i] = err
    return outcomes  # type: ignore[return-value]  # no None left: every index set above
