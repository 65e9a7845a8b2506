
-- Embedded profile: the text index and the graph as PostgreSQL tables (pg_text.py, pg_graph.py).
-- Same tenant_isolation policy (ENABLE + FORCE) as every tenant table. Readers: the ingest role
-- writes; the query role reads text_chunks, text_terms, graph_mentions and graph_edges directly
-- (the BM25 aggregation and the recursive traversal need the base tables' indexes, which a
-- security_barrier view would hide) under a RESTRICTIVE policy that keeps only rows of the
-- version that is ACTIVE in version_manifest: the same guarantee as migration 5 for chunks.
-- The per-row `serving` / `active` marks are the publisher's marks (like Elasticsearch's
-- `serving` and Neo4j's `active`), so the ServingMarks contract (set_serving, held_versions,
-- serving_drift) is the same on both profiles; readers filter on the mark AND the policy holds.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;

CREATE TABLE text_chunks (
    tenant_id text NOT NULL,
    chunk_id text NOT NULL,
    document_id text NOT NULL,
    version integer NOT NULL CHECK (version >= 1),
    section_id text NOT NULL,
    section_title text NOT NULL,
    section_title_terms text NOT NULL,
    section_path text[] NOT NULL,
    ordinal integer NOT NULL,
    kind text NOT NULL,
    text text NOT NULL,
    identifiers text[] NOT NULL DEFAULT '{}',
    content_sha256 char(64) NOT NULL,
    doc_content_sha256 char(64) NOT NULL,
    media_type text NOT NULL,
    parser_version text NOT NULL,
    chunker_version text NOT NULL,
    extraction_version text NOT NULL,
    text_schema_version text NOT NULL,
    config_fingerprint text NOT NULL,
    text_length integer NOT NULL CHECK (text_length >= 0),
    title_length integer NOT NULL CHECK (title_length >= 0),
    serving boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, chunk_id)
);
CREATE INDEX text_chunks_version_idx ON text_chunks (tenant_id, document_id, version);
CREATE INDEX text_chunks_serving_idx ON text_chunks (tenant_id) WHERE serving;
CREATE INDEX text_chunks_identifiers_idx ON text_chunks USING gin (identifiers);

-- Postings: one row per (chunk, field, term) with its term frequency.
CREATE TABLE text_terms (
    tenant_id text NOT NULL,
    chunk_id text NOT NULL,
    document_id text NOT NULL,
    version integer NOT NULL,
    field text NOT NULL CHECK (field IN ('text', 'title')),
    term text NOT NULL,
    tf integer NOT NULL CHECK (tf >= 1),
    PRIMARY KEY (tenant_id, term, field, chunk_id),
    FOREIGN KEY (tenant_id, chunk_id) REFERENCES text_chunks ON DELETE CASCADE
);
CREATE INDEX text_terms_chunk_idx ON text_terms (tenant_id, chunk_id);

CREATE TABLE graph_entities (
    tenant_id text NOT NULL,
    entity_id text NOT NULL,
    type text NOT NULL,
    label text NOT NULL,
    canonical_key text NOT NULL,
    name text NOT NULL,
    aliases text[] NOT NULL DEFAULT '{}',
    properties_json text NOT NULL,
    PRIMARY KEY (tenant_id, entity_id)
);
CREATE INDEX graph_entities_type_idx ON graph_entities (tenant_id, type);

CREATE TABLE graph_versions (
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL CHECK (version >= 1),
    content_sha256 char(64) NOT NULL,
    config_fingerprint text NOT NULL,
    graph_schema_version text NOT NULL,
    graph_model_version text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version)
);

CREATE TABLE graph_mentions (
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    mention_key text NOT NULL,
    entity_id text NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version, mention_key),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES graph_versions ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, entity_id) REFERENCES graph_entities
);
CREATE INDEX graph_mentions_entity_idx ON graph_mentions (tenant_id, entity_id);

CREATE TABLE graph_edges (
    tenant_id text NOT NULL, document_id text NOT NULL, version integer NOT NULL,
    relation_id text NOT NULL,
    type text NOT NULL CHECK (type ~ '^[A-Z][A-Z0-9_]{0,62}$' AND type <> 'MENTIONED_IN'),
    source_id text NOT NULL,
    target_id text NOT NULL,
    chunk_id text,
    record_id text,
    extraction_version text NOT NULL,
    valid_from date,
    valid_to date,
    properties_json text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, document_id, version, relation_id),
    FOREIGN KEY (tenant_id, document_id, version) REFERENCES graph_versions ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, source_id) REFERENCES graph_entities (tenant_id, entity_id),
    FOREIGN KEY (tenant_id, target_id) REFERENCES graph_entities (tenant_id, entity_id)
);
CREATE INDEX graph_edges_source_idx ON graph_edges (tenant_id, source_id, type);
CREATE INDEX graph_edges_target_idx ON graph_edges (tenant_id, target_id, type);

ALTER TABLE text_chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE text_chunks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON text_chunks
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE text_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE text_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON text_terms
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE graph_entities ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_entities FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON graph_entities
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE graph_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON graph_versions
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE graph_mentions ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_mentions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON graph_mentions
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

ALTER TABLE graph_edges ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_edges FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON graph_edges
    USING (tenant_id = current_setting('manifold.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('manifold.tenant_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON text_chunks, text_terms, graph_entities, graph_versions, graph_mentions, graph_edges TO manifold_ingest;

CREATE POLICY query_active_only ON text_chunks AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = text_chunks.tenant_id AND m.document_id = text_chunks.document_id
                     AND m.version = text_chunks.version AND m.state = 'active'));

CREATE POLICY query_active_only ON text_terms AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = text_terms.tenant_id AND m.document_id = text_terms.document_id
                     AND m.version = text_terms.version AND m.state = 'active'));

CREATE POLICY query_active_only ON graph_mentions AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = graph_mentions.tenant_id AND m.document_id = graph_mentions.document_id
                     AND m.version = graph_mentions.version AND m.state = 'active'));

CREATE POLICY query_active_only ON graph_edges AS RESTRICTIVE FOR SELECT TO manifold_query
    USING (EXISTS (SELECT 1 FROM version_manifest m
                   WHERE m.tenant_id = graph_edges.tenant_id AND m.document_id = graph_edges.document_id
                     AND m.version = graph_edges.version AND m.state = 'active'));

GRANT SELECT ON text_chunks, text_terms, graph_entities, graph_mentions, graph_edges TO manifold_query;
RESET ROLE;
