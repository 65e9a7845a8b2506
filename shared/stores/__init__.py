"""Store adapters, one module per backend, behind the ports in `manifold.shared.ports`.

- `manifest`: pure (id, content-hash) projections shared by the load stage (expected) and the
  adapters (recomputed from stored values), plus document validation.
- `pg_schema`: PostgreSQL migrations, roles and row-level security (`PG_SCHEMA_VERSION`).
- `pg_connections`: `TenantConnections` (tenant-scoped transactions as `manifold_ingest`);
  `pg_relational`: `PostgresRelationalStore`; `pg_staging`: `PostgresStagingStore`.
- `embedding_pg`: `PostgresEmbeddingStore` (embedding migration: configuration states, parallel
  vectors, verify and atomic activation).
- `elasticsearch`: `ElasticsearchTextIndex`; `es_mapping`: its schema (`ES_SCHEMA_VERSION`,
  `ES_INDEX`, `ES_ALIAS`); `es_serving`: its serving marks; `es_errors`: faults as `Transient`.
- `neo4j`: `Neo4jGraphStore`; `neo4j_cypher`: the graph model (`NEO4J_MODEL_VERSION`) and its
  Cypher.

Importing this package imports no client library and connects to nothing; import the adapter
module you need in the composition root.
"""
