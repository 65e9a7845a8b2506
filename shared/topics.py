"""The Kafka contract: topic names, partitions and what each carries (see README 'Topics')."""

from __future__ import annotations

DOCUMENTS = "manifold.documents"
STAGE_PARSED = "manifold.stage.parsed"
STAGE_CHUNKED = "manifold.stage.chunked"
STAGE_EMBEDDED = "manifold.stage.embedded"
STAGE_EXTRACTED = "manifold.stage.extracted"
PUBLISH = "manifold.publish"
DLQ = "manifold.dlq"
# Operator actions on DLQ entries (replayed / purged), keyed by DLQ entry id; written and created
# (compacted, 1 partition) by the `dlq` tool only, so deliberately not in PIPELINE_TOPICS.
DLQ_ACTIONS = "manifold.dlq.actions"

STAGE_SOURCES = {"parse": DOCUMENTS, "chunk": STAGE_PARSED, "embed": STAGE_CHUNKED, "extract": STAGE_EMBEDDED,
                 "load": STAGE_EXTRACTED, "publish": PUBLISH}
"""Each stage's source topic: the only topic a dead letter of that stage names, and so the only
topic the `dlq` tools (and the embedded profile's redelivery) replay it to."""

PIPELINE_TOPICS = (DOCUMENTS, STAGE_PARSED, STAGE_CHUNKED, STAGE_EMBEDDED, STAGE_EXTRACTED, PUBLISH, DLQ)
DEFAULT_PARTITIONS = 6

# Query request/reply (keyed by request id). Created by the query workers (and the client) with
# DEFAULT_PARTITIONS; a client may reply-to `QUERY_REPLIES + ".<suffix>"` (it creates that topic).
QUERY_REQUESTS = "manifold.query.requests"
QUERY_REPLIES = "manifold.query.replies"
QUERY_TOPICS = (QUERY_REQUESTS, QUERY_REPLIES)
