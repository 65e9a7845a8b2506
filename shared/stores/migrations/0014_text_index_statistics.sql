-- Embedded BM25 statistics kept at publication (issue 30, item 4): the collection and term
-- statistics `PgBM25Executor` ranks with, maintained by the database itself in the transaction that
-- changes the rows they count, so a question reads them instead of aggregating the tenant.
--
-- Invariant, per (tenant, text_schema_version), for every code path (publish, retire, rewrite,
-- erase, tenant purge), because triggers on the counted tables maintain it:
--   text_stats(field): chunks = serving chunks whose field has at least one token,
--                      tokens = the total tokens of that field over the serving chunks;
--   text_df(field, term): chunks = serving chunks whose field holds the term.
-- A chunk counts while `serving` is true, under its own text_schema_version.
--
-- Who may read them: the query role only while nothing in the tenant is hidden from the
-- transaction's principal (the tenant default is 'tenant' and acl_hidden() is empty). Otherwise
-- the statistics would describe documents the reader may not see, so the rows are invisible and
-- the executor computes the statistics over what the reader can see (as before this migration).
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

CREATE TABLE text_stats (
    tenant_id text NOT NULL,
    text_schema_version text NOT NULL,
    field text NOT NULL CHECK (field IN ('text', 'title')),
    chunks bigint NOT NULL,
    tokens bigint NOT NULL,
    PRIMARY KEY (tenant_id, text_schema_version, field)
);

CREATE TABLE text_df (
    tenant_id text NOT NULL,
    text_schema_version text NOT NULL,
    term text NOT NULL,
    field text NOT NULL CHECK (field IN ('text', 'title')),
    chunks bigint NOT NULL,
    PRIMARY KEY (tenant_id, text_schema_version, term, field)
);

ALTER TABLE text_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE text_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON text_stats
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));
ALTER TABLE text_df ENABLE ROW LEVEL SECURITY;
ALTER TABLE text_df FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON text_df
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

CREATE POLICY whole_tenant_visible ON text_stats AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND current_setting('manifold.acl_default', true) = 'tenant'
           AND NOT EXISTS (SELECT 1 FROM manifold.acl_hidden()));
CREATE POLICY whole_tenant_visible ON text_df AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (coalesce(current_setting('manifold.principal', true), '') <> ''
           AND current_setting('manifold.acl_default', true) = 'tenant'
           AND NOT EXISTS (SELECT 1 FROM manifold.acl_hidden()));

GRANT SELECT, INSERT, UPDATE, DELETE ON text_stats, text_df TO manifold_ingest;
GRANT SELECT ON text_stats, text_df TO manifold_query;

-- Add `sign` times the contribution of each listed chunk (its lengths, and its postings as they
-- are now) to the statistics of its tenant and schema version. Rows are upserted in key order,
-- so two transactions never wait on each other's rows in opposite orders; term rows that reach
-- zero are removed.
CREATE FUNCTION text_stats_apply(tenants text[], chunk_ids text[], schemas text[], signs integer[],
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
    JOIN manifold.text_terms t ON t.tenant_id = d.tenant AND t.chunk_id = d.chunk
    GROUP BY d.tenant, d.schema, t.term, t.field
    HAVING sum(d.sign) <> 0
    ORDER BY d.tenant, d.schema, t.term, t.field
    ON CONFLICT (tenant_id, text_schema_version, term, field) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
    DELETE FROM manifold.text_df x
    USING (SELECT DISTINCT d.tenant, d.schema, t.term, t.field
           FROM unnest(tenants, chunk_ids, schemas, signs) AS d(tenant, chunk, schema, sign)
           JOIN manifold.text_terms t ON t.tenant_id = d.tenant AND t.chunk_id = d.chunk
           WHERE d.sign < 0) g
    WHERE x.tenant_id = g.tenant AND x.text_schema_version = g.schema AND x.term = g.term
      AND x.field = g.field AND x.chunks = 0;
$fn$;

-- text_chunks: a chunk's contribution changes when `serving`, its schema version or a length
-- changes (UPDATE, including the update half of an upsert), when it is inserted serving, and when
-- a serving chunk is deleted (BEFORE the delete, while its postings still exist; the postings'
-- cascade then finds no chunk and changes nothing).
CREATE FUNCTION text_chunks_stats_on_update() RETURNS trigger LANGUAGE plpgsql
    SET search_path = manifold, pg_temp AS $fn$
BEGIN
    PERFORM manifold.text_stats_apply(array_agg(d.tenant_id), array_agg(d.chunk_id), array_agg(d.schema),
                                      array_agg(d.sign), array_agg(d.tlen), array_agg(d.hlen))
    FROM (SELECT o.tenant_id, o.chunk_id, o.text_schema_version AS schema, -1 AS sign,
                 o.text_length AS tlen, o.title_length AS hlen
          FROM old_rows o JOIN new_rows n USING (tenant_id, chunk_id)
          WHERE o.serving AND (NOT n.serving OR (o.text_schema_version, o.text_length, o.title_length)
                               IS DISTINCT FROM (n.text_schema_version, n.text_length, n.title_length))
          UNION ALL
          SELECT n.tenant_id, n.chunk_id, n.text_schema_version, 1, n.text_length, n.title_length
          FROM old_rows o JOIN new_rows n USING (tenant_id, chunk_id)
          WHERE n.serving AND (NOT o.serving OR (o.text_schema_version, o.text_length, o.title_length)
                               IS DISTINCT FROM (n.text_schema_version, n.text_length, n.title_length))) d
    HAVING count(*) > 0;
    RETURN NULL;
END
$fn$;

CREATE FUNCTION text_chunks_stats_on_insert() RETURNS trigger LANGUAGE plpgsql
    SET search_path = manifold, pg_temp AS $fn$
BEGIN
    PERFORM manifold.text_stats_apply(array_agg(n.tenant_id), array_agg(n.chunk_id),
                                      array_agg(n.text_schema_version), array_agg(1),
                                      array_agg(n.text_length), array_agg(n.title_length))
    FROM new_rows n WHERE n.serving HAVING count(*) > 0;
    RETURN NULL;
END
$fn$;

CREATE FUNCTION text_chunks_stats_on_delete() RETURNS trigger LANGUAGE plpgsql
    SET search_path = manifold, pg_temp AS $fn$
BEGIN
    PERFORM manifold.text_stats_apply(ARRAY[OLD.tenant_id], ARRAY[OLD.chunk_id], ARRAY[OLD.text_schema_version],
                                      ARRAY[-1], ARRAY[OLD.text_length], ARRAY[OLD.title_length]);
    RETURN OLD;
END
$fn$;

-- text_terms: postings added to (+1) or removed from (-1) a SERVING chunk change its terms' counts.
-- The chunks are looked up once each, not once per posting: a write of chunks that do not serve
-- (the common case) costs one probe per chunk. A posting removed by a chunk's delete cascade
-- finds no chunk (the chunk's own trigger has already subtracted it).
CREATE FUNCTION text_terms_stats_on_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path = manifold, pg_temp AS $fn$
DECLARE
    sign integer := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
    touched bigint;
BEGIN
    INSERT INTO manifold.text_df AS x (tenant_id, text_schema_version, term, field, chunks)
    SELECT c.tenant_id, c.text_schema_version, p.term, p.field, sign * count(*)
    FROM changed_rows p
    JOIN (SELECT c.tenant_id, c.chunk_id, c.text_schema_version FROM manifold.text_chunks c
          WHERE c.serving AND (c.tenant_id, c.chunk_id) IN (SELECT DISTINCT tenant_id, chunk_id FROM changed_rows)) c
      ON c.tenant_id = p.tenant_id AND c.chunk_id = p.chunk_id
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, text_schema_version, term, field) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
    GET DIAGNOSTICS touched = ROW_COUNT;
    IF sign < 0 AND touched > 0 THEN
        DELETE FROM manifold.text_df x
        USING (SELECT DISTINCT c.tenant_id, c.text_schema_version, p.term, p.field
               FROM changed_rows p JOIN manifold.text_chunks c ON c.tenant_id = p.tenant_id AND c.chunk_id = p.chunk_id
               WHERE c.serving) d
        WHERE x.tenant_id = d.tenant_id AND x.text_schema_version = d.text_schema_version AND x.term = d.term
          AND x.field = d.field AND x.chunks = 0;
    END IF;
    RETURN NULL;
END
$fn$;

-- Postings are replaced (delete, insert), never updated in place: an UPDATE would bypass the
-- counts above, so it is refused.
CREATE FUNCTION text_terms_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION 'manifold.text_terms rows are replaced (DELETE, INSERT), never updated';
END
$fn$;

CREATE TRIGGER stats_on_update AFTER UPDATE ON text_chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_chunks_stats_on_update();
CREATE TRIGGER stats_on_insert AFTER INSERT ON text_chunks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_chunks_stats_on_insert();
CREATE TRIGGER stats_on_delete BEFORE DELETE ON text_chunks
    FOR EACH ROW WHEN (OLD.serving) EXECUTE FUNCTION text_chunks_stats_on_delete();
CREATE TRIGGER stats_on_insert AFTER INSERT ON text_terms
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_terms_stats_on_change();
CREATE TRIGGER stats_on_delete AFTER DELETE ON text_terms
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_terms_stats_on_change();
CREATE TRIGGER refuse_update BEFORE UPDATE ON text_terms
    FOR EACH STATEMENT EXECUTE FUNCTION text_terms_refuse_update();

-- Existing serving chunks: counted once, as the superuser that runs migrations (row-level
-- security would hide every tenant's rows from the owner role).
RESET ROLE;
INSERT INTO manifold.text_stats (tenant_id, text_schema_version, field, chunks, tokens)
SELECT c.tenant_id, c.text_schema_version, f.field, count(*) FILTER (WHERE f.len > 0), coalesce(sum(f.len), 0)
FROM manifold.text_chunks c
CROSS JOIN LATERAL (VALUES ('text', c.text_length), ('title', c.title_length)) AS f(field, len)
WHERE c.serving
GROUP BY c.tenant_id, c.text_schema_version, f.field;
INSERT INTO manifold.text_df (tenant_id, text_schema_version, term, field, chunks)
SELECT c.tenant_id, c.text_schema_version, t.term, t.field, count(*)
FROM manifold.text_terms t JOIN manifold.text_chunks c ON c.tenant_id = t.tenant_id AND c.chunk_id = t.chunk_id
WHERE c.serving
GROUP BY c.tenant_id, c.text_schema_version, t.term, t.field;
