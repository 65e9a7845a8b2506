"""The rejoin watchdog against the real Kafka: a stage runner whose consumer is permanently out of
its group (alive, subscribed, no partitions, unknown to the coordinator) gets a rebuilt consumer,
and the messages produced meanwhile are handled.

How the consumer is put out of its group, deterministically: it joins with a static
`group.instance.id`, and an intruder joins with the same id. The coordinator fences the first
(librdkafka: a fatal error; the consumer stays open, with no assignment, and never rejoins: the
same state as the publish consumer of the fault run, SECURITY.md), then the intruder closes and
its session expires. A broker restart would be the faithful trigger, but librdkafka rejoins after
most restarts, so it would not be deterministic."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from prometheus_client import REGISTRY

from manifold.ingest.runner import BatchPolicy, Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared.kafka import consumer_config, ensure_topics, group_lag, producer_config
from manifold.shared.rejoin import kafka_watchdog

SESSION_MS = 6000  # the broker's smallest allowed session timeout (group.min.session.timeout.ms)
BOUND_S = 5.0


def _never(_: object) -> Output:
    raise AssertionError("nothing downstream")


def _wait(what: str, condition: Callable[[], bool], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_consumer_left_out_of_its_group_is_rebuilt_and_the_work_done(kafka_bootstrap: str,
                                                                      unique: Callable[[str], str]) -> None:
    topic, group, stage = unique("rejoin-topic"), unique("rejoin-group"), unique("rejoin")
    ensure_topics(kafka_bootstrap, [topic], 1)

    def static(client_id: str) -> Consumer:
        return Consumer({**consumer_config(kafka_bootstrap, group, client_id),
                         "group.instance.id": f"{group}-member", "session.timeout.ms": SESSION_MS})

    def new_consumer() -> Consumer:
        return Consumer(consumer_config(kafka_bootstrap, group, f"{group}-rebuilt"))

    seen: list[str] = []
    first = static(f"{group}-first")
    spec = StageSpec(stage, topic, lambda raw: raw.decode(), seen.append, _never, none_means="done")
    watchdog = kafka_watchdog(stage, kafka_bootstrap, group, [topic], new_consumer, bound_s=BOUND_S)  # type: ignore[arg-type]
    holds: dict[int, bool] = {}
    """id(consumer) -> whether it held partitions, as the runner's loop last saw it. Only the loop's
    thread touches a consumer: confluent-kafka consumers are not to be called from two threads."""

    def check(consumer: Any) -> Any:
        holds[id(consumer)] = bool(consumer.assignment())
        return watchdog.check(consumer)

    runner = StageRunner(spec, first, Producer(producer_config(kafka_bootstrap, f"{group}-out")),  # type: ignore[arg-type]
                         RetryPolicy(max_attempts=2, initial_s=0.05), BatchPolicy(max_messages=8, linger_s=0.1),
                         rejoin=check)
    producer = Producer(producer_config(kafka_bootstrap, f"{group}-in"))

    def produce(values: range) -> None:
        for i in values:
            producer.produce(topic, key=b"k", value=f"m{i}".encode())
        assert producer.flush(30) == 0

    stop = threading.Event()
    worker = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    rebuilt_before = REGISTRY.get_sample_value("manifold_consumer_rebuilt_total", {"stage": stage}) or 0.0
    intruder: Any = None
    try:
        worker.start()
        _wait("the first consumer's assignment", lambda: holds.get(id(first), False))
        produce(range(5))
        _wait("the first five messages handled and committed",
              lambda: len(seen) >= 5 and group_lag(kafka_bootstrap, group, [topic]) == 0)

        intruder = static(f"{group}-intruder")  # same group.instance.id: the coordinator fences `first`
        intruder.subscribe([topic])
        _wait("the intruder's assignment", lambda: not intruder.consume(1, 0.2) and bool(intruder.assignment()))
        intruder.close()  # a static member does not leave: its session expires after SESSION_MS
        intruder = None
        _wait("the first consumer fenced", lambda: not holds[id(first)])
        assert runner.consumer is first

        produce(range(5, 10))  # lag, while the group has no live member
        _wait("the rebuilt consumer to handle the rest", lambda: {f"m{i}" for i in range(10)} <= set(seen), 60.0)
    finally:
        stop.set()
        worker.join(timeout=60)
        if intruder is not None:
            intruder.close()
    assert runner.consumer is not first
    assert REGISTRY.get_sample_value("manifold_consumer_rebuilt_total", {"stage": stage}) == rebuilt_before + 1
    assert sorted(set(seen)) == sorted(f"m{i}" for i in range(10))
