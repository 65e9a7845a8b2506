"""Stage `embed`: one normalised vector per chunk, from the configured embedding model.

Guarantees: pure apart from the `Embedder` it is given; vectors come back in chunk order; the
embedder must be the model the version's configuration names (model, revision, dimension,
normalisation), otherwise the stage refuses rather than mixing incompatible vectors.
"""

from __future__ import annotations

from manifold.shared.artifacts import ChunkedDocument, EmbeddedDocument
from manifold.shared.embedding import Embedder


class EmbeddingMismatch(RuntimeError):
    """The embedder is not the model this version's configuration was fingerprinted with."""


def handle(chunked: ChunkedDocument, embedder: Embedder) -> EmbeddedDocument:
    v, info = chunked.versions, embedder.info
    expected = (v.embedding_model, v.embedding_revision, v.embedding_dim, v.embedding_normalized)
    actual = (info.model, info.revision, info.dim, info.normalized)
    if expected != actual:
        raise EmbeddingMismatch(f"configuration names embedding {expected}, embedder is {actual}")
    vectors = embedder.encode([chunk.text for chunk in chunked.chunks])
    if len(vectors) != len(chunked.chunks) or any(len(vec) != info.dim for vec in vectors):
        raise EmbeddingMismatch("embedder returned the wrong number or size of vectors")
    return EmbeddedDocument(
        doc=chunked.doc,
        versions=chunked.versions,
        elements=chunked.elements,
        sections=chunked.sections,
        chunks=chunked.chunks,
        vectors=vectors,
    )
