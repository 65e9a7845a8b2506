"""Elasticsearch adapter: `ElasticsearchTextIndex`, one document per chunk.

Index `manifold-chunks-v2` (`ES_INDEX`, schema `ES_SCHEMA_VERSION`), reachable through the alias
`manifold-chunks` so a new version can be backfilled in parallel and switched atomically
(`switch_alias`). The mapping is strict (an unknown field is an error, not a silently added one):

- `text_terms` and `title_terms`: the BM25 fields, pre-analysed in Python
  (`manifold.shared.analysis.analyzed`: tokens, lowercase, stop words, Snowball English stems,
  version `ANALYSIS_VERSION`) and indexed with the built-in `whitespace` analyzer, so this index
  and the PostgreSQL text index hold the same terms; `title_terms` is the analysed
  `heading_text` (document title + the chunk's section path);
- `text`: analyzer `manifold_english` (unstemmed), with `text.std` (standard analyzer) for exact
  wording;
- keywords, never analysed: `tenant_id`, `document_id`, `doc_version` ("<document_id>@<version>"),
  `chunk_id`, `section_id`, `section_title` (+ `section_title.text`, `manifold_english`), `section_path`,
  `identifiers` (normalised business ids, exact match, no normalizer), `kind`,
  `content_sha256`, `doc_content_sha256`, `media_type`, pipeline versions and fingerprint;
- integers `version`, `ordinal`.

`manifold_english` = standard tokenizer + lowercase + English stop words (identifiers and exact
matches use it: never stemmed). Stemming is done in Python because every Elasticsearch stemmer
lives in the `analysis-common` module, which the Maven-published distribution the local stack runs
does not contain; this keeps the index identical in every environment. A change of analysis is a
new index version (parallel backfill, then an alias switch), never an in-place change.

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

from elasticsearch import ApiError, Elasticsearch, TransportError

from manifold.shared import analysis
from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput, Transient
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb

ES_SCHEMA_VERSION = "2"
"""2: the pre-analysed `text_terms`/`title_terms` fields (`analysis.ANALYSIS_VERSION`)."""
ES_INDEX = f"manifold-chunks-v{ES_SCHEMA_VERSION}"
ES_ALIAS = "manifold-chunks"

_KEYWORD = {"type": "keyword"}
_TERMS = {"type": "text", "analyzer": "whitespace"}
_TEXT = "manifold_english"
ES_SETTINGS: dict[str, Any] = {
    "number_of_shards": 1,
    "analysis": {
        "filter": {"manifold_english_stop": {"type": "stop", "stopwords": "_english_"}},
        "analyzer": {
            _TEXT: {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "manifold_english_stop"]},
        },
    },
}
ES_MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "tenant_id": _KEYWORD,
        "document_id": _KEYWORD,
        "version": {"type": "integer"},
        "doc_version": _KEYWORD,
        "chunk_id": _KEYWORD,
        "section_id": _KEYWORD,
        "section_title": {"type": "keyword", "fields": {"text": {"type": "text", "analyzer": _TEXT}}},
        "section_path": _KEYWORD,
        "ordinal": {"type": "integer"},
        "kind": _KEYWORD,
        "text": {"type": "text", "analyzer": _TEXT, "fields": {"std": {"type": "text", "analyzer": "standard"}}},
        "text_terms": _TERMS,
        "title_terms": _TERMS,
        "analysis_version": _KEYWORD,
        "identifiers": _KEYWORD,
        "content_sha256": _KEYWORD,
        "doc_content_sha256": _KEYWORD,
        "media_type": _KEYWORD,
        "parser_version": _KEYWORD,
        "chunker_version": _KEYWORD,
        "extraction_version": _KEYWORD,
        "es_schema_version": _KEYWORD,
        "config_fingerprint": _KEYWORD,
        "serving": {"type": "boolean"},
    },
}
SERVING_FIELD = {"serving": {"type": "boolean"}}
"""Added by put_mapping to an index created before the publisher existed (the mapping is strict)."""
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
_BULK_BATCH = 500


def _version_filter(tenant_id: str, document_id: str, version: int) -> list[dict[str, Any]]:
    return [
        {"term": {"tenant_id": tenant_id}},
        {"term": {"document_id": document_id}},
        {"term": {"version": version}},
    ]


class ElasticsearchTextIndex:
    """`TextIndex` on Elasticsearch 8 (see the module docstring for mapping and guarantees)."""

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
                    with _transient():
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
        serving the previous index until `switch_alias` (after the rebuild, README)."""
        with _transient():
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
        with _transient():
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
        with _transient():
            self._es.indices.update_aliases(actions=actions)
        return previous

    # ------------------------------------------------------------------ write

    def _source(self, doc: ExtractedDocument) -> list[tuple[str, dict[str, Any]]]:
        """(`_id`, source) of every chunk document of `doc`'s version."""
        ref, v = doc.doc, doc.versions
        titles = {s.section_id: s for s in doc.sections}
        doc_title = ref.metadata.get("title")
        headings = {s.section_id: analysis.analyzed(analysis.heading_text(
            doc_title if isinstance(doc_title, str) else None, s.path)) for s in doc.sections}
        fp = v.fingerprint()
        out: list[tuple[str, dict[str, Any]]] = []
        for c in doc.chunks:
            section = titles[c.section_id]
            out.append((f"{ref.tenant_id}/{c.chunk_id}", {
                "tenant_id": ref.tenant_id, "document_id": ref.document_id, "version": ref.version,
                "doc_version": _doc_version(ref.document_id, ref.version), "chunk_id": c.chunk_id,
                "section_id": c.section_id, "section_title": section.title, "section_path": list(section.path),
                "ordinal": c.ordinal, "kind": c.kind, "text": c.text, "identifiers": list(c.identifiers),
                "text_terms": analysis.analyzed(c.text), "title_terms": headings[c.section_id],
                "analysis_version": analysis.ANALYSIS_VERSION,
                "content_sha256": c.content_sha256, "doc_content_sha256": ref.content_sha256,
                "media_type": ref.media_type, "parser_version": v.parser, "chunker_version": v.chunker,
                "extraction_version": v.extraction, "es_schema_version": v.es_schema, "config_fingerprint": fp,
            }))
        return out

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
                sources = self._source(doc)
            except Exception as err:  # noqa: BLE001 - this document's own outcome
                outcomes[i] = err
                continue
            for _id, source in sources:
                ops += [{"index": {"_index": self._index, "_id": _id}}, source]
                owner.append(i)
                chunk_ids.append(source["chunk_id"])
        with _transient():
            for start in range(0, len(owner), _BULK_BATCH):
                result = self._es.bulk(operations=ops[2 * start:2 * (start + _BULK_BATCH)], refresh=False)
                if not result.get("errors"):
                    continue
                for n, item in enumerate(result["items"]):
                    answer = item.get("index", {})
                    i = owner[start + n]
                    if "error" in answer and outcomes[i] is None:
                        outcomes[i] = _item_error(chunk_ids[start + n], answer)
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
        with _transient():
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
        with _transient():
            stored = self._stored(tenant_id, keys)
        return {k: _chunk_manifest(*stored[k]) for k in keys}

    def _stored(self, tenant_id: str, keys: Sequence[tuple[str, int]]
                ) -> dict[tuple[str, int], tuple[int, list[tuple[str, str]]]]:
        """(count, [(chunk id, content hash)]) per key: ONE search (paged with `search_after`
        beyond `page_size` hits), confined to the tenant. The count comes from the aggregation,
        the pairs from the documents read, so a disagreement between them stays visible."""
        names = {_doc_version(d, v): (d, v) for d, v in set(keys)}
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
        return {k: (counts.get(_doc_version(*k), 0), pairs) for k, (_, pairs) in out.items()}

    def _bulk_by_ids(self, ids: Sequence[str], action: str, doc: dict[str, Any] | None = None, *,
                     refresh: bool | None = None) -> None:
        """Apply `action` ("delete", or "update" with the partial `doc`) to each `_id`, in `_bulk`
        requests of `_BULK_BATCH` ids. `refresh=None`: each request refreshes, except inside
        `batch`, where the block's one refresh covers it; `True`/`False` force it. An id that is
        absent (404) is fine; any other failed item raises (`_raise_bulk_errors`)."""
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
                    _raise_bulk_errors({"items": [{"index": f} for f in failures]})

    # ------------------------------------------------------------------ serving marks (publisher)

    def _ensure_serving(self) -> None:
        self._ensure()
        if getattr(self, "_serving_ready", False):
            return
        with _transient():
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
        wanted = sorted({_doc_version(d, v) for d, v in keys})
        query = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}, {"terms": {"doc_version": wanted}}]}}
        with _transient():
            ids = [hit["_id"] for hit in self._scan(query, source=False)]
            self._bulk_by_ids(ids, "update", {"serving": serving})

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        """(document, version) -> (documents, documents with serving=true), via a composite
        aggregation (paged, so any number of versions)."""
        self._ensure_serving()
        out: dict[tuple[str, int], tuple[int, int]] = {}
        after: dict[str, Any] | None = None
        with _transient():
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

    def delete_tenant(self, tenant_id: str) -> dict[str, int]:
        """Delete every document of the tenant from every manifold index (this one and any other
        `manifold-*` index, e.g. a new schema version being backfilled); returns the count per
        index. Idempotent."""
        mf.check_tenant(tenant_id)
        query = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}}
        removed: dict[str, int] = {}
        with _transient():
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
        with _transient():
            res = self._es.search(index=self._index, size=0,
                                  aggs={"t": {"terms": {"field": "tenant_id", "size": 10000}}})
        return {b["key"] for b in res["aggregations"]["t"]["buckets"]}


@contextmanager
def _transient() -> Iterator[None]:
    try:
        yield
    except ApiError as exc:
        if exc.meta.status in _RETRYABLE_STATUS:
            raise Transient(f"elasticsearch answered {exc.meta.status}: {exc.message}") from exc
        raise
    except TransportError as exc:  # connection refused, timeouts, TLS: the server is unreachable
        raise Transient(f"elasticsearch unreachable: {type(exc).__name__}: {exc}") from exc


def _doc_version(document_id: str, version: int) -> str:
    """The `doc_version` keyword: unambiguous, as the version (an integer) follows the last '@'."""
    return f"{document_id}@{version}"


def _chunk_manifest(count: int, pairs: list[tuple[str, str]]) -> StoreManifest:
    built = mf.build_manifest("elasticsearch", mf.ELASTICSEARCH_KINDS, {"chunks": pairs})
    # `count` comes from the aggregation, the checksum (which folds in its own count) from the
    # documents read: a disagreement between them stays visible to the verifier.
    return built.model_copy(update={"counts": {"chunks": count}})


def _item_error(chunk_id: str, answer: dict[str, Any]) -> Exception:
    """One rejected bulk item as its document's outcome (never the whole batch's)."""
    error = answer.get("error") or {}
    if isinstance(error, dict):
        reason = f"{error.get('type', 'error')}: {str(error.get('reason', ''))[:160]}"
        cause = error.get("caused_by")
        if isinstance(cause, dict):  # e.g. "immense term" under a parsing failure
            reason += f"; caused by {cause.get('type', 'error')}: {str(cause.get('reason', ''))[:160]}"
    else:
        reason = str(error)[:320]
    message = f"elasticsearch refused chunk {chunk_id} (status {answer.get('status')}): {reason}"
    if answer.get("status") in _RETRYABLE_STATUS:
        return Transient(message)
    return BadInput(message)


def _raise_bulk_errors(result: dict[str, Any]) -> None:
    failures = [item["index"] for item in result["items"] if "error" in item.get("index", {})]
    if any(f.get("status") in _RETRYABLE_STATUS for f in failures):
        raise Transient(f"elasticsearch bulk: {len(failures)} items rejected, first: {failures[0].get('error')}")
    raise RuntimeError(f"elasticsearch bulk: {len(failures)} items failed, first: {failures[0].get('error')}")
