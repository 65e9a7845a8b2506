
CREATE EXTENSION IF NOT EXISTS vector;

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'manifold_owner') THEN
        CREATE ROLE manifold_owner NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'manifold_ingest') THEN
        CREATE ROLE manifold_ingest LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'manifold_query') THEN
        CREATE ROLE manifold_query LOGIN;
    END IF;
END
$roles$;
ALTER ROLE manifold_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE manifold_ingest LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE manifold_query LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE manifold_ingest SET search_path = manifold, public;
ALTER ROLE manifold_query SET search_path = manifold, public;
ALTER ROLE manifold_query SET default_transaction_read_only = on;

ALTER SCHEMA manifold OWNER TO manifold_owner;
ALTER TABLE manifold.schema_migrations OWNER TO manifold_owner;
REVOKE ALL ON SCHEMA manifold FROM PUBLIC;
GRANT USAGE ON SCHEMA manifold TO manifold_ingest, manifold_query;

SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

CREATE TABLE documents (
    tenant_id text NOT NULL,
    document_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);

CREATE TABLE document_versions (
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL CHECK (version >= 1),
    content_sha256 char(64) NOT NULL,
    media_type text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
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
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    ordinal integer NOT NULL,
    title text NOT NULL,
    path text[] NOT NULL,
    config_fingerprint text NOT NULL,
    UNIQUE (tenant_id, section_id),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE
);
CREATE INDEX sections_version_idx ON sections (tenant_id, document_id, version);

CREATE TABLE chunks (
    chunk_id text PRIMARY KEY,
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    section_id text NOT NULL,
    ordinal integer NOT NULL,
    kind text NOT NULL CHECK (kind IN ('text', 'table', 'list', 'identifiers')),
    text text NOT NULL,
    content_sha256 char(64) NOT NULL,
    identifiers text[] NOT NULL DEFAULT '{}',
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
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, section_id) REFERENCES sections (tenant_id, section_id) ON DELETE CASCADE
);
CREATE INDEX chunks_version_idx ON chunks (tenant_id, document_id, version);
CREATE INDEX chunks_section_idx ON chunks (tenant_id, section_id);
CREATE INDEX chunks_identifiers_idx ON chunks USING gin (identifiers);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE records (
    record_id text PRIMARY KEY,
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    record_type text NOT NULL CHECK (record_type IN ('invoice', 'credit_note', 'order', 'catalog_item')),
    number text NOT NULL,
    counterparty_id text,
    counterparty_name text,
    issued_on date,
    currency char(3) CHECK (currency ~ '^[A-Z]{3}$'),
    status text,
    total numeric,
    attributes jsonb NOT NULL DEFAULT '{}',
    chunk_id text,
    extraction_version text NOT NULL,
    config_fingerprint text NOT NULL,
    UNIQUE (tenant_id, record_id),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE
);
CREATE INDEX records_version_idx ON records (tenant_id, document_id, version);
CREATE INDEX records_number_idx ON records (tenant_id, record_type, number);
CREATE INDEX records_counterparty_idx ON records (tenant_id, counterparty_id, issued_on);

CREATE TABLE record_lines (
    record_id text NOT NULL,
    line_no integer NOT NULL CHECK (line_no >= 1),
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    product_code text,
    description text,
    quantity numeric NOT NULL,
    unit_price numeric NOT NULL,
    amount numeric NOT NULL,
    PRIMARY KEY (record_id, line_no),
    FOREIGN KEY (tenant_id, record_id) REFERENCES records (tenant_id, record_id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE
);
CREATE INDEX record_lines_version_idx ON record_lines (tenant_id, document_id, version);
CREATE INDEX record_lines_product_idx ON record_lines (tenant_id, product_code);

CREATE TABLE review_items (
    review_id text PRIMARY KEY,
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    reason text NOT NULL,
    payload jsonb NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    status text NOT NULL DEFAULT 'open',
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES document_versions ON DELETE CASCADE
);
CREATE INDEX review_items_version_idx ON review_items (tenant_id, document_id, version);

CREATE TABLE staging_blobs (
    tenant_id text NOT NULL,
    sha256 char(64) NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
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

ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE documents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON documents
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE document_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE document_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document_versions
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE sections ENABLE ROW LEVEL SECURITY;
ALTER TABLE sections FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON sections
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON chunks
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE records ENABLE ROW LEVEL SECURITY;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON records
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE record_lines ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_lines FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON record_lines
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE review_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_items FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON review_items
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE staging_blobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE staging_blobs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON staging_blobs
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE stage_payloads ENABLE ROW LEVEL SECURITY;
ALTER TABLE stage_payloads FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON stage_payloads
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON documents, document_versions, sections, chunks, records, record_lines, review_items, staging_blobs, stage_payloads TO manifold_ingest;
GRANT SELECT ON documents, document_versions, sections, chunks, records, record_lines TO manifold_query;
GRANT SELECT ON schema_migrations TO manifold_ingest, manifold_query;

RESET ROLE;
