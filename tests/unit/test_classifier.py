"""The intent classifier, trained with the real bundled MiniLM embedder (CPU, offline).

Floors are set below what was measured (see the numbers next to each floor); the labelled file
is template-built, so the line split is optimistic and the hand-written out-of-template set below
is the honest check.
"""

from __future__ import annotations

import hashlib

import pytest

from manifold.query.classifier import BASE_INTENTS, IntentClassifier, load_labelled, train_default
from manifold.query.types import IntentType

# Measured with C=4 on a 3:1 line split (every 4th line held out): exact_lookup 1.00,
# lexical 0.90, semantic 0.99, aggregate 0.98, relationship 0.98.
SPLIT_FLOORS: dict[IntentType, float] = {
    "exact_lookup": 0.93, "lexical": 0.80, "semantic": 0.90, "aggregate": 0.90, "relationship": 0.90,
}

OUT_OF_TEMPLATE: list[tuple[str, set[str]]] = [
    ("Bring up invoice INV-2026-0099 for me", {"exact_lookup"}),
    ("I'm looking for PO-7044", {"exact_lookup"}),
    ("Can you open CTR-2025-0003?", {"exact_lookup"}),
    ("Any reference to \"torque settings\" in the manuals?", {"lexical"}),
    ("Which texts use the wording 'pressure drop test'?", {"lexical"}),
    ("Why must power be isolated before maintenance?", {"semantic"}),
    ("What's our approach to handling defective deliveries?", {"semantic"}),
    ("Give me the gist of the warranty conditions", {"semantic"}),
    ("How much have we paid Omega Valves so far this year?", {"aggregate", "relationship"}),
    ("What's the combined value of all orders in February?", {"aggregate"}),
    ("Number of credit notes issued in 2025", {"aggregate"}),
    ("Grand total of invoices last month", {"aggregate"}),
    ("Who are the vendors for humidity sensors?", {"relationship"}),
    ("Is Delta Controls allowed to sell to Contoso?", {"relationship"}),
    ("Which items fall under the Cabling group?", {"relationship"}),
    ("What does Supplier Gamma deliver to Fabrikam?", {"relationship"}),
    ("Which vendor does PRD-409 come from?", {"exact_lookup", "relationship"}),
    ("Price of PRD-402 on 1 February 2026", {"exact_lookup", "aggregate"}),
    ("Explain the returns clause in CTR-2026-0005", {"exact_lookup", "semantic"}),
    ("How much did Company A spend with its approved vendors on Valves in Q2?",
     {"aggregate", "relationship"}),
]
# Measured micro-F1 on OUT_OF_TEMPLATE with the model trained on the whole file: 1.00.
OOT_MICRO_F1_FLOOR = 0.85


@pytest.fixture(scope="session")
def embedder():
    from manifold.shared.embedding import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    model.warm_up()
    return model


def _f1(truth: list[bool], predicted: list[bool]) -> float:
    tp = sum(t and p for t, p in zip(truth, predicted, strict=True))
    fp = sum(p and not t for t, p in zip(truth, predicted, strict=True))
    fn = sum(t and not p for t, p in zip(truth, predicted, strict=True))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def test_held_out_f1_per_intent_is_above_the_measured_floor(embedder) -> None:
    rows = load_labelled()
    assert len(rows) >= 300
    train = [r for i, r in enumerate(rows) if i % 4]
    test = [r for i, r in enumerate(rows) if not i % 4]
    model = IntentClassifier(embedder).fit([q for q, _ in train], [labels for _, labels in train])
    predictions = model.predict_many([q for q, _ in test])
    for intent in BASE_INTENTS:
        f1 = _f1([intent in labels for _, labels in test], [p[intent] >= 0.5 for p in predictions])
        assert f1 >= SPLIT_FLOORS[intent], (intent, f1)


def test_out_of_template_questions(embedder) -> None:
    model = train_default(embedder)
    predictions = model.predict_many([q for q, _ in OUT_OF_TEMPLATE])
    tp = fp = fn = 0
    for (_, labels), probs in zip(OUT_OF_TEMPLATE, predictions, strict=True):
        predicted = {i for i, p in probs.items() if p >= 0.5}
        tp += len(predicted & labels)
        fp += len(predicted - labels)
        fn += len(labels - predicted)
    micro = 2 * tp / (2 * tp + fp + fn)
    assert micro >= OOT_MICRO_F1_FLOOR, micro


class FakeEmbedder:
    """Deterministic bag-of-hashed-words vectors; counts calls."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in text.lower().split():
                vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            out.append(vec)
        return out


TINY = [
    ("find invoice INV-1", ["exact_lookup"]), ("show PO-7002", ["exact_lookup"]),
    ("total spend last quarter", ["aggregate"]), ("how much revenue", ["aggregate"]),
    ("which suppliers supply valves", ["relationship"]), ("who supplies cable", ["relationship"]),
    ("explain the warranty policy", ["semantic"]), ("why are deliveries late", ["semantic"]),
    ("documents mentioning \"torque\"", ["lexical"]), ("exact phrase calibration bench", ["lexical"]),
    ("total spend with suppliers of valves", ["aggregate", "relationship"]),
]


def test_fake_embedder_training_is_deterministic_and_complete() -> None:
    texts, labels = [t for t, _ in TINY], [ls for _, ls in TINY]
    first = IntentClassifier(FakeEmbedder()).fit(texts, labels).predict_many(texts)
    second = IntentClassifier(FakeEmbedder()).fit(texts, labels).predict_many(texts)
    assert first == second
    for probs in first:
        assert set(probs) == set(BASE_INTENTS)
        assert all(0.0 <= p <= 1.0 for p in probs.values())
    assert first[2]["aggregate"] > first[2]["lexical"]


def test_constant_labels_unknown_labels_and_unfitted() -> None:
    fake = FakeEmbedder()
    model = IntentClassifier(fake)
    assert fake.calls == 0  # nothing is embedded before fit/predict
    with pytest.raises(RuntimeError):
        model.predict("total spend")
    with pytest.raises(ValueError):
        model.fit(["a"], [["not_an_intent"]])
    model.fit(["total spend", "how much"], [["aggregate"], ["aggregate", "mixed"]])
    assert model.predict("anything") == {"exact_lookup": 0.0, "lexical": 0.0, "semantic": 0.0,
                                         "aggregate": 1.0, "relationship": 0.0}
