
-- Tenant slugs holding anything in the embedded stores, for the reconciler's sweep (as known_tenants).
CREATE FUNCTION manifold.text_index_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = manifold, pg_temp
    AS $fn$ SELECT DISTINCT tenant_id FROM manifold.text_chunks $fn$;
CREATE FUNCTION manifold.graph_tenants() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = manifold, pg_temp
    AS $fn$ SELECT tenant_id FROM manifold.graph_versions UNION SELECT tenant_id FROM manifold.graph_entities $fn$;
REVOKE ALL ON FUNCTION manifold.text_index_tenants(), manifold.graph_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION manifold.text_index_tenants(), manifold.graph_tenants() TO manifold_ingest;
