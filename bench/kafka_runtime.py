"""Which runtime should stage workers use? Measures a pass-through stage on the real broker.

Both variants read N messages from one topic and write each to another, with at-least-once
semantics as each library provides them:
- confluent-kafka: manifold's own `StageRunner` (consume a batch → handle → produce → wait for
  every ack → commit synchronously), i.e. commit only after the effects are durable;
- faust-streaming: an agent that forwards each value with `await topic.send()`; faust acks
  the event after the agent step and commits acked offsets in the background.

Usage: .venv/bin/python bench/kafka_runtime.py [--messages 3000]
(the stack must be up; uses MANIFOLD_* settings). faust-streaming is not part of the locked
install: `.venv/bin/python -m pip install -e '.[bench]'` (or `faust-streaming==0.15.3`) first. Writes bench/results/kafka_runtime.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from manifold.ingest.runner import Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared.config import ManifoldSettings
from manifold.shared.kafka import consumer_config, producer_config


def _topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, num_partitions=3, replication_factor=1) for n in names]).values():
        f.result(30)


def _fill(bootstrap: str, topic: str, n: int) -> None:
    p = Producer(producer_config(bootstrap, "bench-fill"))
    for i in range(n):
        p.produce(topic, key=f"t/doc-{i % 97}".encode(), value=json.dumps({"i": i, "pad": "x" * 200}).encode())
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


def _count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4()}"})
    from confluent_kafka import TopicPartition

    total = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.topics[topic].partitions)
    c.close()
    return total


def bench_confluent(bootstrap: str, n: int) -> float:
    src, dst = f"bench.cf.src.{uuid.uuid4().hex[:6]}", f"bench.cf.dst.{uuid.uuid4().hex[:6]}"
    _topics(bootstrap, src, dst)
    _fill(bootstrap, src, n)
    consumer = Consumer(consumer_config(bootstrap, f"bench-{uuid.uuid4().hex[:6]}", "bench"))
    producer = Producer(producer_config(bootstrap, "bench"))
    seen = 0
    t0: float | None = None
    stop = threading.Event()

    def step(value: bytes) -> bytes:
        nonlocal seen, t0
        t0 = t0 or time.perf_counter()
        seen += 1
        if seen >= n:
            stop.set()
        return value

    spec = StageSpec(name="bench", source=src, decode=lambda raw: raw, step=step,
                     route=lambda value: Output(dst, b"k", value))
    StageRunner(spec, consumer, producer, RetryPolicy()).run(stop)
    elapsed = time.perf_counter() - (t0 or 0)
    assert _count(bootstrap, dst) == n
    return n / elapsed


def bench_faust(bootstrap: str, n: int) -> float:
    import faust

    src, dst = f"bench.fa.src.{uuid.uuid4().hex[:6]}", f"bench.fa.dst.{uuid.uuid4().hex[:6]}"
    _topics(bootstrap, src, dst)
    _fill(bootstrap, src, n)
    seen = 0
    t0: float | None = None

    async def run() -> float:
        nonlocal seen, t0
        app = faust.App(f"bench-{uuid.uuid4().hex[:6]}", broker=f"kafka://{bootstrap}", store="memory://",
                        web_enabled=False, topic_allow_declare=False, topic_disable_leader=True,
                        loop=asyncio.get_running_loop())
        source = app.topic(src, value_serializer="raw", key_serializer="raw")
        sink = app.topic(dst, value_serializer="raw", key_serializer="raw")
        done = asyncio.Event()

        @app.agent(source)
        async def forward(stream):
            nonlocal seen, t0
            async for event in stream.events():
                t0 = t0 or time.perf_counter()
                await sink.send(key=event.key, value=event.value)
                seen += 1
                if seen >= n:
                    done.set()

        await app.start()
        await asyncio.wait_for(done.wait(), timeout=600)
        elapsed = time.perf_counter() - (t0 or 0)
        await app.stop()
        return elapsed

    elapsed = asyncio.run(run())
    time.sleep(1)
    assert _count(bootstrap, dst) >= n
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=3000)
    args = ap.parse_args()
    bootstrap = ManifoldSettings().kafka.bootstrap_servers
    result = {
        "messages": args.messages,
        "confluent_kafka_msgs_per_s": round(bench_confluent(bootstrap, args.messages), 1),
        "faust_streaming_msgs_per_s": round(bench_faust(bootstrap, args.messages), 1),
        "note": "confluent: manifold StageRunner, batches of 16, all acks then a synchronous commit; "
        "faust: agent forwarding with await send(), background commits of acked offsets",
    }
    out = Path(__file__).parent / "results" / "kafka_runtime.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
