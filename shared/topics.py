"""The Kafka contract: topic names, partitions and what each carries (see docs/ingestion.md 'Topics')."""

from __future__ import annotations

from dataclasses import dataclass

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



@dataclass(frozen=True)
class Stage:
    """One stage's place in the pipeline: the consumer group `manifold.<role>` reads `source`
    and writes its results to `sink` (None: the last stage)."""

    role: str
    source: str
    sink: str | None

    @property
    def group(self) -> str:
        return f"manifold.{self.role}"


TOPOLOGY: tuple[Stage, ...] = (
    Stage("parse", DOCUMENTS, STAGE_PARSED),  # a DocumentDeleted is forwarded to PUBLISH instead
    Stage("chunk", STAGE_PARSED, STAGE_CHUNKED),
    Stage("embed", STAGE_CHUNKED, STAGE_EMBEDDED),
    Stage("extract", STAGE_EMBEDDED, STAGE_EXTRACTED),
    Stage("load", STAGE_EXTRACTED, PUBLISH),
    Stage("publish", PUBLISH, None),
)
"""The stage topology, in pipeline order: the one place that says which role reads and writes
which topic (workers, the embedded pipeline, the DLQ tools and the benchmarks read it here)."""

ACL = "manifold.acl"
PRINCIPALS = "manifold.principals"
ACCESS: tuple[Stage, ...] = (
    Stage("acl", ACL, None),  # DocumentAclSet, keyed tenant/document (compacted)
    Stage("groups", PRINCIPALS, None),  # GroupsSet, keyed tenant/user (compacted)
)
"""The ACL applier's two roles (ingest/acl_applier.py): access events are their own streams,
beside the content pipeline, never part of a content version (issue 29)."""
ACCESS_TOPICS = (ACL, PRINCIPALS)

STAGES: dict[str, Stage] = {s.role: s for s in TOPOLOGY + ACCESS}

STAGE_SOURCES = {s.role: s.source for s in TOPOLOGY + ACCESS}
"""Each stage's source topic: the only topic a dead letter of that stage names, and so the only
topic the `dlq` tools (and the embedded profile's redelivery) replay it to."""

PIPELINE_TOPICS = (DOCUMENTS, STAGE_PARSED, STAGE_CHUNKED, STAGE_EMBEDDED, STAGE_EXTRACTED, PUBLISH, DLQ,
                   ACL, PRINCIPALS)
DEFAULT_PARTITIONS = 6

# Query request/reply (keyed by request id). Created by the query workers (and the client) with
# DEFAULT_PARTITIONS; a client may reply-to `QUERY_REPLIES + ".<suffix>"` (it creates that topic).
QUERY_REQUESTS = "manifold.query.requests"
QUERY_REPLIES = "manifold.query.replies"
QUERY_TOPICS = (QUERY_REQUESTS, QUERY_REPLIES)
