-- The BM25 statistics triggers of migration 14, with plans that do not depend on the planner's
-- statistics of a tenant (issue 30, ingestion throughput).
--
-- Before: `text_stats_apply` joined the listed chunks to `text_terms`, and the postings trigger
-- joined the changed postings to `text_chunks`, as plain joins. For a tenant that autovacuum had
-- not analysed yet (every tenant during its first ingestion), the planner estimated one row for
-- the tenant and scanned ALL of the tenant's postings once per listed chunk (or all of its chunks
-- once per changed posting): the serving flip of a 64-document batch took 430-600 ms instead of
-- ~35 ms, growing with the tenant (quadratic over a first ingestion).
-- Now: each listed chunk's postings are read through a LATERAL subquery fenced with OFFSET 0
-- (never flattened into a join the planner could reorder), so the work is one index probe per
-- chunk whatever the statistics say; the postings trigger first finds which changed chunks
-- serve (one probe per distinct chunk) and returns at once when none does (a load of new,
-- non-serving versions: the common case). The counts they maintain are the same.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

CREATE OR REPLACE FUNCTION text_stats_apply(tenants text[], chunk_ids text[], schemas text[], signs integer[],
                                            text_lengths integer[], title_lengths integer[])
    RETURNS void LANGUAGE sql VOLATILE SET search_path = manifold, pg_temp AS $fn$
    INSERT INTO manifold.text_stats AS s (tenant_id, text_schema_version, field, chunks, tokens)
    SELECT d.tenant, d.schema, f.field, sum(d.sign * (f.len > 0)::int), sum(d.sign * f.len)
    FROM unnest(tenants, chunk_ids, schemas, signs, text_lengths, title_lengths)
         AS d(tenant, chunk, schema, sign, tlen, hlen)
    CROSS JOIN LATERAL (VALUES ('text', d.tlen), ('title', d.hlen)) AS f(field, len)
    GROUP BY d.tenant, d.schema, f.field
    ORDER BY d.tenant, d.schema, f.field
    ON CONFLICT (tenant_id, text_schema_version, field)
        DO UPDATE SET chunks = s.chunks + EXCLUDED.chunks, tokens = s.tokens + EXCLUDED.tokens;
    INSERT INTO manifold.text_df AS x (tenant_id, text_schema_version, term, field, chunks)
    SELECT d.tenant, d.schema, t.term, t.field, sum(d.sign)
    FROM unnest(tenants, chunk_ids, schemas, signs) AS d(tenant, chunk, schema, sign)
    CROSS JOIN LATERAL (SELECT p.term, p.field FROM manifold.text_terms p
                        WHERE p.tenant_id = d.tenant AND p.chunk_id = d.chunk OFFSET 0) t
    GROUP BY d.tenant, d.schema, t.term, t.field
    HAVING sum(d.sign) <> 0
    ORDER BY d.tenant, d.schema, t.term, t.field
    ON CONFLICT (tenant_id, text_schema_version, term, field) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
    DELETE FROM manifold.text_df x
    USING (SELECT DISTINCT d.tenant, d.schema, t.term, t.field
           FROM unnest(tenants, chunk_ids, schemas, signs) AS d(tenant, chunk, schema, sign)
           CROSS JOIN LATERAL (SELECT p.term, p.field FROM manifold.text_terms p
                               WHERE p.tenant_id = d.tenant AND p.chunk_id = d.chunk OFFSET 0) t
           WHERE d.sign < 0) g
    WHERE x.tenant_id = g.tenant AND x.text_schema_version = g.schema AND x.term = g.term
      AND x.field = g.field AND x.chunks = 0;
$fn$;

CREATE OR REPLACE FUNCTION text_terms_stats_on_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path = manifold, pg_temp AS $fn$
DECLARE
    sign integer := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
    tenant_ids text[];
    chunk_ids text[];
    schemas text[];
    touched bigint;
BEGIN
    -- which of the changed postings' chunks serve: one probe per distinct chunk
    SELECT array_agg(c.tenant_id), array_agg(c.chunk_id), array_agg(c.text_schema_version)
    INTO tenant_ids, chunk_ids, schemas
    FROM (SELECT DISTINCT tenant_id, chunk_id FROM changed_rows) k
    CROSS JOIN LATERAL (SELECT c.tenant_id, c.chunk_id, c.text_schema_version FROM manifold.text_chunks c
                        WHERE c.tenant_id = k.tenant_id AND c.chunk_id = k.chunk_id AND c.serving OFFSET 0) c;
    IF chunk_ids IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO manifold.text_df AS x (tenant_id, text_schema_version, term, field, chunks)
    SELECT s.tenant_id, s.text_schema_version, p.term, p.field, sign * count(*)
    FROM unnest(tenant_ids, chunk_ids, schemas) AS s(tenant_id, chunk_id, text_schema_version)
    JOIN changed_rows p ON p.tenant_id = s.tenant_id AND p.chunk_id = s.chunk_id
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, text_schema_version, term, field) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
    GET DIAGNOSTICS touched = ROW_COUNT;
    IF sign < 0 AND touched > 0 THEN
        DELETE FROM manifold.text_df x
        USING (SELECT DISTINCT s.tenant_id, s.text_schema_version, p.term, p.field
               FROM unnest(tenant_ids, chunk_ids, schemas) AS s(tenant_id, chunk_id, text_schema_version)
               JOIN changed_rows p ON p.tenant_id = s.tenant_id AND p.chunk_id = s.chunk_id) d
        WHERE x.tenant_id = d.tenant_id AND x.text_schema_version = d.text_schema_version AND x.term = d.term
          AND x.field = d.field AND x.chunks = 0;
    END IF;
    RETURN NULL;
END
$fn$;
