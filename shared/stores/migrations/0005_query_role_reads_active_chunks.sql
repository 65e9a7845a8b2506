
-- pgvector can only use the HNSW index when the query reads `chunks` itself (through the
-- security_barrier view the ORDER BY ... LIMIT stays a subquery and becomes a full scan). So the
-- query role may read `chunks` directly, but a RESTRICTIVE policy (AND-ed with tenant_isolation)
-- holds it to rows of the ACTIVE version in the manifest: the same guarantee as serving_chunks.
SET LOCAL ROLE manifold_owner;
CREATE POLICY query_active_only ON manifold.chunks AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM manifold.version_manifest m
                   WHERE m.tenant_id = chunks.tenant_id AND m.document_id = chunks.document_id
                     AND m.version = chunks.version AND m.state = 'active'));
GRANT SELECT ON manifold.chunks TO manifold_query;
RESET ROLE;
