"""Named embedding configurations and the embedders that realise them.

A configuration is (model, revision, dimension, normalisation, document template, query
template). `primary` is the one every document version is fingerprinted with: its vectors live in
`chunks.embedding` and are part of the version's checksummed artifacts. Any other configuration is
a *parallel* representation (table `chunk_vectors`), built by an embedding migration
(`ingest/embedding_migration.py`) and never part of a version's fingerprint, so adding one does
not change a single existing document id.

Guarantees: `CONFIGS` is the one registry; `ConfigEmbedders` builds every configuration's document
and query embedder over ONE shared base `Embedder` and refuses (`UnknownEmbeddingConfig`,
`EmbeddingConfigMismatch`) a name it does not know or a base model that is not the one the
configuration names, instead of producing vectors that would silently mix with another model's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from manifold.shared.embedding import MODEL_DIM, MODEL_NAME, Embedder, bundled_model_info

PRIMARY = "primary"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_NAME = re.compile(NAME_PATTERN)


class UnknownEmbeddingConfig(ValueError):
    """No configuration of that name is registered in this code."""


class EmbeddingConfigMismatch(RuntimeError):
    """The base embedder (or the stored definition) is not the model this configuration names."""


@dataclass(frozen=True)
class EmbeddingConfig:
    """One way to turn chunks and queries into vectors.

    `template` renders a chunk for embedding from `{text}` and `{title}` (its section title);
    `query_template` renders a query from `{query}`.
    """

    name: str
    model: str
    revision: str
    dim: int
    normalized: bool
    template: str
    query_template: str
    description: str = ""

    def render_chunk(self, text: str, title: str) -> str:
        return self.template.format(text=text, title=title).strip()

    def render_query(self, query: str) -> str:
        return self.query_template.format(query=query)

    def definition(self) -> dict[str, object]:
        """What the database records for the name (a stored definition must match it exactly)."""
        return {"model": self.model, "revision": self.revision, "dim": self.dim,
                "normalized": self.normalized, "template": self.template,
                "query_template": self.query_template}


def _bundled(name: str, template: str, description: str) -> EmbeddingConfig:
    info = bundled_model_info()
    return EmbeddingConfig(name=name, model=info.model, revision=info.revision, dim=info.dim,
                           normalized=info.normalized, template=template, query_template="{query}",
                           description=description)


def registry() -> dict[str, EmbeddingConfig]:
    """Every configuration this code can build, by name (reads the installed model's version)."""
    configs = (
        _bundled(PRIMARY, "{text}", "bundled MiniLM over the chunk text (chunks.embedding)"),
        _bundled("minilm-titled", "{title}\n{text}",
                 "bundled MiniLM over the section title, a newline, then the chunk text"),
    )
    for c in configs:
        assert _NAME.match(c.name) and c.model == MODEL_NAME and c.dim == MODEL_DIM
    return {c.name: c for c in configs}


def get(name: str) -> EmbeddingConfig:
    configs = registry()
    if name not in configs:
        raise UnknownEmbeddingConfig(f"unknown embedding configuration {name!r}; known: {', '.join(configs)}")
    return configs[name]


class ConfigEmbedders:
    """Document and query embedding for every registered configuration over one base embedder
    (the model is loaded once, by the base embedder's `warm_up`)."""

    def __init__(self, base: Embedder) -> None:
        self.base = base
        self._configs = registry()

    def config(self, name: str) -> EmbeddingConfig:
        cfg = self._configs.get(name)
        if cfg is None:
            raise UnknownEmbeddingConfig(f"unknown embedding configuration {name!r}")
        info = self.base.info
        if (info.model, info.revision, info.dim, info.normalized) != (cfg.model, cfg.revision, cfg.dim,
                                                                      cfg.normalized):
            raise EmbeddingConfigMismatch(
                f"configuration {name!r} needs {cfg.model} {cfg.revision}, "
                f"the embedder is {info.model} {info.revision}")
        return cfg

    def encode_chunks(self, name: str, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        """One vector per (chunk text, section title), same order."""
        cfg = self.config(name)
        vectors = self.base.encode([cfg.render_chunk(text, title) for text, title in items])
        if len(vectors) != len(items) or any(len(v) != cfg.dim for v in vectors):
            raise EmbeddingConfigMismatch("embedder returned the wrong number or size of vectors")
        return vectors

    def encode_query(self, name: str, query: str) -> list[float]:
        cfg = self.config(name)
        return self.base.encode([cfg.render_query(query)])[0]
