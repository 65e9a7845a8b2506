"""`PostgresRelationalStore`: the `RelationalStore` port on PostgreSQL + pgvector.

Connects as `manifold_ingest` under row-level security through `TenantConnections`
(`pg_connections.py`: one tenant-scoped transaction per call, `Transient` on a server fault,
nothing connects until a method is called).

Guarantees (in addition to `manifold.shared.ports`):
- `write_version` is one transaction: the version row, sections, chunks with vectors, records
  with lines and review items commit together or not at all. Upserts are keyed by the
  deterministic ids; a replay rewrites no row whose values are unchanged. A new version is
  `staged`; an existing version's `state` is never touched. The same version arriving with a
  different content hash is `BadInput` (versions are immutable).
- `manifest` reads one consistent snapshot (REPEATABLE READ) and rebuilds each hash from the
  stored columns (vectors from the stored float32 values).
- `delete_version` removes the version and everything derived from it in one transaction,
  including the embedding-cache entries no other stored chunk uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput
from manifold.shared.stores import manifest as mf
from manifold.shared.stores import version_batches as vb
from manifold.shared.stores.pg_connections import TenantConnections, ingest_conninfo, schema_table

_VERSION_KEY = ("tenant_id", "document_id", "version")


def _upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> sql.Composed:
    """INSERT ... ON CONFLICT (key) DO UPDATE, but only for a row of the same tenant, document and
    version (never re-homes a row) and only when a value actually differs (replays write nothing)."""
    updated = [c for c in columns if c not in key and c not in _VERSION_KEY]
    t = sql.Identifier(table)
    return sql.SQL(
        "INSERT INTO {table} ({cols}) VALUES ({vals}) ON CONFLICT ({key}) DO UPDATE SET {sets} "
        "WHERE {same_version} AND ({old}) IS DISTINCT FROM ({new})"
    ).format(
        table=schema_table(table),
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
    schema_table("documents"))
_LOCK_VERSIONS = sql.SQL(
    "SELECT document_id, version, content_sha256 FROM {} WHERE tenant_id = %(tenant)s AND (document_id, version) IN "
    "(SELECT * FROM unnest(%(documents)s::text[], %(versions)s::integer[])) ORDER BY document_id, version FOR UPDATE"
).format(schema_table("document_versions"))
_UPSERT_VERSION = sql.SQL(
    "INSERT INTO {t} (tenant_id, document_id, version, content_sha256, media_type, metadata, "
    "pipeline_versions, config_fingerprint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, document_id, version) DO UPDATE SET media_type = EXCLUDED.media_type, "
    "metadata = EXCLUDED.metadata, pipeline_versions = EXCLUDED.pipeline_versions, "
    "config_fingerprint = EXCLUDED.config_fingerprint, updated_at = now() "
    "WHERE ({t}.media_type, {t}.metadata, {t}.pipeline_versions, {t}.config_fingerprint) "
    "IS DISTINCT FROM (EXCLUDED.media_type, EXCLUDED.metadata, EXCLUDED.pipeline_versions, "
    "EXCLUDED.config_fingerprint)"
).format(t=schema_table("document_versions"))


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


class PostgresRelationalStore:
    """`RelationalStore` on PostgreSQL + pgvector (schema from `pg_schema.migrate`).

    `conninfo` must log in as `manifold_ingest`; see the module docstring for guarantees.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout, vectors=True)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, *, password: str | None = None) -> PostgresRelationalStore:
        return cls(ingest_conninfo(settings, password))

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
                        schema_table(table), _WHERE_VERSION, id_expr),
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
                .format(schema_table("document_versions")),
                (tenant_id, document_id),
            ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def newest_versions(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, int]:
        """`newest_version` of each document with one statement."""
        if not document_ids:
            return {}
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute(
                sql.SQL("SELECT document_id, max(version) FROM {} WHERE tenant_id = %s AND document_id = ANY(%s) "
                        "GROUP BY document_id").format(schema_table("document_versions")),
                (tenant_id, sorted(set(document_ids))),
            ).fetchall()
        return {str(d): int(v) for d, v in rows}

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        """Every (document, version) with a version row for the tenant (children cannot exist
        without one: foreign keys)."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return {(d, v) for d, v in conn.execute(
                sql.SQL("SELECT document_id, version FROM {} WHERE tenant_id = %s").format(
                    schema_table("document_versions")), (tenant_id,)).fetchall()}

    # ------------------------------------------------------------------ delete

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        """Delete the version row and everything derived from it, in one transaction, including
        the embedding-cache entries (migration 11) of its texts that no other stored chunk uses.
        The `documents` row (the document's identity) stays; the publisher owns tombstones."""
        key = {"tenant": tenant_id, "document_id": document_id, "version": version}
        with self._db.transaction(tenant_id) as conn:
            conn.execute(  # serialise with a concurrent write of the same version
                sql.SQL("SELECT 1 FROM {} WHERE {} FOR UPDATE").format(
                    schema_table("document_versions"), _WHERE_VERSION),
                key,
            )
            texts = [r[0] for r in conn.execute(
                sql.SQL("SELECT DISTINCT content_sha256 FROM {} WHERE {}").format(
                    schema_table("chunks"), _WHERE_VERSION),
                key).fetchall()]
            for table, _ in _VERSION_TABLES:
                conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(schema_table(table), _WHERE_VERSION), key)
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE {}").format(schema_table("document_versions"), _WHERE_VERSION), key)
            if texts:  # erase the cached vectors of texts no stored chunk uses any more
                conn.execute(
                    sql.SQL("DELETE FROM {c} e WHERE e.tenant_id = %s AND e.text_sha256 = ANY(%s) "
                            "AND NOT EXISTS (SELECT 1 FROM {k} k WHERE k.tenant_id = e.tenant_id "
                            "AND k.content_sha256 = e.text_sha256)").format(
                        c=schema_table("embedding_cache"), k=schema_table("chunks")),
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
                .format(schema_table("review_items")),
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
                sql.SQL("SELECT document_id, version, " + columns + " FROM {} WHERE {}").format(
                    schema_table(table), where),
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
