
-- Erasure (SECURITY.md, deletes erase content): what a deleted document left outside the serving
-- stores must be findable by document, so gc can remove it with set-based statements.
SET LOCAL ROLE manifold_owner;
SET LOCAL search_path = manifold, public;
-- A stage payload's document and version, derived from its key `tenant/version/fingerprint/document`
-- (ingest/notices.py payload_key); NULL for a key of any other shape.
ALTER TABLE stage_payloads
    ADD COLUMN document_id text GENERATED ALWAYS AS (
        CASE WHEN key ~ '^[^/]+/[0-9]{1,9}/[^/]+/.' THEN regexp_replace(key, '^[^/]+/[0-9]+/[^/]+/', '') END) STORED,
    ADD COLUMN version integer GENERATED ALWAYS AS (
        CASE WHEN key ~ '^[^/]+/[0-9]{1,9}/[^/]+/.' THEN split_part(key, '/', 2)::integer END) STORED;
CREATE INDEX stage_payloads_document_idx ON stage_payloads (tenant_id, document_id, version);
-- The embedded bus: messages are found by key (`tenant/document`) for erasure, and each partition's
-- next offset is kept apart from the rows, so deleting a partition's newest messages never lets
-- an offset be handed out twice (a committed consumer would skip the reused one).
CREATE INDEX bus_messages_key_idx ON bus_messages (key);
CREATE TABLE bus_partitions (
    topic text NOT NULL,
    partition integer NOT NULL CHECK (partition >= 0),
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    PRIMARY KEY (topic, partition)
);
INSERT INTO bus_partitions (topic, partition, next_offset)
    SELECT topic, partition, max("offset") + 1 FROM bus_messages GROUP BY topic, partition;
GRANT SELECT, INSERT, UPDATE ON bus_partitions TO manifold_ingest;
RESET ROLE;
