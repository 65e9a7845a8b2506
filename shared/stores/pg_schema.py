"""PostgreSQL schema: versioned, idempotent migrations applied in order.

Guarantees:
- `migrate()` applies every migration not yet recorded in `manifold.schema_migrations`, in
  version order, all in one transaction under an advisory lock: concurrent callers serialise,
  a failure leaves the schema unchanged, and rerunning it applies nothing new.
- A recorded migration is immutable: if its text changed since it was applied, `migrate()`
  refuses (`MigrationDrift`) instead of silently diverging.
- The login roles' passwords are (re)set on every run from the arguments (so rotation is a
  rerun). They are hashed client-side (SCRAM-SHA-256); the plain text never reaches the server.
- Runs as a superuser (`settings.postgres.conninfo()`); nothing runs at import time.

Model (schema `manifold`, owned by `manifold_owner`):
- Roles: `manifold_owner` (NOLOGIN, owns every table), `manifold_ingest` (LOGIN; SELECT, INSERT,
  UPDATE, DELETE on all tenant tables), `manifold_query` (LOGIN; SELECT on the serving tables
  only; transactions read-only by default). None of them bypasses row-level security.
- Every tenant table has `tenant_id NOT NULL`, ROW LEVEL SECURITY enabled *and forced* (the
  owner is held to it too) and the policy `tenant_isolation`:
  `tenant_id = current_setting('manifold.tenant_id', true)` for reads and writes, so a session
  with no tenant set sees and writes nothing. Adapters set the tenant per transaction with
  `SELECT set_config('manifold.tenant_id', %s, true)`.
- Version-scoped tables reference `document_versions` with ON DELETE CASCADE; foreign keys
  include `tenant_id`, so a row can never hang off another tenant's parent.
- Money and quantities are NUMERIC (exact, scale preserved), never float; currency is char(3).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import psycopg
from psycopg import sql

SCHEMA = "manifold"
OWNER_ROLE = "manifold_owner"
INGEST_ROLE = "manifold_ingest"
QUERY_ROLE = "manifold_query"

TENANT_TABLES = (
    "documents", "document_versions", "sections", "chunks", "records", "record_lines",
    "review_items", "staging_blobs", "stage_payloads",
)
SERVING_TABLES = ("documents", "document_versions", "sections", "chunks", "records", "record_lines")

_LOCK_KEY = 0x6D616E69666F6C64  # "manifold": one advisory lock for all migrators


class MigrationDrift(RuntimeError):
    """An applied migration's text differs from the one in the code."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def _rls(table: str) -> str:
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON {table}
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));
"""


_V = "tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL"
_V_FK = "FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE"

_M1 = f"""
CREATE EXTENSION IF NOT EXISTS vector;

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
        CREATE ROLE {OWNER_ROLE} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{INGEST_ROLE}') THEN
        CREATE ROLE {INGEST_ROLE} LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{QUERY_ROLE}') THEN
        CREATE ROLE {QUERY_ROLE} LOGIN;
    END IF;
END
$roles$;
ALTER ROLE {OWNER_ROLE} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE {INGEST_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE {QUERY_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE {INGEST_ROLE} SET search_path = {SCHEMA}, public;
ALTER ROLE {QUERY_ROLE} SET search_path = {SCHEMA}, public;
ALTER ROLE {QUERY_ROLE} SET default_transaction_read_only = on;

ALTER SCHEMA {SCHEMA} OWNER TO {OWNER_ROLE};
ALTER TABLE {SCHEMA}.schema_migrations OWNER TO {OWNER_ROLE};
REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC;
GRANT USAGE ON SCHEMA {SCHEMA} TO {INGEST_ROLE}, {QUERY_ROLE};

SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;

CREATE TABLE documents (
    tenant_id text NOT NULL,
    document_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);

CREATE TABLE document_versions (
    {_V} CHECK (version >= 1),
    content_sha256 char(64) NOT NULL,
    media_type text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{{}}',
    state text NOT NULL DEFAULT 'staged',
    pipeline_versions jsonb NOT NULL,
    config_fingerprint text NOT NULL,
    staged_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id, version),
    FOREIGN KEY (tenant_id, document_id) REFERENCES documents ON DELETE CASCADE
);

CREATE TABLE sections (
    section_id text PRIMARY KEY,
    {_V},
    ordinal integer NOT NULL,
    title text NOT NULL,
    path text[] NOT NULL,
    config_fingerprint text NOT NULL,
    UNIQUE (tenant_id, section_id),
    {_V_FK}
);
CREATE INDEX sections_version_idx ON sections (tenant_id, document_id, version);

CREATE TABLE chunks (
    chunk_id text PRIMARY KEY,
    {_V},
    section_id text NOT NULL,
    ordinal integer NOT NULL,
    kind text NOT NULL CHECK (kind IN ('text', 'table', 'list', 'identifiers')),
    text text NOT NULL,
    content_sha256 char(64) NOT NULL,
    identifiers text[] NOT NULL DEFAULT '{{}}',
    embedding vector(384),
    embedding_model text NOT NULL,
    embedding_revision text NOT NULL,
    embedding_dim integer NOT NULL CHECK (embedding_dim = 384),
    embedding_normalized boolean NOT NULL,
    parser_version text NOT NULL,
    chunker_version text NOT NULL,
    extraction_version text NOT NULL,
    pg_schema_version text NOT NULL,
    es_schema_version text NOT NULL,
    graph_schema_version text NOT NULL,
    config_fingerprint text NOT NULL,
    doc_content_sha256 char(64) NOT NULL,
    {_V_FK},
    FOREIGN KEY (tenant_id, section_id) REFERENCES sections (tenant_id, section_id) ON DELETE CASCADE
);
CREATE INDEX chunks_version_idx ON chunks (tenant_id, document_id, version);
CREATE INDEX chunks_section_idx ON chunks (tenant_id, section_id);
CREATE INDEX chunks_identifiers_idx ON chunks USING gin (identifiers);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE records (
    record_id text PRIMARY KEY,
    {_V},
    record_type text NOT NULL CHECK (record_type IN ('invoice', 'credit_note', 'order', 'catalog_item')),
    number text NOT NULL,
    counterparty_id text,
    counterparty_name text,
    issued_on date,
    currency char(3) CHECK (currency ~ '^[A-Z]{{3}}$'),
    status text,
    total numeric,
    attributes jsonb NOT NULL DEFAULT '{{}}',
    chunk_id text,
    extraction_version text NOT NULL,
    config_fingerprint text NOT NULL,
    UNIQUE (tenant_id, record_id),
    {_V_FK}
);
CREATE INDEX records_version_idx ON records (tenant_id, document_id, version);
CREATE INDEX records_number_idx ON records (tenant_id, record_type, number);
CREATE INDEX records_counterparty_idx ON records (tenant_id, counterparty_id, issued_on);

CREATE TABLE record_lines (
    record_id text NOT NULL,
    line_no integer NOT NULL CHECK (line_no >= 1),
    {_V},
    product_code text,
    description text,
    quantity numeric NOT NULL,
    unit_price numeric NOT NULL,
    amount numeric NOT NULL,
    PRIMARY KEY (record_id, line_no),
    FOREIGN KEY (tenant_id, record_id) REFERENCES records (tenant_id, record_id) ON DELETE CASCADE,
    {_V_FK}
);
CREATE INDEX record_lines_version_idx ON record_lines (tenant_id, document_id, version);
CREATE INDEX record_lines_product_idx ON record_lines (tenant_id, product_code);

CREATE TABLE review_items (
    review_id text PRIMARY KEY,
    {_V},
    reason text NOT NULL,
    payload jsonb NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    status text NOT NULL DEFAULT 'open',
    created_at timestamptz NOT NULL DEFAULT now(),
    {_V_FK}
);
CREATE INDEX review_items_version_idx ON review_items (tenant_id, document_id, version);

CREATE TABLE staging_blobs (
    tenant_id text NOT NULL,
    sha256 char(64) NOT NULL CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
    content bytea NOT NULL,
    size bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sha256)
);

CREATE TABLE stage_payloads (
    tenant_id text NOT NULL,
    key text NOT NULL CHECK (length(key) BETWEEN 1 AND 1024),
    stage text NOT NULL CHECK (length(stage) BETWEEN 1 AND 64),
    payload bytea NOT NULL,
    sha256 char(64) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key, stage)
);
{"".join(_rls(t) for t in TENANT_TABLES)}
GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(TENANT_TABLES)} TO {INGEST_ROLE};
GRANT SELECT ON {", ".join(SERVING_TABLES)} TO {QUERY_ROLE};
GRANT SELECT ON schema_migrations TO {INGEST_ROLE}, {QUERY_ROLE};

RESET ROLE;
"""

_M2 = f"""
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;

-- The upstream publish client's version ledger: one row per document, the last version handed
-- out, its content hash (NULL for a delete) and whether Kafka acknowledged its event.
CREATE TABLE upstream_versions (
    tenant_id text NOT NULL,
    document_id text NOT NULL,
    version integer NOT NULL CHECK (version >= 1),
    content_sha256 char(64),
    deleted boolean NOT NULL DEFAULT false,
    confirmed boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);
{_rls("upstream_versions")}
GRANT SELECT, INSERT, UPDATE ON upstream_versions TO {INGEST_ROLE};

RESET ROLE;
"""

_STATES = "'staged', 'verified', 'active', 'retired', 'deleted'"
_VIEWED = ("document_versions", "sections", "chunks", "records", "record_lines")


def _serving_view(table: str) -> str:
    return f"""
CREATE VIEW serving_{table} WITH (security_barrier) AS
    SELECT t.* FROM {table} t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_{table} TO {QUERY_ROLE};
"""


_M3 = f"""
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;

-- The publication manifest: one row per (tenant, document, version) the publisher has seen,
-- including the tombstone row of a delete. Exactly one active version per document at most.
CREATE TABLE version_manifest (
    {_V} CHECK (version >= 1),
    state text NOT NULL DEFAULT 'staged' CHECK (state IN ({_STATES})),
    content_sha256 char(64),
    config_fingerprint text,
    pipeline_versions jsonb,
    expected jsonb NOT NULL DEFAULT '[]',
    staged_at timestamptz NOT NULL DEFAULT now(),
    verified_at timestamptz,
    activated_at timestamptz,
    retired_at timestamptz,
    deleted_at timestamptz,
    purged_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id, version)
);
CREATE UNIQUE INDEX version_manifest_one_active ON version_manifest (tenant_id, document_id)
    WHERE state = 'active';
CREATE INDEX version_manifest_state_idx ON version_manifest (tenant_id, state);
{_rls("version_manifest")}
ALTER TABLE document_versions ADD CONSTRAINT document_versions_state_check CHECK (state IN ({_STATES}));
GRANT SELECT, INSERT, UPDATE ON version_manifest TO {INGEST_ROLE};
GRANT SELECT ON version_manifest TO {QUERY_ROLE};

-- Serving views: only rows of the active version (the owner is held to RLS, so the caller's
-- manifold.tenant_id still confines them).
{"".join(_serving_view(t) for t in _VIEWED)}
RESET ROLE;

-- Tenant slugs only, for the reconciler's sweep over every tenant (superuser-owned definer).
CREATE FUNCTION {SCHEMA}.known_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = {SCHEMA}, pg_temp
    AS $fn$ SELECT tenant_id FROM {SCHEMA}.version_manifest UNION SELECT tenant_id FROM {SCHEMA}.documents $fn$;
REVOKE ALL ON FUNCTION {SCHEMA}.known_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SCHEMA}.known_tenants() TO {INGEST_ROLE};
"""

SERVING_VIEWS = {t: f"serving_{t}" for t in _VIEWED}
"""Base table -> the view the query role must read (only the active version's rows)."""

_M4 = f"""
-- Readers see only active versions: the query role reads the serving views, never base tables.
REVOKE SELECT ON {SCHEMA}.documents, {SCHEMA}.document_versions, {SCHEMA}.sections, {SCHEMA}.chunks,
    {SCHEMA}.records, {SCHEMA}.record_lines FROM {QUERY_ROLE};
"""

_M5 = f"""
-- pgvector can only use the HNSW index when the query reads `chunks` itself (through the
-- security_barrier view the ORDER BY ... LIMIT stays a subquery and becomes a full scan). So the
-- query role may read `chunks` directly, but a RESTRICTIVE policy (AND-ed with tenant_isolation)
-- holds it to rows of the ACTIVE version in the manifest: the same guarantee as serving_chunks.
SET LOCAL ROLE {OWNER_ROLE};
CREATE POLICY query_active_only ON {SCHEMA}.chunks AS RESTRICTIVE FOR SELECT TO {QUERY_ROLE}
    USING (EXISTS (SELECT 1 FROM {SCHEMA}.version_manifest m
                   WHERE m.tenant_id = chunks.tenant_id AND m.document_id = chunks.document_id
                     AND m.version = chunks.version AND m.state = 'active'));
GRANT SELECT ON {SCHEMA}.chunks TO {QUERY_ROLE};
RESET ROLE;
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "roles, tenant tables, row-level security, pgvector HNSW", _M1),
    Migration(2, "upstream version ledger", _M2),
    Migration(3, "publication manifest, serving views", _M3),
    Migration(4, "query role reads serving views only", _M4),
    Migration(5, "query role reads active chunks directly (HNSW), restrictive active-only policy", _M5),
)

PG_SCHEMA_VERSION = str(MIGRATIONS[-1].version)
"""The schema version after `migrate()`; goes into `PipelineVersions.pg_schema`."""

_BOOTSTRAP = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum char(64) NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


def migrate(admin_conninfo: str, *, ingest_password: str, query_password: str) -> list[int]:
    """Bring the database to `PG_SCHEMA_VERSION`; return the versions applied by this call.

    `admin_conninfo` must be a superuser (it creates roles and the extension). The passwords
    are for `manifold_ingest` and `manifold_query` (settings `postgres.ingest_password`,
    `postgres.query_password`).
    """
    if not ingest_password or not query_password:
        raise ValueError("both login roles need a non-empty password")
    applied_now: list[int] = []
    with psycopg.connect(admin_conninfo) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(_BOOTSTRAP)
            applied = dict(
                conn.execute(sql.SQL("SELECT version, checksum FROM {}.schema_migrations").format(
                    sql.Identifier(SCHEMA))).fetchall()
            )
            for migration in MIGRATIONS:
                if migration.version in applied:
                    if applied[migration.version] != migration.checksum:
                        raise MigrationDrift(
                            f"migration {migration.version} ({migration.name}) changed after it was applied"
                        )
                    continue
                conn.execute(migration.sql)
                conn.execute("RESET ROLE")
                conn.execute(
                    sql.SQL("INSERT INTO {}.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)")
                    .format(sql.Identifier(SCHEMA)),
                    (migration.version, migration.name, migration.checksum),
                )
                applied_now.append(migration.version)
            for role, password in ((INGEST_ROLE, ingest_password), (QUERY_ROLE, query_password)):
                verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(verifier.decode())
                    )
                )
    return applied_now


def current_version(conninfo: str) -> int:
    """The highest applied migration (0 if none); readable by every manifold role."""
    with psycopg.connect(conninfo) as conn:
        exists = conn.execute("SELECT to_regclass('manifold.schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(SCHEMA))
        ).fetchone()
        return int(row[0]) if row else 0
