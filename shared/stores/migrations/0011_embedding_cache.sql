
-- Embedding cache (ingest/embed.py): the vector of an exact chunk text under one embedding
-- configuration, so a replay, re-ingest or update reuses it bit for bit and never re-encodes an
-- unchanged chunk. Hashes and vectors only (no text); per tenant under the same tenant_isolation
-- policy as every tenant table, so no tenant can learn what another one ingested. An entry no
-- stored chunk uses is removed when the last such chunk is deleted (delete_version) and by gc.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;
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

ALTER TABLE embedding_cache ENABLE ROW LEVEL SECURITY;
ALTER TABLE embedding_cache FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON embedding_cache
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, DELETE ON embedding_cache TO manifold_ingest;
RESET ROLE;
