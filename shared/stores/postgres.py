"""PostgreSQL + pgvector adapters: `PostgresRelationalStore` and `PostgresStagingStore`.

Both connect as `manifold_ingest` (a role held to row-level security with FORCE) and open one
transaction per call in which the tenant is set with
`SELECT set_config('manifold.tenant_id', %s, true)`; every statement also names the tenant
explicitly. Isolation therefore holds in the data layer even if a statement here were wrong.

Guarantees (in addition to `manifold.shared.ports`):
- `write_version` is one transaction: the version row, sections, chunks with vectors, records
  with lines and review items commit together or not at all. Upserts are keyed by the
  deterministic ids; a replay rewrites no row whose values are unchanged. A new version is
  `staged`; an existing version's `state` is never touched. The same version arriving with a
  different content hash is `BadInput` (versions are immutable).
- `manifest` reads one consistent snapshot (REPEATABLE READ) and rebuilds each hash from the
  stored columns (vectors from the stored float32 values).
- A server that cannot be reached or aborts the transaction (`psycopg.OperationalError`,
  including serialization failures and deadlocks) raises `Transient`.
- Nothing connects until a method is called; each call opens and closes its own connection.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput, Transient
from manifold.shared.ports import StagedItemMissing
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb
from manifold.shared.stores.pg_schema import INGEST_ROLE, SCHEMA

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VERSION_KEY = ("tenant_id", "document_id", "version")


def _table(name: str) -> sql.Identifier:
    return sql.Identifier(SCHEMA, name)


def _upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> sql.Composed:
    """INSERT ... ON CONFLICT (key) DO UPDATE, but only for a row of the same tenant, document and
    version (never re-homes a row) and only when a value actually differs (replays write nothing)."""
    updated = [c for c in columns if c not in key and c not in _VERSION_KEY]
    t = sql.Identifier(table)
    return sql.SQL(
        "INSERT INTO {table} ({cols}) VALUES ({vals}) ON CONFLICT ({key}) DO UPDATE SET {sets} "
        "WHERE {same_version} AND ({old}) IS DISTINCT FROM ({new})"
    ).format(
        table=_table(table),
        cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
        vals=sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        key=sql.SQL(", ").join(map(sql.Identifier, key)),
        sets=sql.SQL(", ").join(
            sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in updated
        ),
        same_version=sql.SQL(" AND ").join(
            sql.SQL("{t}.{c} = EXCLUDED.{c}").format(t=t, c=sql.Identifier(c)) for c in _VERSION_KEY
        ),
        old=sql.SQL(", ").join(sql.SQL("{t}.{c}").format(t=t, c=sql.Identifier(c)) for c in updated),
        new=sql.SQL(", ").join(sql.SQL("EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in updated),
    )


_SECTION_COLS = ("section_id", *_VERSION_KEY, "ordinal", "title", "path", "config_fingerprint")
_CHUNK_COLS = (
    "chunk_id", *_VERSION_KEY, "section_id", "ordinal", "kind", "text", "content_sha256",
    "identifiers", "embedding", "embedding_model", "embedding_revision", "embedding_dim",
    "embedding_normalized", "parser_version", "chunker_version", "extraction_version",
    "pg_schema_version", "es_schema_version", "graph_schema_version", "config_fingerprint",
    "doc_content_sha256",
)
_RECORD_COLS = (
    "record_id", *_VERSION_KEY, "record_type", "number", "counterparty_id", "counterparty_name",
    "issued_on", "currency", "status", "total", "attributes", "chunk_id", "extraction_version",
    "config_fingerprint",
)
_LINE_COLS = (
    "record_id", "line_no", *_VERSION_KEY, "product_code", "description", "quantity",
    "unit_price", "amount",
)
_REVIEW_COLS = (
    "review_id", *_VERSION_KEY, "reason", "payload", "chunk_id", "record_id", "extraction_version",
)

_UPSERT_SECTION = _upsert("sections", _SECTION_COLS, ("section_id",))
_UPSERT_CHUNK = _upsert("chunks", _CHUNK_COLS, ("chunk_id",))
_UPSERT_RECORD = _upsert("records", _RECORD_COLS, ("record_id",))
_UPSERT_LINE = _upsert("record_lines", _LINE_COLS, ("record_id", "line_no"))
_UPSERT_REVIEW = _upsert("review_items", _REVIEW_COLS, ("review_id",))

_WHERE_VERSION = sql.SQL("tenant_id = %(tenant)s AND document_id = %(document_id)s AND version = %(version)s")

_INSERT_DOCUMENT = sql.SQL("INSERT INTO {} (tenant_id, document_id) VALUES (%s, %s) ON CONFLICT DO NOTHING").format(
    _table("documents"))
_LOCK_VERSIONS = sql.SQL(
    "SELECT document_id, version, content_sha256 FROM {} WHERE tenant_id = %(tenant)s AND (document_id, version) IN "
    "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[])) ORDER BY document_id, version FOR UPDATE"
).format(_table("document_versions"))
_UPSERT_VERSION = sql.SQL(
    "INSERT INTO {t} (tenant_id, document_id, version, content_sha256, media_type, metadata, "
    "pipeline_versions, config_fingerprint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, document_id, version) DO UPDATE SET media_type = EXCLUDED.media_type, "
    "metadata = EXCLUDED.metadata, pipeline_versions = EXCLUDED.pipeline_versions, "
    "config_fingerprint = EXCLUDED.config_fingerprint, updated_at = now() "
    "WHERE ({t}.media_type, {t}.metadata, {t}.pipeline_versions, {t}.config_fingerprint) "
    "IS DISTINCT FROM (EXCLUDED.media_type, EXCLUDED.metadata, EXCLUDED.pipeline_versions, "
    "EXCLUDED.config_fingerprint)"
).format(t=_table("document_versions"))


def _kept_ids(doc: ExtractedDocument) -> dict[str, list[str]]:
    """Per version table, the artifact ids this version contains (everything else is dropped)."""
    return {
        "record_lines": [mf.record_line_id(r.record_id, ln.line_no) for r in doc.records for ln in r.lines],
        "records": [r.record_id for r in doc.records],
        "chunks": [c.chunk_id for c in doc.chunks],
        "sections": [s.section_id for s in doc.sections],
        "review_items": [i.review_id for i in doc.review],
    }


# Children before parents, so foreign keys never see an orphan; `id_expr` is the artifact id.
_VERSION_TABLES: tuple[tuple[str, sql.Composable], ...] = (
    ("record_lines", sql.SQL("record_id || '#' || line_no::text")),
    ("records", sql.Identifier("record_id")),
    ("chunks", sql.Identifier("chunk_id")),
    ("sections", sql.Identifier("section_id")),
    ("review_items", sql.Identifier("review_id")),
)


def _as_transient(exc: psycopg.OperationalError) -> Transient:
    return Transient(f"postgres unavailable or transaction aborted: {type(exc).__name__}: {exc}".strip())


class TenantConnections:
    """One transaction per call with the tenant set for its duration, on a connection kept per
    thread (opening one costs a SCRAM handshake). A connection that failed is discarded, so the
    next call reconnects.

    Statements are never prepared server-side (`prepare_threshold=None`), so every execution is
    planned with its actual parameters: with psycopg's default a statement is prepared after 5
    runs and PostgreSQL moves it to a generic plan after 5 more, and for the vector search under
    the active-only policy that plan took ~1 s instead of ~55 ms at 50,000 chunks, from the 11th
    query of every long-lived connection on (bench/query_latency.py). Planning costs ~1 ms."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 10, vectors: bool = False) -> None:
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._vectors = vectors
        self._local = threading.local()

    def _connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(self._conninfo, connect_timeout=self._connect_timeout, autocommit=True,
                                   prepare_threshold=None)
            if self._vectors:
                register_vector(conn)
            self._local.conn = conn
        return conn

    def _discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    @contextmanager
    def batch(self, tenant_id: str, *, snapshot: bool = False) -> Iterator[None]:
        """One transaction (REPEATABLE READ, read-only with `snapshot`) for every `transaction`
        call this thread makes for `tenant_id` inside the block: each call runs in a SAVEPOINT of
        it, so a call that fails rolls back only its own work (its exception propagates to the
        caller, which may go on), and everything that succeeded commits once, at the end of the
        block. A fault of the connection or the final commit raises `Transient` for the batch."""
        mf.check_tenant(tenant_id)
        if getattr(self._local, "batch", None) is not None:
            raise RuntimeError("TenantConnections.batch does not nest")
        try:
            conn = self._tenant_connection(snapshot)
            with conn.transaction():
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant_id,))
                self._local.batch = tenant_id
                try:
                    yield
                finally:
                    self._local.batch = None
        except psycopg.OperationalError as exc:
            self._discard()
            raise _as_transient(exc) from exc

    def _tenant_connection(self, snapshot: bool) -> psycopg.Connection[Any]:
        """This thread's connection, set for a snapshot (read-only REPEATABLE READ) or a write."""
        conn = self._connection()
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if snapshot else None
        conn.read_only = True if snapshot else None
        return conn

    @contextmanager
    def transaction(self, tenant_id: str, *, snapshot: bool = False) -> Iterator[psycopg.Connection[Any]]:
        mf.check_tenant(tenant_id)
        outer = getattr(self._local, "batch", None)
        if outer is not None:  # inside `batch`: a savepoint of the batch's transaction
            if outer != tenant_id:
                raise RuntimeError(f"a batch for tenant {outer!r} cannot run a call for another tenant")
            conn = self._local.conn
            try:
                with conn.transaction():
                    yield conn
            except psycopg.OperationalError as exc:  # the batch fails at its commit, if not before
                raise _as_transient(exc) from exc
            return
        try:
            conn = self._tenant_connection(snapshot)
            with conn.transaction():
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant_id,))
                yield conn
        except psycopg.OperationalError as exc:
            self._discard()
            raise _as_transient(exc) from exc


class PostgresRelationalStore:
    """`RelationalStore` on PostgreSQL + pgvector (schema from `pg_schema.migrate`).

    `conninfo` must log in as `manifold_ingest`; see the module docstring for guarantees.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout, vectors=True)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, *, password: str | None = None) -> PostgresRelationalStore:
        return cls(_ingest_conninfo(settings, password))

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Run every call of this thread for `tenant_id` inside the block in one transaction
        (see `TenantConnections.batch`): a batch of `write_version`s commits once."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    # ------------------------------------------------------------------ write

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        mf.validate(doc)
        with self._db.transaction(doc.doc.tenant_id) as conn:
            return self._write_all(conn, [doc])[0]

    def _write_all(self, conn: psycopg.Connection[Any], docs: Sequence[ExtractedDocument]) -> list[StoreManifest]:
        """Write validated versions of one tenant with a fixed number of statements, whatever
        their count (each `executemany` is one pipelined round trip); `BadInput` if any version
        is already stored with other content (the caller's savepoint discards the whole call)."""
        tenant = docs[0].doc.tenant_id
        keys = [(d.doc.document_id, d.doc.version) for d in docs]
        fps = [d.versions.fingerprint() for d in docs]
        with conn.cursor() as cur:
            cur.executemany(_INSERT_DOCUMENT, [(tenant, d.doc.document_id) for d in docs])
            documents, versions = vb.key_arrays(keys)
            stored = {(d, int(v)): sha for d, v, sha in cur.execute(
                _LOCK_VERSIONS, {"tenant": tenant, "documents": documents, "versions": versions}).fetchall()}
            for d in docs:
                old = stored.get((d.doc.document_id, d.doc.version))
                if old is not None and old != d.doc.content_sha256:
                    raise BadInput(
                        f"{d.doc.document_id}@{d.doc.version} is already stored with content {old[:12]}..., "
                        f"not {d.doc.content_sha256[:12]}...: a version's content is immutable"
                    )
            cur.executemany(_UPSERT_VERSION, [
                (tenant, d.doc.document_id, d.doc.version, d.doc.content_sha256, d.doc.media_type,
                 Jsonb(d.doc.metadata), Jsonb(d.versions.model_dump()), fp) for d, fp in zip(docs, fps, strict=True)
            ])
            kept = [_kept_ids(d) for d in docs]
            for table, id_expr in _VERSION_TABLES:  # drop what each version no longer contains
                cur.executemany(
                    sql.SQL("DELETE FROM {} WHERE {} AND NOT ({} = ANY(%(keep)s))").format(
                        _table(table), _WHERE_VERSION, id_expr),
                    [{"tenant": tenant, "document_id": d.doc.document_id, "version": d.doc.version,
                      "keep": k[table]} for d, k in zip(docs, kept, strict=True)],
                )
        self._upsert_rows(conn, docs, fps)
        manifests = self._read_manifests(conn, tenant, keys)
        return [manifests[k] for k in keys]

    @staticmethod
    def _upsert_rows(conn: psycopg.Connection[Any], docs: Sequence[ExtractedDocument], fps: Sequence[str]) -> None:
        """Every child row of `docs` (fingerprints `fps`): one `executemany` per table."""
        sections, chunks, records, lines, review = [], [], [], [], []
        for doc, fp in zip(docs, fps, strict=True):
            ref, v = doc.doc, doc.versions
            vk = (ref.tenant_id, ref.document_id, ref.version)
            sections += [(s.section_id, *vk, s.ordinal, s.title, list(s.path), fp) for s in doc.sections]
            chunks += [
                (c.chunk_id, *vk, c.section_id, c.ordinal, c.kind, c.text, c.content_sha256,
                 list(c.identifiers), np.asarray(vec, dtype=np.float32), v.embedding_model,
                 v.embedding_revision, v.embedding_dim, v.embedding_normalized, v.parser, v.chunker,
                 v.extraction, v.pg_schema, v.es_schema, v.graph_schema, fp, ref.content_sha256)
                for c, vec in zip(doc.chunks, doc.vectors, strict=True)
            ]
            records += [
                (r.record_id, *vk, r.record_type, r.number, r.counterparty_id, r.counterparty_name,
                 r.issued_on, r.currency, r.status, r.total, Jsonb(r.attributes), r.provenance.chunk_id,
                 r.provenance.extraction_version, fp)
                for r in doc.records
            ]
            lines += [
                (r.record_id, ln.line_no, *vk, ln.product_code, ln.description, ln.quantity,
                 ln.unit_price, ln.amount)
                for r in doc.records for ln in r.lines
            ]
            review += [
                (i.review_id, *vk, i.reason, Jsonb(i.payload), i.provenance.chunk_id,
                 i.provenance.record_id, i.provenance.extraction_version)
                for i in doc.review
            ]
        with conn.cursor() as cur:
            for statement, rows in ((_UPSERT_SECTION, sections), (_UPSERT_CHUNK, chunks), (_UPSERT_RECORD, records),
                                    (_UPSERT_LINE, lines), (_UPSERT_REVIEW, review)):
                if rows:
                    cur.executemany(statement, rows)

    def newest_version(self, tenant_id: str, document_id: str) -> int | None:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            row = conn.execute(
                sql.SQL("SELECT max(version) FROM {} WHERE tenant_id = %s AND document_id = %s")
                .format(_table("document_versions")),
                (tenant_id, document_id),
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        """Every (document, version) with a version row for the tenant (children cannot exist
        without one: foreign keys)."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return {(d, v) for d, v in conn.execute(
                sql.SQL("SELECT document_id, version FROM {} WHERE tenant_id = %s").format(
                    _table("document_versions")), (tenant_id,)).fetchall()}

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        """Delete the version row and everything derived from it, in one transaction, including
        the embedding-cache entries (migration 11) of its texts that no other stored chunk uses.
        The `documents` row (the document's identity) stays; the publisher owns tombstones."""
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id) as conn:
            conn.execute(  # serialise with a concurrent write of the same version
                sql.SQL("SELECT 1 FROM {} WHERE {} FOR UPDATE").format(_table("document_versions"), _WHERE_VERSION),
                key,
            )
            texts = [r[0] for r in conn.execute(
                sql.SQL("SELECT DISTINCT content_sha256 FROM {} WHERE {}").format(_table("chunks"), _WHERE_VERSION),
                key).fetchall()]
            for table, _ in _VERSION_TABLES:
                conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(_table(table), _WHERE_VERSION), key)
            conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(_table("document_versions"), _WHERE_VERSION), key)
            if texts:  # erase the cached vectors of texts no stored chunk uses any more
                conn.execute(
                    sql.SQL("DELETE FROM {c} e WHERE e.tenant_id = %s AND e.text_sha256 = ANY(%s) "
                            "AND NOT EXISTS (SELECT 1 FROM {k} k WHERE k.tenant_id = e.tenant_id "
                            "AND k.content_sha256 = e.text_sha256)").format(
                        c=_table("embedding_cache"), k=_table("chunks")),
                    (tenant_id, texts),
                )

    # ------------------------------------------------------------------ manifest

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        return self.manifests(tenant_id, [(document_id, version)])[(document_id, version)]

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """Every key's manifest from one snapshot, one query per table for the whole key set."""
        mf.check_tenant(tenant_id)
        if not keys:
            return {}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return self._read_manifests(conn, tenant_id, keys)

    def review_items(self, tenant_id: str,
                     keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
        """Every key's review items (`review_id`, `reason`, `payload`, `chunk_id`, `record_id`,
        `status`), from one snapshot in one query, as this store's role under the tenant's row-level
        security; per key in element order (`payload.element_index`, items without one last), then
        by id. A key without items (or unknown to the store) maps to an empty list."""
        mf.check_tenant(tenant_id)
        out: dict[tuple[str, int], list[dict[str, Any]]] = {(d, int(v)): [] for d, v in keys}
        if not keys:
            return out
        documents, versions = vb.key_arrays(keys)
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute(
                sql.SQL("SELECT document_id, version, review_id, reason, payload, chunk_id, record_id, status "
                        "FROM {} WHERE tenant_id = %(tenant)s AND (document_id, version) IN "
                        "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[])) "
                        "ORDER BY document_id, version, payload -> 'element_index' NULLS LAST, review_id")
                .format(_table("review_items")),
                {"tenant": tenant_id, "documents": documents, "versions": versions},
            ).fetchall()
        for document_id, version, review_id, reason, payload, chunk_id, record_id, status in rows:
            out.setdefault((document_id, int(version)), []).append({
                "review_id": review_id, "reason": reason, "payload": payload, "chunk_id": chunk_id,
                "record_id": record_id, "status": status,
            })
        return out

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """One transaction for the batch, each version in its own savepoint (`batch`)."""
        tenant = vb.one_tenant(docs)
        if tenant is None:
            return []
        with self.batch(tenant):
            return vb.write_all_or_each(self._db.transaction, self._write_all, self.write_version, docs)

    @staticmethod
    def _read_manifests(conn: psycopg.Connection[Any], tenant_id: str,
                        keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        documents, versions = vb.key_arrays(keys)
        args = {"tenant": tenant_id, "documents": documents, "versions": versions}
        where = sql.SQL("tenant_id = %(tenant)s AND (document_id, version) IN "
                        "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[]))")

        def rows(table: str, columns: str) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
            out: dict[tuple[str, int], list[tuple[Any, ...]]] = {k: [] for k in keys}
            for row in conn.execute(
                sql.SQL("SELECT document_id, version, " + columns + " FROM {} WHERE {}").format(_table(table), where),
                args,
            ).fetchall():
                out[(row[0], int(row[1]))].append(tuple(row[2:]))
            return out

        chunks = rows("chunks", "chunk_id, content_sha256, embedding")
        sections = rows("sections", "section_id, ordinal, title, path")
        records = rows(
            "records",
            "record_id, record_type, number, counterparty_id, counterparty_name, issued_on, currency, "
            "status, total, attributes, chunk_id, extraction_version",
        )
        lines = rows("record_lines", "record_id, line_no, product_code, description, quantity, unit_price, amount")
        review = rows("review_items", "review_id, reason, payload, chunk_id, record_id, extraction_version")
        return {k: _build_manifest(chunks[k], sections[k], records[k], lines[k], review[k]) for k in keys}


def _build_manifest(chunks: list[tuple[Any, ...]], sections: list[tuple[Any, ...]], records: list[tuple[Any, ...]],
                    lines: list[tuple[Any, ...]], review: list[tuple[Any, ...]]) -> StoreManifest:
    return mf.build_manifest("postgres", mf.POSTGRES_KINDS, {
        "chunks": [(cid, sha) for cid, sha, _ in chunks],
        "vectors": [(cid, mf.vector_hash(emb)) for cid, _, emb in chunks if emb is not None],
        "sections": [(sid, mf.section_hash(o, t, p)) for sid, o, t, p in sections],
        "records": [
            (rid, mf.record_hash(
                record_type=rt, number=num, counterparty_id=cpi, counterparty_name=cpn, issued_on=iss,
                currency=cur, status=st, total=tot, attributes=attrs, chunk_id=ch, extraction_version=ev,
            ))
            for rid, rt, num, cpi, cpn, iss, cur, st, tot, attrs, ch, ev in records
        ],
        "record_lines": [
            (mf.record_line_id(rid, no), mf.record_line_hash(
                product_code=pc, description=d, quantity=q, unit_price=up, amount=a))
            for rid, no, pc, d, q, up, a in lines
        ],
        "review_items": [
            (rid, mf.review_hash(reason=r, payload=p, chunk_id=c, record_id=rec, extraction_version=ev))
            for rid, r, p, c, rec, ev in review
        ],
    })


class PostgresStagingStore:
    """`StagingStore` on PostgreSQL (`staging_blobs`, `stage_payloads`), same role and RLS.

    Blobs are keyed by (tenant, sha256) and immutable; payloads by (tenant, key, stage), last
    write wins. Reads verify the bytes against the stored sha256; a missing item raises
    `StagedItemMissing`; a corrupt one raises `BadInput`.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, *, password: str | None = None) -> PostgresStagingStore:
        return cls(_ingest_conninfo(settings, password))

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every put and get of `tenant_id` this thread makes inside the block shares one
        transaction, each in its own savepoint (`TenantConnections.batch`): one commit for a
        stage's micro-batch instead of one per payload; a failed call undoes only its own write."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    def put_blob(self, tenant_id: str, content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                sql.SQL("INSERT INTO {} (tenant_id, sha256, content, size) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (tenant_id, sha256) DO NOTHING").format(_table("staging_blobs")),
                (tenant_id, digest, content, len(content)),
            )
        return digest

    def get_blob(self, tenant_id: str, sha256: str) -> bytes:
        if not _SHA256.fullmatch(sha256):
            raise BadInput(f"not a sha256: {sha256!r}")
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(
                sql.SQL("SELECT content FROM {} WHERE tenant_id = %s AND sha256 = %s").format(_table("staging_blobs")),
                (tenant_id, sha256),
            ).fetchone()
        if row is None:
            raise StagedItemMissing(f"no staged blob {sha256} for tenant {tenant_id}")
        return _verified(bytes(row[0]), sha256, f"blob {sha256}")

    def put_payload(self, tenant_id: str, key: str, stage: str, payload: bytes) -> None:
        _check_payload_key(key, stage)
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {t} (tenant_id, key, stage, payload, sha256) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (tenant_id, key, stage) DO UPDATE SET payload = EXCLUDED.payload, "
                    "sha256 = EXCLUDED.sha256, updated_at = now() WHERE {t}.sha256 <> EXCLUDED.sha256"
                ).format(t=_table("stage_payloads")),
                (tenant_id, key, stage, payload, hashlib.sha256(payload).hexdigest()),
            )

    def get_payload(self, tenant_id: str, key: str, stage: str) -> bytes:
        _check_payload_key(key, stage)
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(
                sql.SQL("SELECT payload, sha256 FROM {} WHERE tenant_id = %s AND key = %s AND stage = %s")
                .format(_table("stage_payloads")),
                (tenant_id, key, stage),
            ).fetchone()
        if row is None:
            raise StagedItemMissing(f"no {stage} payload under key {key!r} for tenant {tenant_id}")
        return _verified(bytes(row[0]), row[1], f"{stage} payload {key!r}")

    def erase_deleted(self, tenant_id: str) -> dict[str, int]:
        """Erase what deleted documents left in staging, in one tenant transaction; idempotent.

        Removes every stage payload of a deleted document up to its tombstone version (in-flight
        versions included: payloads are found by the document and version in their key) and of
        every version gc has purged, and every blob whose content only such versions used (a blob
        still named by a live version or by the upstream ledger's current version stays).
        Returns the rows removed per table."""
        with self._db.transaction(tenant_id) as conn:
            payloads = conn.execute(_ERASE_PAYLOADS, {"tenant": tenant_id}).rowcount
            blobs = conn.execute(_ERASE_BLOBS, {"tenant": tenant_id}).rowcount
        return {"stage_payloads": payloads, "staging_blobs": blobs}


_ERASE_PAYLOADS = """
DELETE FROM manifold.stage_payloads p USING manifold.version_manifest m
WHERE p.tenant_id = %(tenant)s AND m.tenant_id = %(tenant)s AND p.document_id = m.document_id
  AND ((m.state = 'deleted' AND p.version <= m.version) OR (m.purged_at IS NOT NULL AND p.version = m.version))
"""
_ERASE_BLOBS = """
DELETE FROM manifold.staging_blobs b
WHERE b.tenant_id = %(tenant)s
  AND b.sha256 IN (SELECT content_sha256 FROM manifold.version_manifest WHERE tenant_id = %(tenant)s
                   AND (state = 'deleted' OR purged_at IS NOT NULL) AND content_sha256 IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM manifold.version_manifest m WHERE m.tenant_id = %(tenant)s
                  AND m.content_sha256 = b.sha256 AND m.state <> 'deleted' AND m.purged_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM manifold.upstream_versions u WHERE u.tenant_id = %(tenant)s
                  AND u.content_sha256 = b.sha256 AND NOT u.deleted)
"""


def _verified(content: bytes, sha256: str, what: str) -> bytes:
    if hashlib.sha256(content).hexdigest() != sha256:
        raise BadInput(f"staged {what} does not match its sha256 (corrupt)")
    return content


def _check_payload_key(key: str, stage: str) -> None:
    if not 1 <= len(key) <= 1024 or not 1 <= len(stage) <= 64:
        raise BadInput("payload key must be 1-1024 characters and stage 1-64")


def _ingest_conninfo(settings: ManifoldSettings, password: str | None) -> str:
    if password is None:
        return settings.postgres.ingest_conninfo()
    return settings.postgres.conninfo(user=INGEST_ROLE, password=password)
