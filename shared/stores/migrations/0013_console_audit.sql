
-- Console audit (issue 31): one row per privileged action taken in the operator console (replay,
-- purge, re-run, reconcile): who, what, which filter, how many, and the result. Append-only for
-- the ingest role (no UPDATE or DELETE grant), per tenant under the same tenant_isolation policy
-- as every tenant table, so one tenant's operators never see another tenant's actions.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;
CREATE TABLE console_audit (
    audit_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    actor text NOT NULL,
    role text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    counts jsonb NOT NULL DEFAULT '{}'::jsonb,
    result text NOT NULL
);
CREATE INDEX console_audit_recent_idx ON console_audit (tenant_id, at DESC);

ALTER TABLE console_audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE console_audit FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON console_audit
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT ON console_audit TO manifold_ingest;
RESET ROLE;
