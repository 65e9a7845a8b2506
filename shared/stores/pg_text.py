"""PostgreSQL text index (embedded profile): `PostgresTextIndex`, one row per chunk plus postings.

The same port as `ElasticsearchTextIndex` (`TextIndex` + `ServingMarks`), on two tables of
migration 7 (`pg_schema`):

- `text_chunks`: one row per (tenant, chunk) with the same fields as the Elasticsearch document
  (document, version, section id/title/path, ordinal, kind, text, identifiers, hashes, pipeline
  versions, fingerprint), the analysed lengths of the `text` and `title` fields, the
  space-joined unstemmed analysed section title (`section_title_terms`, for phrase matches) and the `serving` mark.
- `text_terms`: postings, one row per (chunk, field, term) with its term frequency `tf`; the
  fields are `text` (chunk text) and `title` (document title + section path), as `text_terms` and
  `title_terms` in Elasticsearch. Each posting also carries its field's length (`field_length`,
  equal to the chunk row's `text_length` / `title_length`) and the chunk's `text_schema_version`,
  written in the same statement as the chunk's other postings, so BM25 scores from postings
  alone (migration 15).

Analysis (`manifold.shared.analysis`, the same module Elasticsearch's fields are fed from): the
`text` and `title` postings hold `analysis.terms` (stop words removed, Snowball English stems,
`ANALYSIS_VERSION`), at write time and at query time; the `title` field is the chunk's
`analysis.heading_text` (document title + section path). `section_title_terms` holds the
UNSTEMMED `analyze` (= `analysis.plain_terms`, Elasticsearch's `manifold_english`) of the section
title, for exact identifier phrases. Each row records `text_schema_version`
(`PG_TEXT_SCHEMA_VERSION`, which names the analysis): the manifest and BM25 see only rows of the
current version, so rows written under another analysis are never scored with this one and the
reconciler reports them as missing and rewrites them (docs/query.md, "Text analysis").

Guarantees (in addition to `manifold.shared.ports`):
- The manifest's `store` is `"elasticsearch"`: the name of the text-index slot the load stage
  and the publisher compare against, so the same handlers verify either adapter; counts and
  checksums equal Elasticsearch's for the same document.
- `write_version` is one transaction (ingest role, tenant set for it): chunks are upserted by
  (tenant, chunk id) only within the same (document, version) and only when a value differs,
  the postings of changed chunks are rewritten, and this version's chunks that `doc` no longer
  has are deleted (postings cascade). A replay rewrites no row. The serving mark of an existing
  chunk is never changed by a write (as in Neo4j; unlike Elasticsearch, whose full-document
  replace drops it).
- Every statement names `tenant_id` explicitly, and row-level security (FORCE) confines it to
  the transaction's tenant besides.
- `set_serving` flips the mark on every chunk of the version in one statement; idempotent.
- `tenants()` (the reconciler's sweep) reads the security-definer function of migration 9.
- Unreachable server or aborted transaction: `Transient`. Nothing connects at construction.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from manifold.shared import analysis
from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb
from manifold.shared.stores.pg_connections import TenantConnections

__all__ = ["ENGLISH_STOP_WORDS", "PG_TEXT_SCHEMA_VERSION", "STORE_SLOT", "PostgresTextIndex", "analyze",
           "sweep_tenants", "title_phrase"]

STORE_SLOT = "elasticsearch"
"""The `StoreManifest.store` this adapter reports: the text-index slot of the load notice."""

PG_TEXT_SCHEMA_VERSION = f"2+{analysis.ANALYSIS_VERSION}"
"""2: stemmed postings and the heading title field; names the analysis the rows were written with."""

ENGLISH_STOP_WORDS = analysis.ENGLISH_STOP_WORDS
MAX_TOKEN_LENGTH = analysis.MAX_TOKEN_LENGTH


def analyze(text: str) -> list[str]:
    """The unstemmed `manifold_english` analysis (`analysis.plain_terms`): exact title phrases."""
    return analysis.plain_terms(text)


def title_phrase(terms: Sequence[str]) -> str:
    """The form stored in `section_title_terms`: terms space-joined with a space on each side, so
    a phrase is a `LIKE '% t1 t2 %'` match."""
    return " " + " ".join(terms) + " " if terms else " "


_T = sql.Identifier
_CHUNK_COLS = (
    "tenant_id", "chunk_id", "document_id", "version", "section_id", "section_title", "section_title_terms",
    "section_path", "ordinal", "kind", "text", "identifiers", "content_sha256", "doc_content_sha256",
    "media_type", "parser_version", "chunker_version", "extraction_version", "text_schema_version",
    "config_fingerprint", "text_length", "title_length",
)
_UPDATED = [c for c in _CHUNK_COLS if c not in ("tenant_id", "chunk_id", "document_id", "version")]
_UPSERT_CHUNK = sql.SQL(
    "INSERT INTO manifold.text_chunks ({cols}) VALUES ({vals}) ON CONFLICT (tenant_id, chunk_id) DO UPDATE "
    "SET {sets} WHERE text_chunks.document_id = EXCLUDED.document_id AND text_chunks.version = EXCLUDED.version "
    "AND ({old}) IS DISTINCT FROM ({new}) RETURNING chunk_id"
).format(
    cols=sql.SQL(", ").join(map(_T, _CHUNK_COLS)),
    vals=sql.SQL(", ").join(sql.Placeholder() * len(_CHUNK_COLS)),
    sets=sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=_T(c)) for c in _UPDATED),
    old=sql.SQL(", ").join(sql.SQL("text_chunks.{c}").format(c=_T(c)) for c in _UPDATED),
    new=sql.SQL(", ").join(sql.SQL("EXCLUDED.{c}").format(c=_T(c)) for c in _UPDATED),
)
_WHERE_VERSION = "tenant_id = %(tenant)s AND document_id = %(document_id)s AND version = %(version)s"
_DROP_STALE = f"DELETE FROM manifold.text_chunks WHERE {_WHERE_VERSION} AND NOT (chunk_id = ANY(%(keep)s))"
_DROP_TERMS = "DELETE FROM manifold.text_terms WHERE tenant_id = %(tenant)s AND chunk_id = ANY(%(ids)s)"
_TERM_ARRAYS = ("chunks", "documents", "versions", "fields", "terms", "tfs", "lengths")
_INSERT_TERMS = ("INSERT INTO manifold.text_terms (tenant_id, chunk_id, document_id, version, field, term, tf, "
                 "field_length, text_schema_version) "
                 "SELECT %(tenant)s, *, %(schema)s FROM unnest(%(chunks)s::text[], %(documents)s::text[], "
                 "%(versions)s::integer[], %(fields)s::text[], %(terms)s::text[], %(tfs)s::integer[], "
                 "%(lengths)s::integer[])")
_DELETE_VERSION = f"DELETE FROM manifold.text_chunks WHERE {_WHERE_VERSION}"
_READ_MANIFEST = (f"SELECT chunk_id, content_sha256 FROM manifold.text_chunks WHERE {_WHERE_VERSION} "
                  "AND text_schema_version = %(schema)s")
_READ_MANIFESTS = ("SELECT document_id, version, chunk_id, content_sha256 FROM manifold.text_chunks "
                   "WHERE tenant_id = %(tenant)s AND (document_id, version) IN "
                   "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[])) "
                   "AND text_schema_version = %(schema)s")
_SET_SERVING = ("UPDATE manifold.text_chunks c SET serving = %(serving)s "
                "FROM unnest(%(documents)s::text[], %(versions)s::integer[]) AS k(document_id, version) "
                "WHERE c.tenant_id = %(tenant)s AND c.document_id = k.document_id AND c.version = k.version "
                "AND c.serving IS DISTINCT FROM %(serving)s")
_PER_VERSION = ("SELECT document_id, version, count(*), count(*) FILTER (WHERE serving) "
                "FROM manifold.text_chunks WHERE tenant_id = %s GROUP BY document_id, version")


class PostgresTextIndex:
    """`TextIndex` + `ServingMarks` on PostgreSQL (see the module docstring).

    `conninfo` must log in as `manifold_ingest`.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every call of this thread for `tenant_id` inside the block in one transaction
        (`TenantConnections.batch`): a batch of `write_version`s commits once."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, **kwargs: Any) -> PostgresTextIndex:
        return cls(settings.postgres.ingest_conninfo(), **kwargs)

    # ------------------------------------------------------------------ write

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        mf.validate(doc)
        with self._db.transaction(doc.doc.tenant_id) as conn:
            return self._write_all(conn, [doc])[0]

    def _write_all(self, conn: psycopg.Connection[Any], docs: Sequence[ExtractedDocument]) -> list[StoreManifest]:
        """Write validated versions of one tenant with a fixed number of statements: the stale
        chunks dropped and the chunks upserted (one pipelined `executemany` each), the postings of
        the chunks that changed replaced by one `DELETE` and one `INSERT ... unnest`, and every
        manifest read back with one query."""
        tenant = docs[0].doc.tenant_id
        rows: list[tuple[Any, ...]] = []
        postings: dict[str, list[tuple[str, str, int, int]]] = {}
        owner: dict[str, tuple[str, int]] = {}
        for doc in docs:
            ref = doc.doc
            sections = {s.section_id: s for s in doc.sections}
            doc_title = ref.metadata.get("title")
            headings = {s.section_id: analysis.terms(analysis.heading_text(
                doc_title if isinstance(doc_title, str) else None, s.path)) for s in doc.sections}
            fp = doc.versions.fingerprint()
            v = doc.versions
            for c in doc.chunks:
                section = sections[c.section_id]
                text_terms, title_terms = analysis.terms(c.text), headings[c.section_id]
                rows.append((
                    ref.tenant_id, c.chunk_id, ref.document_id, ref.version, c.section_id, section.title,
                    title_phrase(analyze(section.title)), list(section.path), c.ordinal, c.kind, c.text,
                    list(c.identifiers),
                    c.content_sha256, ref.content_sha256, ref.media_type, v.parser, v.chunker, v.extraction,
                    PG_TEXT_SCHEMA_VERSION, fp, len(text_terms), len(title_terms),
                ))
                postings[c.chunk_id] = (  # each with its field's length, as the chunk row has it
                    [("text", t, n, len(text_terms)) for t, n in sorted(Counter(text_terms).items())]
                    + [("title", t, n, len(title_terms)) for t, n in sorted(Counter(title_terms).items())]
                )
                owner[c.chunk_id] = (ref.document_id, ref.version)
        changed: list[str] = []
        with conn.cursor() as cur:
            cur.executemany(_DROP_STALE, [
                {"tenant": tenant, "document_id": d.doc.document_id, "version": d.doc.version,
                 "keep": [c.chunk_id for c in d.chunks]} for d in docs
            ])
            if rows:  # RETURNING says which chunks changed, one result set per row
                cur.executemany(_UPSERT_CHUNK, rows, returning=True)
                while True:
                    changed += [r[0] for r in cur.fetchall()]
                    if not cur.nextset():
                        break
            if changed:
                cur.execute(_DROP_TERMS, {"tenant": tenant, "ids": changed})
                terms = [(cid, *owner[cid], *posting) for cid in changed for posting in postings[cid]]
                if terms:
                    cur.execute(_INSERT_TERMS, {"tenant": tenant, "schema": PG_TEXT_SCHEMA_VERSION, **{
                        name: [t[i] for t in terms] for i, name in enumerate(_TERM_ARRAYS)}})
        keys = [(d.doc.document_id, d.doc.version) for d in docs]
        documents, versions = vb.key_arrays(keys)
        pairs: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        for d, ver, cid, sha in conn.execute(_READ_MANIFESTS, {
                "tenant": tenant, "documents": documents, "versions": versions,
                "schema": PG_TEXT_SCHEMA_VERSION}).fetchall():
            pairs[(d, int(ver))].append((cid, str(sha).strip()))
        return [mf.build_manifest(STORE_SLOT, mf.ELASTICSEARCH_KINDS, {"chunks": pairs[k]}) for k in keys]

    # ------------------------------------------------------------------ delete / manifest

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id) as conn:
            conn.execute(_DELETE_VERSION, key)  # postings cascade

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        mf.check_tenant(tenant_id)
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return self._read_manifest(conn, key)

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """Every key's manifest with ONE query (one snapshot)."""
        mf.check_tenant(tenant_id)
        if not keys:
            return {}
        documents, versions = vb.key_arrays(keys)
        pairs: dict[tuple[str, int], list[tuple[str, str]]] = {k: [] for k in keys}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            for d, v, cid, sha in conn.execute(_READ_MANIFESTS, {
                    "tenant": tenant_id, "documents": documents, "versions": versions,
                    "schema": PG_TEXT_SCHEMA_VERSION}).fetchall():
                pairs[(d, int(v))].append((cid, str(sha).strip()))
        return {k: mf.build_manifest(STORE_SLOT, mf.ELASTICSEARCH_KINDS, {"chunks": p}) for k, p in pairs.items()}

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """One transaction for the batch, each version in its own savepoint (`batch`)."""
        tenant = vb.one_tenant(docs)
        if tenant is None:
            return []
        with self.batch(tenant):
            return vb.write_all_or_each(self._db.transaction, self._write_all, self.write_version, docs)

    @staticmethod
    def _read_manifest(conn: psycopg.Connection[Any], key: dict[str, Any]) -> StoreManifest:
        """Only rows analysed with the current `PG_TEXT_SCHEMA_VERSION` count."""
        args = {**key, "schema": PG_TEXT_SCHEMA_VERSION}
        pairs = [(cid, str(sha).strip()) for cid, sha in conn.execute(_READ_MANIFEST, args).fetchall()]
        return mf.build_manifest(STORE_SLOT, mf.ELASTICSEARCH_KINDS, {"chunks": pairs})

    # ------------------------------------------------------------------ serving marks (publisher)

    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None:
        """Set `serving` on every chunk of this version in one statement; idempotent."""
        self.set_serving_many(tenant_id, [(document_id, version)], serving)

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        """`set_serving` for each version in ONE statement; idempotent. One statement matters beyond
        its round trip: the statistics trigger (migration 14) then runs once for the batch and
        upserts each term's row once, where one statement per version rewrote a common term's row
        once per version inside the same transaction (a chain of dead row versions every later
        upsert walked: ~20 ms per version by the end of a batch of 64)."""
        mf.check_tenant(tenant_id)
        if not keys:
            return
        documents, versions = vb.key_arrays(keys)
        with self._db.transaction(tenant_id) as conn:
            conn.execute(_SET_SERVING, {"tenant": tenant_id, "documents": documents, "versions": versions,
                                        "serving": bool(serving)})

    def _per_version(self, tenant_id: str) -> dict[tuple[str, int], tuple[int, int]]:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return {(d, int(v)): (int(n), int(on)) for d, v, n, on in conn.execute(_PER_VERSION, (tenant_id,))}

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return set(self._per_version(tenant_id))

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]:
        mf.check_tenant(tenant_id)
        return mf.serving_drift(self._per_version(tenant_id), active)

    def tenants(self) -> set[str]:
        """Every tenant with a chunk in the index (for the reconciler's sweep), through the
        security-definer `manifold.text_index_tenants()` (row-level security hides the rest)."""
        return sweep_tenants(self._db, "text_index_tenants")


def sweep_tenants(db: TenantConnections, function: str) -> set[str]:
    """Tenants listed by a security-definer sweep function of migration 9 (`text_index_tenants`,
    `graph_tenants`). Runs in a transaction under a placeholder tenant that owns no rows, so
    nothing but the function's answer is visible."""
    query = sql.SQL("SELECT {}()").format(sql.Identifier("manifold", function))
    with db.transaction("manifold-sweep") as conn:
        return {r[0] for r in conn.execute(query).fetchall() if r[0]}
