"""Per-tenant BM25 inverse document frequencies over the shared Elasticsearch chunk index.

The index holds every tenant's chunks. Its BM25 fields store terms scoped to their tenant
(`es_mapping.scoped_terms`), so a term's document frequency `n` is already the tenant's own, but
the document count `N` of IDF's numerator is the whole index's: next to a tenant with 50,000
chunks, every word of a 4,000-chunk tenant looked rare, common words gained weight, and the
everyday evaluation's development half fell from 0.946 to 0.892 found@5 with nothing of its own
changed. `TenantTermWeights.boosts` returns, per field and query term, the boost that turns
Elasticsearch's index-wide IDF into the tenant's:

    boost = idf(n, N_tenant) / idf(n, N_index),   idf(n, N) = ln(1 + (N - n + 0.5) / (n + 0.5))

which is exactly Lucene's BM25 IDF, so a term clause scores `idf(n, N_tenant) × tf-norm`.

Guarantees:
- `n` and `N_index` come from one `termvectors` request on an artificial document (term and field
  statistics; the index has one shard, `es_mapping.ES_SETTINGS`, so they are the index's), made
  only for terms not seen in the last `ttl_s`.
- `N_tenant` per field is the number of the tenant's chunk documents holding the field, every
  version counted as `n` counts them, cached per tenant for `ttl_s`. Every cached figure is at most
  `ttl_s` old: ingestion moves them, and IDF moves slowly with them (a logarithm of a ratio).
  The requests read only counts and the statistics of the asking tenant's own scoped terms,
  never another tenant's documents.
- A term the tenant does not hold (`n = 0`) matches nothing, and gets boost 1.
- Length normalisation still uses the index-wide average length (no per-tenant length is
  stored); within one tenant it scales every chunk alike.
- Errors propagate (`elasticsearch` exceptions) for the caller's `es_errors` to map, except a
  refused statistics request (400: the alias spans two indexes, which `termvectors` does not
  take): then every boost is 1, the index-wide IDF, and a warning is logged.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from elasticsearch import BadRequestError, Elasticsearch

log = logging.getLogger(__name__)

FIELDS = ("text_terms", "title_terms")
_CACHE_LIMIT = 100_000
"""Tenants, and terms, whose counts are kept; past it a cache starts over."""


def idf(n: int, total: int) -> float:
    """Lucene's BM25 IDF for a term held by `n` of `total` documents."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


def boost(n: int, tenant_total: int, index_total: int) -> float:
    """The factor that replaces the index-wide IDF of a term with the tenant's (module docstring)."""
    if n <= 0 or index_total <= 0:
        return 1.0
    return idf(n, max(tenant_total, n)) / idf(n, max(index_total, n))


class TenantTermWeights:
    """Boosts per field and scoped term for one tenant's BM25 query (module docstring)."""

    def __init__(self, es: Elasticsearch, index: str, *, ttl_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._es = es
        self._index = index
        self._ttl_s = ttl_s
        self._clock = clock
        self._counts: dict[str, tuple[float, dict[str, int]]] = {}
        self._freqs: dict[str, tuple[float, dict[str, int]]] = {}
        self._index_totals: tuple[float, dict[str, int]] = (float("-inf"), {})
        self._lock = threading.Lock()

    def boosts(self, tenant_id: str, scoped: Sequence[str], *, deadline: float) -> dict[str, dict[str, float]]:
        """{field: {scoped term: boost}} for the given scoped terms (none: no request). Each request
        gets the time left until `deadline` (on `clock`), so the statistics and the search that
        follows share one budget."""
        if not scoped:
            return {f: {} for f in FIELDS}
        try:
            freqs, index_totals = self._frequencies(scoped, deadline)
        except BadRequestError as exc:
            log.warning("bm25: no term statistics from %s (%s); index-wide IDF for this query", self._index, exc)
            return {f: dict.fromkeys(scoped, 1.0) for f in FIELDS}
        counts = self._tenant_counts(tenant_id, deadline)
        return {f: {t: boost(freqs[t][f], counts[f], index_totals[f]) for t in scoped} for f in FIELDS}

    def _left(self, deadline: float) -> float:
        return max(deadline - self._clock(), 0.05)

    def _frequencies(self, scoped: Sequence[str], deadline: float) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """Each term's document frequency per field, and each field's index-wide document count:
        from the cache when younger than `ttl_s`, else from one `termvectors` request."""
        now = self._clock()
        with self._lock:
            known = {t: v[1] for t in scoped if (v := self._freqs.get(t)) is not None and v[0] > now}
            totals_until, totals = self._index_totals
        missing = sorted(set(scoped) - set(known))
        if not missing and totals_until > now:
            return known, totals
        res = self._es.options(request_timeout=self._left(deadline)).termvectors(
            index=self._index, doc=dict.fromkeys(FIELDS, " ".join(missing or scoped)), fields=list(FIELDS),
            term_statistics=True, field_statistics=True, positions=False, offsets=False, payloads=False)
        vectors: dict[str, Any] = res.get("term_vectors") or {}
        totals = {f: int(((vectors.get(f) or {}).get("field_statistics") or {}).get("doc_count", 0)) for f in FIELDS}
        fetched = {t: {f: int((((vectors.get(f) or {}).get("terms") or {}).get(t) or {}).get("doc_freq", 0))
                       for f in FIELDS} for t in missing}
        with self._lock:
            if len(self._freqs) + len(fetched) > _CACHE_LIMIT:
                self._freqs.clear()
            self._freqs.update({t: (now + self._ttl_s, v) for t, v in fetched.items()})
            self._index_totals = (now + self._ttl_s, totals)
        return known | fetched, totals

    def _tenant_counts(self, tenant_id: str, deadline: float) -> dict[str, int]:
        """The tenant's chunk documents holding each field (cached for `ttl_s`)."""
        now = self._clock()
        with self._lock:
            cached = self._counts.get(tenant_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        res = self._es.options(request_timeout=self._left(deadline)).search(
            index=self._index, size=0, query={"term": {"tenant_id": tenant_id}},
            aggs={f: {"filter": {"exists": {"field": f}}} for f in FIELDS})
        counts = {f: int(res["aggregations"][f]["doc_count"]) for f in FIELDS}
        with self._lock:
            if len(self._counts) >= _CACHE_LIMIT:
                self._counts.clear()
            self._counts[tenant_id] = (now + self._ttl_s, counts)
        return counts
