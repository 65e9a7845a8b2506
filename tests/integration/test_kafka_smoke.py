"""Kafka is real: a topic is created, and a keyed message makes an idempotent round trip."""

from __future__ import annotations

import json

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_produce_consume_round_trip(kafka_bootstrap: str, unique) -> None:
    topic = unique("smoke.kafka")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        future.result(timeout=30)

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True, "acks": "all"})
    delivered: list[tuple[str, int]] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            raise KafkaException(err)
        delivered.append((msg.key().decode(), msg.partition()))

    payloads = [{"tenant": "t1", "doc": f"d{i}", "seq": i} for i in range(5)]
    for p in payloads:
        producer.produce(topic, key=b"t1/doc-1", value=json.dumps(p).encode(), on_delivery=on_delivery)
    assert producer.flush(30) == 0
    # One key, one partition: per-document ordering holds.
    assert len({part for _, part in delivered}) == 1

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique("smoke-group"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received = []
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is None:
                if len(received) == len(payloads):
                    break
                continue
            assert msg.error() is None, msg.error()
            received.append(json.loads(msg.value()))
            consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()
    assert received == payloads

    metadata = admin.list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3

