"""A lightweight multi-label intent classifier over sentence embeddings.

Guarantees:
- **One-vs-rest logistic regression**, one binary model per base intent (`BASE_INTENTS`:
  exact_lookup, lexical, semantic, aggregate, relationship). `mixed` is never learned: the router
  derives it from the base intents.
- **Deterministic.** Same embedder, texts and labels → same probabilities (fixed
  `random_state`, deterministic `lbfgs` solver).
- **Nothing at import time.** scikit-learn and numpy are imported inside `fit`/`predict`; the
  embedder is injected and only called by `fit`, `predict` and `predict_many`.
- `predict` returns a probability in [0, 1] for every base intent, always all five keys. An
  intent that had only one label value in training (never or always present) gets that constant.
- `train_default(embedder)` trains on the packaged `data/router_labelled.jsonl` (seconds on CPU).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, get_args

from manifold.query.types import IntentType

BASE_INTENTS: tuple[IntentType, ...] = ("exact_lookup", "lexical", "semantic", "aggregate",
                                        "relationship")
LABELLED_FILE = "router_labelled.jsonl"


class TextEncoder(Protocol):
    """Anything that embeds texts: one vector per text, same order (e.g. `shared.embedding`)."""

    def encode(self, texts: list[str]) -> list[list[float]]: ...


class IntentClassifier:
    """Multi-label intent probabilities for a question; see the module guarantees."""

    def __init__(self, embedder: TextEncoder, *, c: float = 4.0, random_state: int = 0) -> None:
        self.embedder = embedder
        self.c = c
        self.random_state = random_state
        self._models: dict[IntentType, Any] = {}
        self._constants: dict[IntentType, float] = {}

    @property
    def fitted(self) -> bool:
        return bool(self._models or self._constants)

    def fit(self, texts: Sequence[str], label_sets: Sequence[Iterable[str]]) -> IntentClassifier:
        """Train on `texts` with their intent label sets; returns self. Unknown labels are an
        error; `mixed` is accepted and ignored."""
        import numpy as np
        from sklearn.linear_model import LogisticRegression

        if len(texts) != len(label_sets) or not texts:
            raise ValueError("fit needs as many label sets as texts, and at least one text")
        labels = [_checked_labels(s) for s in label_sets]
        x = np.asarray(self.embedder.encode(list(texts)), dtype=float)
        self._models, self._constants = {}, {}
        for intent in BASE_INTENTS:
            y = np.asarray([intent in s for s in labels], dtype=int)
            if y.min() == y.max():
                self._constants[intent] = float(y[0])
                continue
            model = LogisticRegression(C=self.c, max_iter=2000, random_state=self.random_state)
            self._models[intent] = model.fit(x, y)
        return self

    def predict(self, text: str) -> dict[IntentType, float]:
        """Probability of each base intent for `text`."""
        return self.predict_many([text])[0]

    def predict_many(self, texts: Sequence[str]) -> list[dict[IntentType, float]]:
        """`predict` for each text, in order, with one embedding call."""
        import numpy as np

        if not self.fitted:
            raise RuntimeError("IntentClassifier.predict called before fit")
        if not texts:
            return []
        x = np.asarray(self.embedder.encode(list(texts)), dtype=float)
        columns: dict[IntentType, list[float]] = {}
        for intent in BASE_INTENTS:
            if intent in self._models:
                columns[intent] = [float(p) for p in self._models[intent].predict_proba(x)[:, 1]]
            else:
                columns[intent] = [self._constants[intent]] * len(texts)
        return [{intent: columns[intent][i] for intent in BASE_INTENTS} for i in range(len(texts))]


def _checked_labels(labels: Iterable[str]) -> frozenset[str]:
    known = set(get_args(IntentType))
    found = frozenset(labels)
    unknown = found - known
    if unknown:
        raise ValueError(f"unknown intent labels: {sorted(unknown)}")
    return found


def labelled_path() -> Path:
    """Where the packaged labelled questions live."""
    try:
        from importlib.resources import files

        candidate = Path(str(files("manifold.query") / "data" / LABELLED_FILE))
        if candidate.is_file():
            return candidate
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).parent / "data" / LABELLED_FILE


def load_labelled(path: Path | None = None) -> list[tuple[str, tuple[IntentType, ...]]]:
    """The labelled questions as (question, intents) pairs, in file order."""
    rows = []
    for line_no, line in enumerate((path or labelled_path()).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        labels = _checked_labels(row["intents"])
        if not labels:
            raise ValueError(f"line {line_no}: no intents")
        rows.append((str(row["question"]), cast(tuple[IntentType, ...], tuple(sorted(labels)))))
    return rows


def train_default(embedder: TextEncoder, *, fit_encoder: TextEncoder | None = None) -> IntentClassifier:
    """A classifier trained on every packaged labelled question. `fit_encoder` (default: the
    embedder) embeds the training set only — e.g. an on-disk cache of the same model's vectors;
    questions are always embedded live by `embedder`."""
    rows = load_labelled()
    model = IntentClassifier(fit_encoder or embedder).fit([q for q, _ in rows], [labels for _, labels in rows])
    model.embedder = embedder
    return model


__all__ = ["BASE_INTENTS", "IntentClassifier", "TextEncoder", "labelled_path", "load_labelled",
           "train_default"]
