"""Bounded memory for unstructured's spaCy model in a long-running parse worker.

unstructured decides whether a short paragraph is a title or narrative text with one
process-wide spaCy pipeline (`unstructured.nlp.tokenize`), whose vocabulary and string store keep
every word the process has ever seen. A worker that parses for weeks therefore grows with the
vocabulary of everything it parsed (10,000 lines of new words: +40 MiB and on; flat with resets:
`bench/nlp_memory_growth.py`, `bench/results/nlp_memory_growth.json`). After each parsed
document, `after_document` drops the model together with unstructured's memoised results once
its vocabulary holds more than `VOCABULARY_LIMIT` words, so the next classification loads a
fresh copy (~0.4 s here): a corpus full of identifiers resets often, plain prose rarely.

Guarantees:
- Same output: the model is reloaded from the same installed package and its analysis of a text
  does not depend on what it saw before (no learned state), so a reset changes no element.
- Thread-safe: one check or reset runs at a time; a classification running concurrently keeps
  its own reference to the old model until it returns.
- If unstructured's internals change (the memoised functions are not there), nothing is reset
  and nothing fails.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

VOCABULARY_LIMIT = 20_000
"""Lexemes the model may hold before it is released (~10 MiB of growth; a fresh model holds
under 1,000 and the corpus's new words add the rest)."""

_MEMOISED = ("_get_nlp", "_process_cached", "word_tokenize", "pos_tag", "_tokenize_for_cache")
"""unstructured.nlp.tokenize's lru-cached functions: the model and the results derived from it."""

_lock = threading.Lock()


def after_document() -> bool:
    """After one parsed document: release the model if its vocabulary passed `VOCABULARY_LIMIT`;
    True when this call did."""
    import sys

    module: Any = sys.modules.get("unstructured.nlp.tokenize")
    loader = getattr(module, "_get_nlp", None)
    info = getattr(loader, "cache_info", None)
    if module is None or info is None or info().currsize == 0:  # no model loaded: nothing grew
        return False
    with _lock:
        if len(loader().vocab) <= VOCABULARY_LIMIT:  # type: ignore[misc]  # the memoised model
            return False
        return reset()


def reset() -> bool:
    """Drop unstructured's spaCy model and memoised results, if it has loaded them; True when done."""
    import sys

    module: Any = sys.modules.get("unstructured.nlp.tokenize")
    if module is None:  # never loaded: nothing to release
        return False
    caches = [getattr(module, name, None) for name in _MEMOISED]
    if not all(callable(getattr(c, "cache_clear", None)) for c in caches):
        log.debug("unstructured.nlp.tokenize has no memoised model to release; leaving it")
        return False
    for cache in caches:
        cache.cache_clear()  # type: ignore[union-attr]  # checked above
    return True
