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
"""Tenant tables of migration 1 (later migrations add `upstream_versions`, `version_manifest`,
`embedding_states`, `chunk_vectors`, each with the same `tenant_isolation` policy)."""
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


def _active_only(table: str) -> str:
    """Query role: rows of the ACTIVE version only (restrictive, AND-ed with tenant_isolation)."""
    return f"""
CREATE POLICY query_active_only ON {table} AS RESTRICTIVE FOR SELECT TO {QUERY_ROLE}
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = {table}.tenant_id AND m.document_id = {table}.document_id
                     AND m.version = {table}.version AND m.state = 'active'));
"""


EMBEDDED_TEXT_TABLES = ("text_chunks", "text_terms")
EMBEDDED_GRAPH_TABLES = ("graph_entities", "graph_versions", "graph_mentions", "graph_edges")

_M7 = f"""
-- Embedded profile: the text index and the graph as PostgreSQL tables (pg_text.py, pg_graph.py).
-- Same tenant_isolation policy (ENABLE + FORCE) as every tenant table. Readers: the ingest role
-- writes; the query role reads text_chunks, text_terms, graph_mentions and graph_edges directly
-- (the BM25 aggregation and the recursive traversal need the base tables' indexes, which a
-- security_barrier view would hide) under a RESTRICTIVE policy that keeps only rows of the
-- version that is ACTIVE in version_manifest: the same guarantee as migration 5 for chunks.
-- The per-row `serving` / `active` marks are the publisher's marks (like Elasticsearch's
-- `serving` and Neo4j's `active`), so the ServingMarks contract (set_serving, held_versions,
-- serving_drift) is the same on both profiles; readers filter on the mark AND the policy holds.
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;

CREATE TABLE text_chunks (
    tenant_id text NOT NULL,
    chunk_id text NOT NULL,
    document_id text NOT NULL,
    version integer NOT NULL CHECK (version >= 1),
    section_id text NOT NULL,
    section_title text NOT NULL,
    section_title_terms text NOT NULL,
    section_path text[] NOT NULL,
    ordinal integer NOT NULL,
    kind text NOT NULL,
    text text NOT NULL,
    identifiers text[] NOT NULL DEFAULT '{{}}',
    content_sha256 char(64) NOT NULL,
    doc_content_sha256 char(64) NOT NULL,
    media_type text NOT NULL,
    parser_version text NOT NULL,
    chunker_version text NOT NULL,
    extraction_version text NOT NULL,
    text_schema_version text NOT NULL,
    config_fingerprint text NOT NULL,
    text_length integer NOT NULL CHECK (text_length >= 0),
    title_length integer NOT NULL CHECK (title_length >= 0),
    serving boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, chunk_id)
);
CREATE INDEX text_chunks_version_idx ON text_chunks (tenant_id, document_id, version);
CREATE INDEX text_chunks_serving_idx ON text_chunks (tenant_id) WHERE serving;
CREATE INDEX text_chunks_identifiers_idx ON text_chunks USING gin (identifiers);

-- Postings: one row per (chunk, field, term) with its term frequency.
CREATE TABLE text_terms (
    tenant_id text NOT NULL,
    chunk_id text NOT NULL,
    document_id text NOT NULL,
    version integer NOT NULL,
    field text NOT NULL CHECK (field IN ('text', 'title')),
    term text NOT NULL,
    tf integer NOT NULL CHECK (tf >= 1),
    PRIMARY KEY (tenant_id, term, field, chunk_id),
    FOREIGN KEY (tenant_id, chunk_id) REFERENCES text_chunks ON DELETE CASCADE
);
CREATE INDEX text_terms_chunk_idx ON text_terms (tenant_id, chunk_id);

CREATE TABLE graph_entities (
    tenant_id text NOT NULL,
    entity_id text NOT NULL,
    type text NOT NULL,
    label text NOT NULL,
    canonical_key text NOT NULL,
    name text NOT NULL,
    aliases text[] NOT NULL DEFAULT '{{}}',
    properties_json text NOT NULL,
    PRIMARY KEY (tenant_id, entity_id)
);
CREATE INDEX graph_entities_type_idx ON graph_entities (tenant_id, type);

CREATE TABLE graph_versions (
    {_V} CHECK (version >= 1),
    content_sha256 char(64) NOT NULL,
    config_fingerprint text NOT NULL,
    graph_schema_version text NOT NULL,
    graph_model_version text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version)
);

CREATE TABLE graph_mentions (
    {_V},
    mention_key text NOT NULL,
    entity_id text NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version, mention_key),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES graph_versions ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, entity_id) REFERENCES graph_entities
);
CREATE INDEX graph_mentions_entity_idx ON graph_mentions (tenant_id, entity_id);

CREATE TABLE graph_edges (
    {_V},
    relation_id text NOT NULL,
    type text NOT NULL CHECK (type ~ '^[A-Z][A-Z0-9_]{{0,62}}$' AND type <> 'MENTIONED_IN'),
    source_id text NOT NULL,
    target_id text NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    valid_from date,
    valid_to date,
    properties_json text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version, relation_id),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES graph_versions ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, source_id) REFERENCES graph_entities (tenant_id, entity_id),
    FOREIGN KEY (tenant_id, target_id) REFERENCES graph_entities (tenant_id, entity_id)
);
CREATE INDEX graph_edges_source_idx ON graph_edges (tenant_id, source_id, type);
CREATE INDEX graph_edges_target_idx ON graph_edges (tenant_id, target_id, type);
{"".join(_rls(t) for t in EMBEDDED_TEXT_TABLES + EMBEDDED_GRAPH_TABLES)}
GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(EMBEDDED_TEXT_TABLES + EMBEDDED_GRAPH_TABLES)} TO {INGEST_ROLE};
{"".join(_active_only(t) for t in ("text_chunks", "text_terms", "graph_mentions", "graph_edges"))}
GRANT SELECT ON text_chunks, text_terms, graph_entities, graph_mentions, graph_edges TO {QUERY_ROLE};
RESET ROLE;
"""

_M6 = f"""
-- Embedding migration (DESIGN 3.4): named configurations, their per-tenant state, and a parallel
-- vector table. `primary` lives in chunks.embedding; a tenant with no 'active' row reads primary.
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;

-- Definitions are global (not tenant data): a name always means the same model and templates.
CREATE TABLE embedding_configs (
    name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
    model text NOT NULL,
    revision text NOT NULL,
    dim integer NOT NULL CHECK (dim = 384),
    normalized boolean NOT NULL,
    template text NOT NULL,
    query_template text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON embedding_configs TO {INGEST_ROLE};
GRANT SELECT ON embedding_configs TO {QUERY_ROLE};

-- Per tenant: where each configuration stands. At most one active per tenant.
CREATE TABLE embedding_states (
    tenant_id text NOT NULL,
    config text NOT NULL REFERENCES embedding_configs,
    state text NOT NULL CHECK (state IN ('backfilling', 'verified', 'active', 'retired')),
    counts jsonb,
    checksum text,
    backfill_started_at timestamptz,
    verified_at timestamptz,
    activated_at timestamptz,
    retired_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, config)
);
CREATE UNIQUE INDEX embedding_states_one_active ON embedding_states (tenant_id) WHERE state = 'active';
{_rls("embedding_states")}
GRANT SELECT, INSERT, UPDATE ON embedding_states TO {INGEST_ROLE};
GRANT SELECT ON embedding_states TO {QUERY_ROLE};

-- Parallel vectors: one per (tenant, chunk, configuration), removed with their chunk.
ALTER TABLE chunks ADD CONSTRAINT chunks_tenant_chunk_key UNIQUE (tenant_id, chunk_id);
CREATE TABLE chunk_vectors (
    tenant_id text NOT NULL,
    chunk_id text NOT NULL,
    config text NOT NULL REFERENCES embedding_configs,
    document_id text NOT NULL,
    version integer NOT NULL,
    embedding vector(384) NOT NULL,
    content_sha256 char(64) NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chunk_id, config),
    FOREIGN KEY (tenant_id, chunk_id) REFERENCES chunks (tenant_id, chunk_id) ON DELETE CASCADE
);
CREATE INDEX chunk_vectors_config_idx ON chunk_vectors (tenant_id, config, document_id);
-- One HNSW graph for every configuration; the query filters by config with pgvector 0.8's
-- iterative scan (a per-config partial index would need DDL at each new configuration).
CREATE INDEX chunk_vectors_embedding_hnsw ON chunk_vectors USING hnsw (embedding vector_cosine_ops);
{_rls("chunk_vectors")}
CREATE POLICY query_active_only ON chunk_vectors AS RESTRICTIVE FOR SELECT TO {QUERY_ROLE}
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = chunk_vectors.tenant_id AND m.document_id = chunk_vectors.document_id
                     AND m.version = chunk_vectors.version AND m.state = 'active'));
GRANT SELECT, INSERT, UPDATE, DELETE ON chunk_vectors TO {INGEST_ROLE};
GRANT SELECT ON chunk_vectors TO {QUERY_ROLE};
RESET ROLE;
"""

_M8 = f"""
-- Embedded profile bus (shared/stores/pg_bus.py): a partitioned append-only log and consumer-group
-- offsets, Kafka's contract in two tables. Infrastructure like Kafka, not tenant data: no RLS;
-- only the ingestion role reads and writes it (the query role has no access).
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;
CREATE TABLE bus_messages (
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    "offset" bigint NOT NULL CHECK ("offset" >= 0),
    key bytea,
    value bytea NOT NULL,
    headers jsonb NOT NULL DEFAULT '[]',
    ts timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (topic, partition, "offset")
);
CREATE TABLE bus_offsets (
    group_id text NOT NULL,
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    "offset" bigint NOT NULL CHECK ("offset" >= 0),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_id, topic, partition)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON bus_messages, bus_offsets TO {INGEST_ROLE};
RESET ROLE;
"""

_M9 = f"""
-- Tenant slugs holding anything in the embedded stores, for the reconciler's sweep (as known_tenants).
CREATE FUNCTION {SCHEMA}.text_index_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = {SCHEMA}, pg_temp
    AS $fn$ SELECT DISTINCT tenant_id FROM {SCHEMA}.text_chunks $fn$;
CREATE FUNCTION {SCHEMA}.graph_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = {SCHEMA}, pg_temp
    AS $fn$ SELECT tenant_id FROM {SCHEMA}.graph_versions UNION SELECT tenant_id FROM {SCHEMA}.graph_entities $fn$;
REVOKE ALL ON FUNCTION {SCHEMA}.text_index_tenants(), {SCHEMA}.graph_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SCHEMA}.text_index_tenants(), {SCHEMA}.graph_tenants() TO {INGEST_ROLE};
"""

_M10 = f"""
-- Erasure (SECURITY.md, deletes erase content): what a deleted document left outside the serving
-- stores must be findable by document, so gc can remove it with set-based statements.
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;
-- A stage payload's document and version, derived from its key `tenant/version/fingerprint/document`
-- (ingest/notices.py payload_key); NULL for a key of any other shape.
ALTER TABLE stage_payloads
    ADD COLUMN document_id text GENERATED ALWAYS AS (
        CASE WHEN key ~ '^[^/]+/[0-9]{{1,9}}/[^/]+/.' THEN regexp_replace(key, '^[^/]+/[0-9]+/[^/]+/', '') END) STORED,
    ADD COLUMN version integer GENERATED ALWAYS AS (
        CASE WHEN key ~ '^[^/]+/[0-9]{{1,9}}/[^/]+/.' THEN split_part(key, '/', 2)::integer END) STORED;
CREATE INDEX stage_payloads_document_idx ON stage_payloads (tenant_id, document_id, version);
-- The embedded bus: messages are found by key (`tenant/document`) for erasure, and each partition's
-- next offset is kept apart from the rows, so deleting a partition's newest messages never lets
-- an offset be handed out twice (a committed consumer would skip the reused one).
CREATE INDEX bus_messages_key_idx ON bus_messages (key);
CREATE TABLE bus_partitions (
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    PRIMARY KEY (topic, partition)
);
INSERT INTO bus_partitions (topic, partition, next_offset)
    SELECT topic, partition, max("offset") + 1 FROM bus_messages GROUP BY topic, partition;
GRANT SELECT, INSERT, UPDATE ON bus_partitions TO {INGEST_ROLE};
RESET ROLE;
"""

_M11 = f"""
-- Embedding cache (ingest/embed.py): the vector of an exact chunk text under one embedding
-- configuration, so a replay, re-ingest or update reuses it bit for bit and never re-encodes an
-- unchanged chunk. Hashes and vectors only (no text); per tenant under the same tenant_isolation
-- policy as every tenant table, so no tenant can learn what another one ingested. An entry no
-- stored chunk uses is removed when the last such chunk is deleted (delete_version) and by gc.
SET LOCAL ROLE {OWNER_ROLE};
SET LOCAL search_path = {SCHEMA}, public;
CREATE TABLE embedding_cache (
    tenant_id text NOT NULL,
    config text NOT NULL,
    text_sha256 char(64) NOT NULL,
    vector vector NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, config, text_sha256)
);
CREATE INDEX embedding_cache_text_idx ON embedding_cache (tenant_id, text_sha256);
CREATE INDEX chunks_content_idx ON chunks (tenant_id, content_sha256);
{_rls("embedding_cache")}
GRANT SELECT, INSERT, DELETE ON embedding_cache TO {INGEST_ROLE};
RESET ROLE;
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "roles, tenant tables, row-level security, pgvector HNSW", _M1),
    Migration(2, "upstream version ledger", _M2),
    Migration(3, "publication manifest, serving views", _M3),
    Migration(4, "query role reads serving views only", _M4),
    Migration(5, "query role reads active chunks directly (HNSW), restrictive active-only policy", _M5),
    Migration(6, "embedding configurations, per-tenant states, parallel chunk vectors", _M6),
    Migration(7, "embedded profile: text index (BM25 postings) and graph tables, active-only reads", _M7),
    Migration(8, "embedded profile bus: partitioned log and consumer-group offsets", _M8),
    Migration(9, "embedded stores: tenant sweep functions for the reconciler", _M9),
    Migration(10, "erasure: stage payloads by document, bus messages by key, bus high-water offsets", _M10),
    Migration(11, "embedding cache: vectors by (tenant, configuration, sha256 of the exact text)", _M11),
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
            applied: dict[int, str] = dict(
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
