"""The Kafka adapter of the bus port (`shared/messaging.py`): confluent-kafka's `Consumer` and
`Producer` ARE the adapter; this module configures them and adds topic creation, a synchronous
send, the commit policy and the lag of a consumer.

Guarantees: producers are idempotent (`enable.idempotence`, `acks=all`); consumers never
auto-commit (the runner commits after effects are durable); `ensure_topics` is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from manifold.shared import messaging, topics
from manifold.shared.messaging import send_and_wait


def producer_config(bootstrap: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.max.bytes": 1_000_000,
    }


def consumer_config(bootstrap: str, group_id: str, client_id: str) -> dict[str, Any]:
    """librdkafka's default session timeout (45 s) is kept on purpose: a member killed without
    leaving holds its partitions that long (publication stalled ~50 s after worker kills in the
    10k fault run), but with 10 s a broker restart of ~20 s expired every session, and one
    publish consumer never rejoined (its coordinator request stuck in the out-queue, the group
    empty for 10+ minutes; SECURITY.md). Heartbeats come from librdkafka's own thread;
    `max.poll.interval.ms` bounds a long batch (15 min)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 900_000,
        "partition.assignment.strategy": "cooperative-sticky",
    }


def ensure_topics(bootstrap: str, topics: Iterable[str], partitions: int,
                  configs: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Create any missing topic with `partitions` partitions (replication 1 on the local stack).
    A topic named in `configs` is created with those topic configs, and an existing one has them
    set (incrementally: other configs stay), so a retention bound also reaches older topics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = configs or {}
    existing = set(admin.list_topics(timeout=15).topics)
    missing = [NewTopic(t, num_partitions=partitions, replication_factor=1, config=dict(configs.get(t, {})))
               for t in topics if t not in existing]
    created: set[str] = set()
    for topic, future in (admin.create_topics(missing).items() if missing else ()):
        try:
            future.result(timeout=30)
            created.add(topic)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    present = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(configs[t].items())])
        for t in dict.fromkeys(topics) if t not in created and configs.get(t)]
    for _resource, future in (admin.incremental_alter_configs(present).items() if present else ()):
        future.result(timeout=30)


def pipeline_topic_configs(kafka: Any) -> dict[str, dict[str, str]]:
    """Topic configs that bound how long content can live in the Kafka log (README 'Erasure').

    Only `manifold.documents` (inline content of upserts) and `manifold.dlq` (dead letters keep
    the original message) can carry document bytes; stage and publish topics carry claim-check
    references (ingest/notices.py), whose content lives in PostgreSQL where gc erases it. Each
    topic rolls a segment at least daily, so a record is deleted at most `retention.ms` plus one
    day (plus the broker's 5-minute retention check) after it was written."""
    day = 24 * 3600 * 1000

    def bounded(retention_ms: int) -> dict[str, str]:
        return {"cleanup.policy": "delete", "retention.ms": str(retention_ms),
                "segment.ms": str(min(retention_ms, day))}

    content, notices = bounded(kafka.content_retention_ms), bounded(kafka.notice_retention_ms)
    # Access events (no content): compacted, so the latest ACL / membership per key is kept for
    # good and a rebuilt applier can replay the whole state from the topic.
    compacted = {"cleanup.policy": "compact"}
    return {topics.DOCUMENTS: content, topics.DLQ: content, topics.ACL: compacted, topics.PRINCIPALS: compacted,
            **{t: notices for t in (topics.STAGE_PARSED, topics.STAGE_CHUNKED, topics.STAGE_EMBEDDED,
                                    topics.STAGE_EXTRACTED, topics.PUBLISH)}}


def send_sync(producer: Producer, topic: str, key: bytes | None, value: bytes,
              headers: list[tuple[str, bytes]] | None = None, timeout: float = 30.0) -> None:
    """Produce one message and wait until the broker acknowledged it; raise Transient if not
    (`messaging.send_and_wait`, the one produce-and-wait implementation)."""
    send_and_wait(producer, topic, key, value, headers, timeout, bus="kafka")  # type: ignore[arg-type]  # confluent_kafka's stubs: invariant list headers, overloaded commit vs the bus port


REBALANCED = (KafkaError._ASSIGNMENT_LOST, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION,
              KafkaError.UNKNOWN_MEMBER_ID, KafkaError._NO_OFFSET)
"""Commit failures that mean "the group moved these partitions meanwhile", not a broken consumer."""


def commit_sync(consumer: messaging.Consumer, message: messaging.Message | None = None) -> bool:
    """Commit synchronously (the consumer's positions, or just past `message`); False if the
    group took the partitions away meanwhile (a rebalance raced the commit, or this member was
    paused past its session timeout). Then the commit is lost, not the work: the new owner
    re-delivers from the last committed offset, and handlers are idempotent. Anything else raises."""
    try:
        if message is None:
            consumer.commit(asynchronous=False)
        else:
            consumer.commit(message=message, asynchronous=False)
    except KafkaException as exc:
        code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
        if code not in REBALANCED:
            raise
        return False
    return True


def consumer_lag(consumer: Consumer) -> int:
    """Messages on the partitions assigned to `consumer` past its positions (for the lag gauge).

    Reads the watermarks the consumer already holds from its last fetch responses (no broker
    round trip, so the consume loop that calls it never waits on it); only a partition not yet
    fetched asks the broker, with a 1 s timeout. A gauge, so it may trail by one fetch."""
    assigned: list[TopicPartition] = consumer.assignment()
    lag = 0
    for tp in consumer.position(assigned) if assigned else []:
        low, high = consumer.get_watermark_offsets(tp, cached=True)
        if high < 0:  # nothing fetched from this partition yet
            low, high = consumer.get_watermark_offsets(tp, timeout=1, cached=False)
        lag += max(0, high - (tp.offset if tp.offset >= 0 else max(low, 0)))
    return lag


def group_lags(bootstrap: str, sources: Mapping[str, str], timeout_s: float = 5.0) -> dict[str, int]:
    """Messages not yet committed by each consumer group `manifold.<role>` on its source topic
    (`sources`: role -> topic), from the broker's committed offsets and watermarks; -1 for a role
    whose lag cannot be read (a broker or coordinator that does not answer in time). Read only:
    it joins no group and commits nothing."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "manifold-lag-probe",
                      "enable.auto.commit": False})
    out: dict[str, int] = {}
    try:
        for role, topic in sources.items():
            try:
                meta = probe.list_topics(topic, timeout=timeout_s)
                parts = [TopicPartition(topic, p) for p in meta.topics[topic].partitions]
                futures = admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(f"manifold.{role}", parts)], request_timeout=timeout_s)
                committed = next(iter(futures.values())).result(timeout=timeout_s)
                lag = 0
                for tp in committed.topic_partitions:
                    _low, high = probe.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout_s)
                    lag += high - (tp.offset if tp.offset >= 0 else 0)
                out[role] = lag
            except Exception:  # noqa: BLE001 - a lag probe during an outage is just unknown
                out[role] = -1
    finally:
        probe.close()
    return out
