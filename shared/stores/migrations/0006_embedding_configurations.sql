
-- Embedding migration (DESIGN 3.4): named configurations, their per-tenant state, and a parallel
-- vector table. `primary` lives in chunks.embedding; a tenant with no 'active' row reads primary.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

-- Definitions are global (not tenant data): a name always means the same model and templates.
CREATE TABLE embedding_configs (
    name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    model text NOT NULL,
    revision text NOT NULL,
    dim integer NOT NULL CHECK (dim = 384),
    normalized boolean NOT NULL,
    template text NOT NULL,
    query_template text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON embedding_configs TO manifold_ingest;
GRANT SELECT ON embedding_configs TO manifold_query;

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

ALTER TABLE embedding_states ENABLE ROW LEVEL SECURITY;
ALTER TABLE embedding_states FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON embedding_states
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, UPDATE ON embedding_states TO manifold_ingest;
GRANT SELECT ON embedding_states TO manifold_query;

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

ALTER TABLE chunk_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunk_vectors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON chunk_vectors
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

CREATE POLICY query_active_only ON chunk_vectors AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = chunk_vectors.tenant_id AND m.document_id = chunk_vectors.document_id
                     AND m.version = chunk_vectors.version AND m.state = 'active'));
GRANT SELECT, INSERT, UPDATE, DELETE ON chunk_vectors TO manifold_ingest;
GRANT SELECT ON chunk_vectors TO manifold_query;
RESET ROLE;
