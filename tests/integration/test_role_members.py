"""Two members of one role (two `StageRunner`s in one consumer group, as `manifold workers
--processes 2` starts them) share a topic's partitions: every message is handled exactly once,
and both members do part of the work."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

from manifold.ingest.runner import BatchPolicy, Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared.kafka import consumer_config, ensure_topics, producer_config

MESSAGES = 60


class Member:
    """A consumer that reports when the group has given it partitions (the runner subscribes)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self.assigned = threading.Event()

    def subscribe(self, topics: list[str]) -> None:
        def on_assign(consumer: Consumer, partitions: list[Any]) -> None:
            if partitions:
                self.assigned.set()

        self._consumer.subscribe(topics, on_assign=on_assign)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def _never(_: object) -> Output:
    raise AssertionError("nothing downstream")


def test_two_members_of_a_role_share_the_partitions_without_duplicates(kafka_bootstrap: str,
                                                                      unique: Callable[[str], str]) -> None:
    topic, group = unique("members-topic"), unique("members-group")
    ensure_topics(kafka_bootstrap, [topic], 4)
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def handler(member: str) -> Callable[[str], None]:
        def step(value: str) -> None:
            with lock:
                seen.append((member, value))

        return step

    stop = threading.Event()
    members, threads = [], []
    for name in ("m0", "m1"):
        consumer = Member(Consumer(consumer_config(kafka_bootstrap, group, f"{group}-{name}")))
        spec = StageSpec(name, topic, lambda raw: raw.decode(), handler(name), _never, none_means="done")
        runner = StageRunner(spec, consumer, Producer(producer_config(kafka_bootstrap, f"{group}-{name}")),  # type: ignore[arg-type]
                             RetryPolicy(max_attempts=2, initial_s=0.05), BatchPolicy(max_messages=8, linger_s=0.1))
        members.append(consumer)
        threads.append(threading.Thread(target=runner.run, args=(stop,), daemon=True))
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not all(m.assigned.is_set() for m in members):
            time.sleep(0.2)
        assert all(m.assigned.is_set() for m in members), "the group did not give both members partitions"
        time.sleep(2)  # let the cooperative rebalance settle
        producer = Producer(producer_config(kafka_bootstrap, f"{group}-producer"))
        for i in range(MESSAGES):
            producer.produce(topic, key=f"doc-{i}".encode(), value=f"m{i}".encode())
        assert producer.flush(30) == 0
        while time.monotonic() < deadline and len(seen) < MESSAGES:
            time.sleep(0.2)
        time.sleep(1)  # anything handled twice would show up now
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    values = [v for _, v in seen]
    assert sorted(values) == sorted(f"m{i}" for i in range(MESSAGES))  # each exactly once
    assert {m for m, _ in seen} == {"m0", "m1"}  # both members did part of the work
