
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

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

ALTER TABLE upstream_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE upstream_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON upstream_versions
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, UPDATE ON upstream_versions TO manifold_ingest;

RESET ROLE;
