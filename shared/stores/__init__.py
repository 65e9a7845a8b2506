"""Store adapters, one module per backend, behind the ports in `manifold.shared.ports`.

- `manifest`: pure (id, content-hash) projections shared by the load stage (expected) and the
  adapters (recomputed from stored values), plus document validation.
- `pg_schema`: PostgreSQL migrations, roles and row-level security (`PG_SCHEMA_VERSION`).
- `postgres`: `PostgresRelationalStore`, `PostgresStagingStore`.
- `embedding_pg`: `PostgresEmbeddingStore` (embedding migration: configuration states, parallel
  vectors, verify and atomic activation).
- `elasticsearch`: `ElasticsearchTextIndex` (`ES_SCHEMA_VERSION`, `ES_INDEX`).
- `neo4j`: `Neo4jGraphStore` (`NEO4J_MODEL_VERSION`).

Importing this package imports no client library and connects to nothing; import the adapter
module you need in the composition root.
"""
