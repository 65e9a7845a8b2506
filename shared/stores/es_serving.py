"""Serving marks on the Elasticsearch chunk index: the `ServingMarks` port, as a mixin of
`ElasticsearchTextIndex` (the publisher flips them; the reconciler reads their drift).

Guarantees (in addition to `manifold.shared.ports.ServingMarks`):
- Every search and update is confined to the tenant with a `term` filter on `tenant_id`.
- `set_serving_many` is idempotent: one paged search for the versions' chunk ids, bulk updates by
  id with `refresh=true`; inside `ElasticsearchTextIndex.batch`, no refresh per request and ONE
  when the block ends, so the marks are searchable before `batch` returns.
- The `serving` field is added to an index created before it existed (`put_mapping`) on first
  use; connection failures, timeouts and 429/5xx answers raise `Transient`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from elasticsearch import Elasticsearch

from manifold.shared.stores import manifest as mf
from manifold.shared.stores.es_errors import transient
from manifold.shared.stores.es_mapping import SERVING_FIELD, doc_version


class ElasticsearchServingMarks:
    """The serving-mark methods of `ElasticsearchTextIndex`, which provides the client, the
    index and the primitives declared here (paged scan, bulk by ids)."""

    _es: Elasticsearch
    _index: str
    _serving_ready = False

    def _ensure(self) -> None:
        raise NotImplementedError

    def _scan(self, query: dict[str, Any], source: list[str] | bool) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def _bulk_by_ids(self, ids: Sequence[str], action: str, doc: dict[str, Any] | None = None, *,
                     refresh: bool | None = None) -> None:
        raise NotImplementedError

    def _ensure_serving(self) -> None:
        self._ensure()
        if self._serving_ready:
            return
        with transient():
            self._es.indices.put_mapping(index=self._index, properties=SERVING_FIELD)
        self._serving_ready = True

    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None:
        """`set_serving_many` for one version."""
        self.set_serving_many(tenant_id, [(document_id, version)], serving)

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        """Set `serving` on every chunk of these versions: one paged search for their ids (a
        `terms` filter on `doc_version` under the tenant filter), bulk updates by id with
        `refresh=true`; inside `batch`, no refresh per request and ONE when the block ends.
        Idempotent. A later `write_version` of a version replaces its documents and drops the
        mark, so the publisher re-marks after every load notice and the reconciler repairs it."""
        mf.check_tenant(tenant_id)
        if not keys:
            return
        self._ensure_serving()
        wanted = sorted({doc_version(d, v) for d, v in keys})
        query = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"terms": {"doc_version": wanted}}]}}
        with transient():
            ids = [hit["_id"] for hit in self._scan(query, source=False)]
            self._bulk_by_ids(ids, "update", {"serving": serving})

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        """(document, version) -> (documents, documents with serving=true), via a composite
        aggregation (paged, so any number of versions)."""
        self._ensure_serving()
        out: dict[tuple[str, int], tuple[int, int]] = {}
        after: dict[str, Any] | None = None
        with transient():
            while True:
                composite: dict[str, Any] = {"size": 1000, "sources": [
                    {"d": {"terms": {"field": "document_id"}}}, {"v": {"terms": {"field": "version"}}}]}
                if after:
                    composite["after"] = after
                res = self._es.search(
                    index=self._index, size=0, query={"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}},
                    aggs={"pv": {"composite": composite,
                                 "aggs": {"on": {"filter": {"term": {"serving": True}}}}}},
                )["aggregations"]["pv"]
                for b in res["buckets"]:
                    out[(b["key"]["d"], int(b["key"]["v"]))] = (b["doc_count"], b["on"]["doc_count"])
                after = res.get("after_key")
                if not res["buckets"] or after is None:
                    return out

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return set(self._per_version(tenant_id))

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return mf.serving_drift(self._per_version(tenant_id), active)
