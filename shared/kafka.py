"""The Kafka adapter of the bus port (`shared/messaging.py`): confluent-kafka's `Consumer` and
`Producer` ARE the adapter; this module configures them and adds topic creation, a synchronous
send, the commit policy, the lag of a consumer and of a group, and a group's view of a member.

Guarantees: producers are idempotent (`enable.idempotence`, `acks=all`); consumers never
auto-commit (the runner commits after effects are durable); `ensure_topics` is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


SESSION_TIMEOUT_S = 45.0
"""The consumers' `session.timeout.ms`: librdkafka's default, kept on purpose (`consumer_config`)."""


def consumer_config(bootstrap: str, group_id: str, client_id: str) -> dict[str, Any]:
    """librdkafka's default session timeout (45 s, `SESSION_TIMEOUT_S`) is kept on purpose: a
    member killed without leaving holds its partitions that long (publication stalled ~50 s after
    worker kills in the 10k fault run), but with 10 s a broker restart of ~20 s expired every
    session, and one publish consumer never rejoined (its coordinator request stuck in the
    out-queue, the group empty for 10+ minutes; SECURITY.md). An outage longer than the session
    can still do that: the stage runner's rejoin watchdog (`shared/rejoin.py`) rebuilds such a
    consumer. Heartbeats come from librdkafka's own thread; `max.poll.interval.ms` bounds a long
    batch (15 min)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": int(SESSION_TIMEOUT_S * 1000),
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
    """Topic configs that bound how long content can live in the Kafka log (docs/lifecycle.md 'Erasure').

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
    (`sources`: role -> topic; see `group_lag`); -1 for a role whose lag cannot be read (a broker
    or coordinator that does not answer in time). Read only: it joins no group and commits nothing."""
    admin, probe = _lag_clients(bootstrap)
    try:
        return {role: _uncommitted(admin, probe, f"manifold.{role}", [topic], timeout_s)
                for role, topic in sources.items()}
    finally:
        probe.close()


def group_lag(bootstrap: str, group: str, topics: Sequence[str], timeout_s: float = 5.0) -> int:
    """Messages on `topics` not yet committed by consumer group `group`: per partition, the high
    watermark minus the group's committed offset (or the low watermark where the group committed
    none, or less than what retention kept); -1 when it cannot be read (a broker or coordinator
    that does not answer within `timeout_s` per request). Read only: it joins no group and
    commits nothing."""
    admin, probe = _lag_clients(bootstrap)
    try:
        return _uncommitted(admin, probe, group, topics, timeout_s)
    finally:
        probe.close()


def member_partitions(bootstrap: str, group: str, member_id: str, timeout_s: float = 5.0) -> int | None:
    """How many partitions the coordinator of `group` has assigned to the member `member_id`, or
    None when it lists no such member (its session expired, or it never joined). Read only.
    Raises (`KafkaException`, a timeout) when the coordinator cannot be asked."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_consumer_groups([group], request_timeout=timeout_s).values()
    for member in future.result(timeout=timeout_s).members:
        if member_id and member.member_id == member_id:
            return len(member.assignment.topic_partitions)
    return None


def _lag_clients(bootstrap: str) -> tuple[AdminClient, Consumer]:
    """An admin client (committed offsets) and a probe consumer (metadata, watermarks) that
    never subscribes, so it joins no group."""
    return (AdminClient({"bootstrap.servers": bootstrap}),
            Consumer({"bootstrap.servers": bootstrap, "group.id": "manifold-lag-probe", "enable.auto.commit": False}))


def _uncommitted(admin: AdminClient, probe: Consumer, group: str, topics: Sequence[str], timeout_s: float) -> int:
    """`group_lag` with the clients given; -1 when anything cannot be read."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    try:
        lag = 0
        for topic in topics:
            meta = probe.list_topics(topic, timeout=timeout_s)
            parts = [TopicPartition(topic, p) for p in meta.topics[topic].partitions]
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, parts)], request_timeout=timeout_s)
            committed = next(iter(futures.values())).result(timeout=timeout_s)
            for tp in committed.topic_partitions:
                low, high = probe.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout_s)
                lag += max(0, high - max(tp.offset, low))
        return lag
    except Exception:  # noqa: BLE001 - a lag probe during an outage is just unknown
        return -1
