"""The embedded profile's cache of the router training set's embeddings (query/composition.py)."""

from __future__ import annotations

from manifold.query.composition import _CachedEncoder


class CountingEncoder:
    info = "fake-model@1"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(len(t)), 1.0] for t in texts]


def test_a_second_process_reads_the_cached_vectors(tmp_path) -> None:
    live = CountingEncoder()
    first = _CachedEncoder(live, tmp_path).encode(["a", "bb"])
    second = _CachedEncoder(live, tmp_path).encode(["a", "bb"])
    assert first == second == [[1.0, 1.0], [2.0, 1.0]]
    assert live.calls == 1


def test_other_texts_or_another_model_miss_the_cache(tmp_path) -> None:
    live = CountingEncoder()
    _CachedEncoder(live, tmp_path).encode(["a"])
    _CachedEncoder(live, tmp_path).encode(["a", "c"])
    other = CountingEncoder()
    other.info = "fake-model@2"
    _CachedEncoder(other, tmp_path).encode(["a"])
    assert (live.calls, other.calls) == (2, 1)
