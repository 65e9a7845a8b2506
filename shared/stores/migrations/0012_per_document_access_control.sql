
-- Per-document access control (issue 29): ACL state owned by the ACL applier, enforced for the
-- query role by RESTRICTIVE policies (AND-ed with tenant_isolation and query_active_only).
--
-- The reader is the transaction's `manifold.principal` (the verified token's subject, set by the
-- query worker with set_config(..., true)); `manifold.acl_default` is the tenant's default for a
-- document that has no ACL: 'tenant' (everyone in the tenant) or anything else (nobody: fail
-- closed). No principal: nothing is readable. The principal's groups come from
-- principal_groups (the membership state), never from the token.
--
-- The readable set is computed once per statement: acl_granted()/acl_hidden() are uncorrelated
-- sub-selects, so the planner hashes them (a hashed SubPlan), instead of probing per row. ACLs
-- are NOT copied onto chunk rows (an update to an indexed row would rewrite its HNSW entries).
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

CREATE TABLE document_acls (
    tenant_id text NOT NULL,
    document_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq >= 1),
    public boolean NOT NULL DEFAULT false,
    users text[] NOT NULL DEFAULT '{}',
    groups text[] NOT NULL DEFAULT '{}',
    producer text,
    event_id text,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);

CREATE TABLE principal_groups (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq >= 1),
    groups text[] NOT NULL DEFAULT '{}',
    producer text,
    event_id text,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

ALTER TABLE document_acls ENABLE ROW LEVEL SECURITY;
ALTER TABLE document_acls FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document_acls
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));
ALTER TABLE principal_groups ENABLE ROW LEVEL SECURITY;
ALTER TABLE principal_groups FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON principal_groups
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON document_acls, principal_groups TO manifold_ingest;
GRANT SELECT ON document_acls, principal_groups TO manifold_query;

-- The current principal's groups (empty when none are recorded).
CREATE FUNCTION acl_principal_groups() RETURNS text[] LANGUAGE sql STABLE
    SET search_path = manifold, pg_temp AS $fn$
    SELECT coalesce((SELECT g.groups FROM manifold.principal_groups g
                     WHERE g.tenant_id = current_setting('manifold.tenant_id', true)
                       AND g.user_id = current_setting('manifold.principal', true)), '{}'::text[])
$fn$;

-- Documents whose ACL lets the current principal read them.
CREATE FUNCTION acl_granted() RETURNS SETOF text LANGUAGE sql STABLE
    SET search_path = manifold, pg_temp AS $fn$
    SELECT a.document_id FROM manifold.document_acls a
    WHERE a.tenant_id = current_setting('manifold.tenant_id', true)
      AND coalesce(current_setting('manifold.principal', true), '') <> ''
      AND (a.public OR current_setting('manifold.principal', true) = ANY (a.users)
           OR a.groups && manifold.acl_principal_groups())
$fn$;

-- Documents that have an ACL which does NOT let the current principal read them.
CREATE FUNCTION acl_hidden() RETURNS SETOF text LANGUAGE sql STABLE
    SET search_path = manifold, pg_temp AS $fn$
    SELECT a.document_id FROM manifold.document_acls a
    WHERE a.tenant_id = current_setting('manifold.tenant_id', true)
      AND NOT (coalesce(current_setting('manifold.principal', true), '') <> ''
               AND (a.public OR current_setting('manifold.principal', true) = ANY (a.users)
                    OR a.groups && manifold.acl_principal_groups()))
$fn$;

GRANT EXECUTE ON FUNCTION acl_principal_groups(), acl_granted(), acl_hidden() TO manifold_query, manifold_ingest;

CREATE POLICY acl_readable ON version_manifest AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN version_manifest.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE version_manifest.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON chunks AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN chunks.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE chunks.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON chunk_vectors AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN chunk_vectors.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE chunk_vectors.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON text_chunks AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN text_chunks.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE text_chunks.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON text_terms AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN text_terms.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE text_terms.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON graph_mentions AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN graph_mentions.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE graph_mentions.document_id IN (SELECT manifold.acl_granted()) END);
CREATE POLICY acl_readable ON graph_edges AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN graph_edges.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE graph_edges.document_id IN (SELECT manifold.acl_granted()) END);

-- The serving views run with their owner's rights, so the query role's policies above do not
-- reach through them: each view carries the same predicate for the query role itself.
CREATE OR REPLACE VIEW serving_document_versions WITH (security_barrier) AS
    SELECT t.* FROM document_versions t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active'
      AND (current_user <> 'manifold_query' OR (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN t.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE t.document_id IN (SELECT manifold.acl_granted()) END));
CREATE OR REPLACE VIEW serving_sections WITH (security_barrier) AS
    SELECT t.* FROM sections t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active'
      AND (current_user <> 'manifold_query' OR (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN t.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE t.document_id IN (SELECT manifold.acl_granted()) END));
CREATE OR REPLACE VIEW serving_chunks WITH (security_barrier) AS
    SELECT t.* FROM chunks t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active'
      AND (current_user <> 'manifold_query' OR (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN t.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE t.document_id IN (SELECT manifold.acl_granted()) END));
CREATE OR REPLACE VIEW serving_records WITH (security_barrier) AS
    SELECT t.* FROM records t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active'
      AND (current_user <> 'manifold_query' OR (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN t.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE t.document_id IN (SELECT manifold.acl_granted()) END));
CREATE OR REPLACE VIEW serving_record_lines WITH (security_barrier) AS
    SELECT t.* FROM record_lines t
    JOIN version_manifest m USING (tenant_id, document_id, version)
    WHERE m.state = 'active'
      AND (current_user <> 'manifold_query' OR (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND CASE WHEN current_setting('manifold.acl_default', true) = 'tenant'
                    THEN t.document_id NOT IN (SELECT manifold.acl_hidden())
                    ELSE t.document_id IN (SELECT manifold.acl_granted()) END));

RESET ROLE;
