
-- Embedded profile bus (shared/stores/pg_bus.py): a partitioned append-only log and consumer-group
-- offsets, Kafka's contract in two tables. Infrastructure like Kafka, not tenant data: no RLS;
-- only the ingestion role reads and writes it (the query role has no access).
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;
CREATE TABLE bus_messages (
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    "offset" bigint NOT NULL CHECK ("offset" >= 0),
    key bytea,
    value bytea NOT NULL,
    headers jsonb NOT NULL DEFAULT '[]',
    ts timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (topic, partition, "offset")
);
CREATE TABLE bus_offsets (
    group_id text NOT NULL,
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    "offset" bigint NOT NULL CHECK ("offset" >= 0),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_id, topic, partition)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON bus_messages, bus_offsets TO manifold_ingest;
RESET ROLE;
