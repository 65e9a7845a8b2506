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


def test_faust_streaming_round_trip(kafka_bootstrap: str, unique) -> None:
    """faust-streaming (aiokafka underneath) works against the same broker."""
    import asyncio

    import faust

    topic_name = unique("smoke.faust")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)]).values():
        future.result(timeout=30)
    received: list[bytes] = []

    async def run() -> None:
        app = faust.App(
            unique("smoke-faust"),
            broker=f"kafka://{kafka_bootstrap}",
            store="memory://",
            web_enabled=False,
            topic_allow_declare=False,
            topic_disable_leader=True,
            loop=asyncio.get_running_loop(),
        )
        topic = app.topic(topic_name, value_type=bytes, value_serializer="raw")
        done = asyncio.Event()

        @app.agent(topic)
        async def collect(stream):
            async for value in stream:
                received.append(value)
                if len(received) == 3:
                    done.set()

        await app.start()
        try:
            for value in (b"a", b"b", b"c"):
                await topic.send(value=value)
            await asyncio.wait_for(done.wait(), timeout=60)
        finally:
            await app.stop()

    asyncio.run(run())
    assert received == [b"a", b"b", b"c"]
