-- Embedded BM25 reads each query term's postings best first, and only the first ones of a long
-- list (issue 30, item 4).
--
-- Before: a question read every posting of every query term (a frequent term of a 50,000-chunk
-- tenant has tens of thousands), so its cost grew with the tenant: p95 213 ms at 58,000 chunks.
-- Now: a second index on the postings orders each (tenant, term, field) list by the posting's
-- BM25 term-frequency factor at a reference field length (`bm25_impact`), and the statement
-- (`query/executors/pg_lexical.py`) reads at most `query.bm25_postings_depth` postings per term
-- and field in that order. A list no longer than the depth is read whole, as before; of a longer
-- one (a term in more chunks than the depth: the least informative terms) only the postings
-- that would add the most to a chunk's score are read. Scores are still computed from the kept
-- statistics and each posting's exact field length; the reference lengths only order a list.
-- The key ends with chunk_id, so the cut is deterministic. Row-level security applies inside the
-- scan: a posting the reader may not see never takes a place in the first `depth`.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

-- BM25's term-frequency factor tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / ref)), k1 = 1.2,
-- b = 0.75, at a fixed reference length per field (about a chunk's and a title's analysed
-- tokens), so the order of a list does not move when the tenant's average length does.
CREATE FUNCTION bm25_impact(field text, tf integer, field_length integer) RETURNS float8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN
    tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * field_length / CASE field WHEN 'title' THEN 6.0 ELSE 60.0 END));

CREATE INDEX text_terms_impact_idx ON text_terms
    (tenant_id, term, field, text_schema_version, bm25_impact(field, tf, field_length) DESC, chunk_id)
    INCLUDE (tf, field_length, document_id, version);

-- The postings' active-version policy reads the tenant's active (document, version) pairs once
-- per scan (`active_versions()`, migration 15). Without an index holding both columns that read
-- was a scan of the manifest's heap (about 1 KB a row): 10 ms at 15,000 documents, paid twice by
-- the statement above. With this partial index it is read from the index alone.
CREATE INDEX version_manifest_active_pairs ON version_manifest (tenant_id) INCLUDE (document_id, version)
    WHERE state = 'active';
