"""The parse stage's spaCy model is released once its vocabulary passes `VOCABULARY_LIMIT`
(issue 30: a worker that parses for weeks grew with the vocabulary it had seen), and parsing
gives the same elements before and after a release."""

from __future__ import annotations

import sys

import pytest
from factories import pipeline_versions

from manifold.ingest import nlp_memory, parse
from manifold.shared.artifacts import DocRef

pytestmark = pytest.mark.unit

TEXT = b"Quarterly Maintenance Report\n\nPump P-7 was inspected.\n\nSEALS\n\nAll seals were replaced on site."


def _parsed() -> list[tuple[str, str]]:
    doc = DocRef(tenant_id="t", document_id="d", version=1, content_sha256="0" * 64, media_type="text/plain",
                 metadata={})
    return [(e.kind, e.text) for e in parse.handle(doc, TEXT, pipeline_versions()).elements]


def test_the_model_is_released_once_its_vocabulary_passes_the_limit_and_the_elements_stay_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    before = _parsed()  # loads unstructured's spaCy model (the short lines are classified by it)
    tokenize = sys.modules["unstructured.nlp.tokenize"]
    assert tokenize._get_nlp.cache_info().currsize == 1  # noqa: SLF001 - the memoised model
    assert _parsed() == before  # a small vocabulary: kept
    assert tokenize._get_nlp.cache_info().currsize == 1  # noqa: SLF001
    monkeypatch.setattr(nlp_memory, "VOCABULARY_LIMIT", len(tokenize._get_nlp().vocab) - 1)  # noqa: SLF001
    assert _parsed() == before  # past the limit: the model is dropped after this document
    assert tokenize._get_nlp.cache_info().currsize == 0  # noqa: SLF001
    assert tokenize._process_cached.cache_info().currsize == 0  # noqa: SLF001 - its results too
    assert _parsed() == before  # a fresh model, the same elements


def test_a_reset_without_unstructured_loaded_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "unstructured.nlp.tokenize", raising=False)
    assert nlp_memory.reset() is False
