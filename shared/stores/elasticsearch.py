"""Elasticsearch adapter: `ElasticsearchTextIndex`, one document per chunk.

The index's schema (settings, strict mapping, each chunk's document) is in `es_mapping.py`; the
serving marks the publisher flips are in `es_serving.py` (a mixin of this class); the mapping of
Elasticsearch faults to `Transient` / `BadInput` is in `es_errors.py`.

Guarantees (in addition to `manifold.shared.ports`):
- Document `_id` is `<tenant_id>/<chunk_id>`: a write can only ever replace a document of the
  same tenant, whatever id it carries. `write_versions` indexes a whole batch of versions with
  one `_bulk` request (full replace = idempotent upsert) without refresh, refreshes once, then
  removes these versions' chunks that their `doc` no longer has; when it returns, searches see
  exactly each written `doc`'s chunks for its version. A rejected bulk item fails its own
  document only (`write_version` is the batch of one).
- `manifests` reads a batch of versions with one search (counts from an aggregation on
  `doc_version`, pairs from the hits).
- Every search, count and delete is built here with a `term` filter on `tenant_id`;
  callers cannot omit it.
- Connection failures, timeouts and 429/5xx answers raise `Transient`; the index is created
  idempotently on first use (or by `ensure_index()`), never at construction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from elasticsearch import ApiError, Elasticsearch

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb
from manifold.shared.stores.es_errors import item_error, raise_bulk_errors, transient
from manifold.shared.stores.es_mapping import ES_ALIAS, ES_INDEX, ES_MAPPING, ES_SETTINGS, chunk_sources, doc_version
from manifold.shared.stores.es_serving import ElasticsearchServingMarks

_BULK_BATCH = 500


def _version_filter(tenant_id: str, document_id: str, version: int) -> list[dict[str, Any]]:
    return [
        {"term": {"tenant_id": tenant_id}},
        {"term": {"document_id": document_id}},
        {"term": {"version": version}},
    ]


class ElasticsearchTextIndex(ElasticsearchServingMarks):
    """`TextIndex` and `ServingMarks` on Elasticsearch 8 (guarantees: the module docstring; mapping:
    `es_mapping.py`)."""

    def __init__(self, client: Elasticsearch, *, index: str = ES_INDEX, alias: str | None = ES_ALIAS,
                 replicas: int = 0, page_size: int = 1000) -> None:
        self._es = client
        self._index = index
        self._alias = alias
        self._replicas = replicas
        self._page_size = page_size
        self._ready = False
        self._local = threading.local()  # `batch`: this thread's deferred-refresh state

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, **kwargs: Any) -> ElasticsearchTextIndex:
        return cls(Elasticsearch(settings.elasticsearch.url, request_timeout=30), **kwargs)

    @contextmanager
    def batch(self, tenant_id: str, *, snapshot: bool = False) -> Iterator[None]:
        """`set_serving` calls of this thread inside the block write their marks without a
        refresh each; ONE refresh when the block ends (also when it fails) makes all of them
        searchable before `batch` returns. So a publisher batch pays one refresh, not one per
        version, and its marks are still visible before any activation. Reads are unaffected."""
        mf.check_tenant(tenant_id)
        if getattr(self._local, "deferred", None) is not None:  # nested: the outer block refreshes
            yield
            return
        self._local.deferred = False  # becomes True once a mark is written
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            pending, self._local.deferred = self._local.deferred, None
            if pending:
                try:
                    with transient():
                        self._es.indices.refresh(index=self._index)
                except Transient:
                    if not failed:  # the block's own error wins; marks are idempotent and reconciled
                        raise

    @property
    def alias(self) -> str | None:
        """The serving alias queries read through (None: this adapter serves no alias)."""
        return self._alias

    @property
    def index(self) -> str:
        return self._index

    def ensure_index(self) -> None:
        """Create the index if absent; idempotent and safe to race. The alias is attached at
        creation only when no other index holds it (a fresh deployment); otherwise the alias keeps
        serving the previous index until `switch_alias` (after the rebuild, docs/query.md)."""
        with transient():
            if not self._es.indices.exists(index=self._index):
                taken = bool(self._alias and self._es.indices.exists_alias(name=self._alias))
                try:
                    self._es.indices.create(
                        index=self._index,
                        settings={**ES_SETTINGS, "number_of_replicas": self._replicas},
                        mappings=ES_MAPPING,
                        aliases={self._alias: {}} if self._alias and not taken else None,
                    )
                except ApiError as exc:
                    if exc.meta.status != 400 or "resource_already_exists" not in str(exc):
                        raise
        self._ready = True

    def _ensure(self) -> None:
        if not self._ready:
            self.ensure_index()

    def alias_targets(self) -> set[str]:
        """The indexes the serving alias points at now."""
        if not self._alias:
            return set()
        with transient():
            if not self._es.indices.exists_alias(name=self._alias):
                return set()
            return set(self._es.indices.get_alias(name=self._alias))

    def switch_alias(self) -> set[str]:
        """Point the serving alias at this index only, in one atomic `_aliases` call; returns the
        indexes it was moved away from. Idempotent."""
        self._ensure()
        previous = self.alias_targets() - {self._index}
        actions: list[dict[str, Any]] = [{"add": {"index": self._index, "alias": self._alias}}]
        actions += [{"remove": {"index": old, "alias": self._alias}} for old in sorted(previous)]
        with transient():
            self._es.indices.update_aliases(actions=actions)
        return previous

    # ------------------------------------------------------------------ write

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        outcome = self.write_versions([doc])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """Index every chunk of the batch with ONE `_bulk` request (split only beyond
        `_BULK_BATCH` documents per request), no refresh per request, then one refresh; read all
        manifests back with one (paged) search, remove chunks of these versions that their `doc`
        no longer has, and return one outcome per document.

        An item the bulk request rejects fails ITS document only: 408/429/5xx -> `Transient`, any
        other status (e.g. a term longer than Lucene's limit) -> `BadInput`, naming the chunk and
        the reason; the other documents proceed. Chunks of a failed document that were indexed stay
        non-serving (no `serving` mark; the publisher never sees a notice for it) and are
        replaced by the retry. Unreachable server: `Transient` for the batch."""
        tenant = vb.one_tenant(docs)
        if tenant is None:
            return []
        self._ensure()
        outcomes: list[StoreManifest | Exception | None] = [None] * len(docs)
        ops: list[dict[str, Any]] = []
        owner: list[int] = []  # bulk item -> position of its document in `docs`
        chunk_ids: list[str] = []
        for i, doc in enumerate(docs):
            try:
                mf.validate(doc)
                sources = chunk_sources(doc)
            except Exception as err:  # noqa: BLE001 - this document's own outcome
                outcomes[i] = err
                continue
            for _id, source in sources:
                ops += [{"index": {"_index": self._index, "_id": _id}}, source]
                owner.append(i)
                chunk_ids.append(source["chunk_id"])
        with transient():
            for start in range(0, len(owner), _BULK_BATCH):
                result = self._es.bulk(operations=ops[2 * start:2 * (start + _BULK_BATCH)], refresh=False)
                if not result.get("errors"):
                    continue
                for n, item in enumerate(result["items"]):
                    answer = item.get("index", {})
                    i = owner[start + n]
                    if "error" in answer and outcomes[i] is None:
                        outcomes[i] = item_error(chunk_ids[start + n], answer)
            written = [i for i in range(len(docs)) if outcomes[i] is None]
            if not written:
                return outcomes  # type: ignore[return-value]
            self._es.indices.refresh(index=self._index)
            keys = [(docs[i].doc.document_id, docs[i].doc.version) for i in written]
            stored = self._stored(tenant, keys)
            keep = {(docs[i].doc.document_id, docs[i].doc.version): {c.chunk_id for c in docs[i].chunks}
                    for i in written}
            stale = [f"{tenant}/{cid}" for k in keys for cid, _ in stored[k][1] if cid not in keep[k]]
            if stale:  # chunks these versions had before and `doc` no longer has
                self._bulk_by_ids(stale, "delete", refresh=True)
                stored = self._stored(tenant, keys)
        for i in written:
            outcomes[i] = _chunk_manifest(*stored[(docs[i].doc.document_id, docs[i].doc.version)])
        return outcomes  # type: ignore[return-value]

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        mf.check_tenant(tenant_id)
        self._ensure()
        query = {"bool": {"filter": _version_filter(tenant_id, document_id, version)}}
        with transient():
            self._delete_matching(query)

    def _delete_matching(self, query: dict[str, Any]) -> None:
        """Delete every document matching `query` (which always holds the tenant filter).

        Ids are paged with `search_after` and deleted with bulk requests (`refresh=true`),
        because `_delete_by_query` lives in the `reindex` module, which the Maven-published
        distribution lacks. Not atomic, but idempotent: a crash midway is finished by a retry.
        """
        for _ in range(3):
            ids = [hit["_id"] for hit in self._scan(query, source=False)]
            if not ids:
                return
            self._bulk_by_ids(ids, "delete")
        left = self._es.count(index=self._index, query=query)["count"]
        if left:
            raise Transient(f"elasticsearch: {left} documents still match after delete (concurrent writes)")

    def _scan(self, query: dict[str, Any], source: list[str] | bool) -> Iterator[dict[str, Any]]:
        """Every hit of `query`, one page at a time (`search_after` on `chunk_id`, unique within the
        one tenant's document version every query here is confined to)."""
        after: list[Any] | None = None
        while True:
            page = self._es.search(
                index=self._index, query=query, size=self._page_size, sort=[{"chunk_id": "asc"}],
                source=source,  # type: ignore[arg-type]  # _source takes a field list too; typed bool or mapping
                track_total_hits=False, search_after=after,  # None: the first page (the client omits it)
            )["hits"]["hits"]
            yield from page
            if len(page) < self._page_size:
                return
            after = page[-1]["sort"]

    # ------------------------------------------------------------------ manifest

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        return self.manifests(tenant_id, [(document_id, version)])[(document_id, version)]

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """Every key's manifest with one (paged) search: the hits give the (chunk id, content
        hash) pairs, a `terms` aggregation on `doc_version` the counts."""
        mf.check_tenant(tenant_id)
        if not keys:
            return {}
        self._ensure()
        with transient():
            stored = self._stored(tenant_id, keys)
        return {k: _chunk_manifest(*stored[k]) for k in keys}

    def _stored(self, tenant_id: str, keys: Sequence[tuple[str, int]]
                ) -> dict[tuple[str, int], tuple[int, list[tuple[str, str]]]]:
        """(count, [(chunk id, content hash)]) per key: ONE search (paged with `search_after`
        beyond `page_size` hits), confined to the tenant. The count comes from the aggregation,
        the pairs from the documents read, so a disagreement between them stays visible."""
        names = {doc_version(d, v): (d, v) for d, v in set(keys)}
        out: dict[tuple[str, int], tuple[int, list[tuple[str, str]]]] = {k: (0, []) for k in keys}
        query = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"terms": {"doc_version": sorted(names)}}]}}
        after: list[Any] | None = None
        counts: dict[str, int] = {}
        while True:
            res = self._es.search(
                index=self._index, query=query, size=self._page_size,
                sort=[{"doc_version": "asc"}, {"chunk_id": "asc"}],
                source=["chunk_id", "content_sha256", "doc_version"],  # type: ignore[arg-type]  # a field list is valid; the stub says bool or mapping
                track_total_hits=False,
                **({"search_after": after} if after is not None else
                   {"aggs": {"n": {"terms": {"field": "doc_version", "size": len(names)}}}}),
            )
            if after is None:
                counts = {b["key"]: b["doc_count"] for b in res["aggregations"]["n"]["buckets"]}
            page = res["hits"]["hits"]
            for hit in page:
                src = hit["_source"]
                key = names.get(src["doc_version"])
                if key is not None:
                    out[key][1].append((src["chunk_id"], src["content_sha256"]))
            if len(page) < self._page_size:
                break
            after = page[-1]["sort"]
        return {k: (counts.get(doc_version(*k), 0), pairs) for k, (_, pairs) in out.items()}

    def _bulk_by_ids(self, ids: Sequence[str], action: str, doc: dict[str, Any] | None = None, *,
                     refresh: bool | None = None) -> None:
        """Apply `action` ("delete", or "update" with the partial `doc`) to each `_id`, in `_bulk`
        requests of `_BULK_BATCH` ids. `refresh=None`: each request refreshes, except inside
        `batch`, where the block's one refresh covers it; `True`/`False` force it. An id that is
        absent (404) is fine; any other failed item raises (`raise_bulk_errors`)."""
        deferred = refresh is None and getattr(self._local, "deferred", None) is not None
        now = (not deferred) if refresh is None else refresh
        for start in range(0, len(ids), _BULK_BATCH):
            ops: list[dict[str, Any]] = []
            for i in ids[start:start + _BULK_BATCH]:
                ops.append({action: {"_index": self._index, "_id": i}})
                if doc is not None:
                    ops.append({"doc": doc})
            result = self._es.bulk(operations=ops, refresh=now)
            if deferred:
                self._local.deferred = True
            if result.get("errors"):
                failures = [it[action] for it in result["items"]
                            if "error" in it.get(action, {}) and it[action].get("status") != 404]
                if failures:
                    raise_bulk_errors({"items": [{"index": f} for f in failures]})

    def delete_tenant(self, tenant_id: str) -> dict[str, int]:
        """Delete every document of the tenant from every manifold index (this one and any other
        `manifold-*` index, e.g. a new schema version being backfilled); returns the count per
        index. Idempotent."""
        mf.check_tenant(tenant_id)
        query = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}}
        removed: dict[str, int] = {}
        with transient():
            names = sorted(self._es.indices.get(index="manifold-*", expand_wildcards="open"))
            for name in names:
                other = self if name == self._index else ElasticsearchTextIndex(self._es, index=name, alias=None)
                count = int(self._es.count(index=name, query=query)["count"])
                if count:
                    other._delete_matching(query)
                removed[name] = count
        return removed

    def tenants(self) -> set[str]:
        """Every tenant with a document in the index (for the reconciler's sweep)."""
        self._ensure()
        with transient():
            res = self._es.search(index=self._index, size=0,
                                  aggs={"t": {"terms": {"field": "tenant_id", "size": 10000}}})
        return {b["key"] for b in res["aggregations"]["t"]["buckets"]}


def _chunk_manifest(count: int, pairs: list[tuple[str, str]]) -> StoreManifest:
    built = mf.build_manifest("elasticsearch", mf.ELASTICSEARCH_KINDS, {"chunks": pairs})
    # `count` comes from the aggregation, the checksum (which folds in its own count) from the
    # documents read: a disagreement between them stays visible to the verifier.
    return built.model_copy(update={"counts": {"chunks": count}})

