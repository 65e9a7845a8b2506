
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

-- The publication manifest: one row per (tenant, document, version) the publisher has seen,
-- including the tombstone row of a delete. Exactly one active version per document at most.
CREATE TABLE version_manifest (
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL CHECK (version >= 1),
    state text NOT NULL DEFAULT 'staged' CHECK (state IN ('staged', 'verified', 'active', 'retired', 'deleted')),
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

ALTER TABLE version_manifest ENABLE ROW LEVEL SECURITY;
ALTER TABLE version_manifest FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON version_manifest
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE document_versions ADD CONSTRAINT document_versions_state_check CHECK (state IN ('staged', 'verified', 'active', 'retired', 'deleted'));
GRANT SELECT, INSERT, UPDATE ON version_manifest TO manifold_ingest;
GRANT SELECT ON version_manifest TO manifold_query;

-- Serving views: only rows of the active version (the owner is held to RLS, so the caller's
-- manifold.tenant_id still confines them).

CREATE VIEW serving_document_versions WITH (security_barrier) AS
    SELECT t.* FROM document_versions t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_document_versions TO manifold_query;

CREATE VIEW serving_sections WITH (security_barrier) AS
    SELECT t.* FROM sections t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_sections TO manifold_query;

CREATE VIEW serving_chunks WITH (security_barrier) AS
    SELECT t.* FROM chunks t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_chunks TO manifold_query;

CREATE VIEW serving_records WITH (security_barrier) AS
    SELECT t.* FROM records t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_records TO manifold_query;

CREATE VIEW serving_record_lines WITH (security_barrier) AS
    SELECT t.* FROM record_lines t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active';
GRANT SELECT ON serving_record_lines TO manifold_query;

RESET ROLE;

-- Tenant slugs only, for the reconciler's sweep over every tenant (superuser-owned definer).
CREATE FUNCTION manifold.known_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = manifold, pg_temp
    AS $fn$ SELECT tenant_id FROM manifold.version_manifest UNION SELECT tenant_id FROM manifold.documents $fn$;
REVOKE ALL ON FUNCTION manifold.known_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION manifold.known_tenants() TO manifold_ingest;
