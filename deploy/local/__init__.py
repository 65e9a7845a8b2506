"""Local real-service stack: Kafka, Elasticsearch, Neo4j and PostgreSQL on loopback."""
