"""Thin confluent-kafka helpers: client configs, topic creation, and a synchronous send.

Guarantees: producers are idempotent (`enable.idempotence`, `acks=all`); consumers never
auto-commit (the runner commits after effects are durable); `ensure_topics` is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from manifold.shared.errors import Transient


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
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 900_000,
        "partition.assignment.strategy": "cooperative-sticky",
    }


def ensure_topics(bootstrap: str, topics: Iterable[str], partitions: int) -> None:
    """Create any missing topic with `partitions` partitions (replication 1 on the local stack)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=15).topics)
    missing = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics if t not in existing]
    if not missing:
        return
    for topic, future in admin.create_topics(missing).items():
        try:
            future.result(timeout=30)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def send_sync(producer: Producer, topic: str, key: bytes | None, value: bytes,
              headers: list[tuple[str, bytes]] | None = None, timeout: float = 30.0) -> None:
    """Produce one message and wait until the broker acknowledged it; raise Transient if not."""
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
    if producer.flush(timeout) != 0:
        raise Transient(f"kafka did not acknowledge a message to {topic} within {timeout}s")
    if errors:
        raise Transient(f"kafka rejected a message to {topic}: {errors[0]}")


class DeliveryTracker:
    """Produces asynchronously and, on `flush`, waits for every acknowledgement since the last
    flush; raises Transient if any message was not acknowledged (the caller must not commit)."""

    def __init__(self, producer: Producer, timeout: float = 60.0) -> None:
        self.producer = producer
        self.timeout = timeout
        self._errors: list[KafkaError] = []

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self._errors.append(err)

    def produce(self, topic: str, key: bytes | None, value: bytes,
                headers: list[tuple[str, bytes]] | None = None) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers, on_delivery=self._on_delivery)
                return
            except BufferError:  # local queue full: let deliveries drain, then retry
                self.producer.poll(0.5)

    def flush(self) -> None:
        pending = self.producer.flush(self.timeout)
        errors, self._errors = self._errors, []
        if pending:
            raise Transient(f"kafka did not acknowledge {pending} message(s) within {self.timeout}s")
        if errors:
            raise Transient(f"kafka rejected {len(errors)} message(s): {errors[0]}")


REBALANCED = (KafkaError._ASSIGNMENT_LOST, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION,
              KafkaError.UNKNOWN_MEMBER_ID, KafkaError._NO_OFFSET)
"""Commit failures that mean "the group moved these partitions meanwhile", not a broken consumer."""


def commit_sync(consumer: Consumer, message: Message | None = None) -> bool:
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
