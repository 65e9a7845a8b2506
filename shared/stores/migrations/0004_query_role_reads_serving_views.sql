
-- Readers see only active versions: the query role reads the serving views, never base tables.
REVOKE SELECT ON manifold.documents, manifold.document_versions, manifold.sections, manifold.chunks,
    manifold.records, manifold.record_lines FROM manifold_query;
