-- Embedded BM25 reads postings alone (issue 30, item 4).
--
-- Before: for every posting a question matched, the BM25 statement joined `text_chunks` for the
-- field's length and schema version, and each posting (and each joined chunk) ran the
-- correlated active-version EXISTS of migration 7; that was nearly all of its time.
-- Now:
-- 1. each posting carries its field's length (`field_length`: tokens of that field of its
--    chunk) and its chunk's `text_schema_version`, written with it (`PostgresTextIndex`); a
--    posting and its chunk are always written together (postings are replaced whenever the chunk
--    row changes, and never updated in place: migration 14 refuses it);
-- 2. the primary key carries what the statement reads (INCLUDE), so postings are read from the
--    index alone where the visibility map allows;
-- 3. the query role's active-version policy on postings is set-based: the tenant's active
--    (document, version) pairs are read once per statement and hashed (`active_versions()`,
--    whose fixed row estimate keeps the hashed plan), not probed once per posting. Same
--    predicate: `tenant_isolation` already holds every row to the transaction's tenant.
--    `text_chunks` keeps the per-row EXISTS: its readers fetch a few rows by key, where one
--    probe per row is cheaper than reading the tenant's manifest.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

ALTER TABLE text_terms ADD COLUMN field_length integer, ADD COLUMN text_schema_version text;

CREATE FUNCTION active_versions() RETURNS TABLE (document_id text, version integer) LANGUAGE sql STABLE
    ROWS 1000 SET search_path = manifold, pg_temp AS $fn$
    SELECT m.document_id, m.version FROM manifold.version_manifest m
    WHERE m.tenant_id = current_setting('manifold.tenant_id', true) AND m.state = 'active'
$fn$;

DROP POLICY query_active_only ON text_terms;
CREATE POLICY query_active_only ON text_terms AS RESTRICTIVE FOR SELECT TO manifold_query
    USING ((document_id, version) IN (SELECT a.document_id, a.version FROM manifold.active_versions() a));

-- Existing postings: filled once, as the superuser that runs migrations (row-level security
-- would hide every tenant's rows from the owner role); the refusal of in-place updates is
-- lifted for this statement only.
RESET ROLE;
ALTER TABLE manifold.text_terms DISABLE TRIGGER refuse_update;
UPDATE manifold.text_terms t
SET field_length = CASE t.field WHEN 'text' THEN c.text_length ELSE c.title_length END,
    text_schema_version = c.text_schema_version
FROM manifold.text_chunks c
WHERE c.tenant_id = t.tenant_id AND c.chunk_id = t.chunk_id;
ALTER TABLE manifold.text_terms ENABLE TRIGGER refuse_update;

SET LOCAL ROLE manifold_owner;
ALTER TABLE text_terms
    ALTER COLUMN field_length SET NOT NULL,
    ALTER COLUMN text_schema_version SET NOT NULL,
    ADD CONSTRAINT text_terms_field_length_check CHECK (field_length >= 1),
    DROP CONSTRAINT text_terms_pkey,
    ADD CONSTRAINT text_terms_pkey PRIMARY KEY (tenant_id, term, field, chunk_id)
        INCLUDE (tf, field_length, text_schema_version, document_id, version);
