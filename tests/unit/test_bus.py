"""The embedded bus's Kafka contract (in memory) and the real `StageRunner` running over it."""

from __future__ import annotations

import json

import pytest

from manifold.ingest.runner import Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared import topics
from manifold.shared.dlq import DeadLetter
from manifold.shared.errors import BadInput, Transient
from manifold.shared.log_bus import (
    BusConsumer,
    BusProducer,
    InMemoryBus,
    Record,
    lag,
    partition_for,
    read_all,
    redeliver,
    seek,
)


def test_partition_is_a_stable_hash_of_the_key() -> None:
    assert partition_for(b"acme/doc-1", 4) == partition_for(b"acme/doc-1", 4)
    assert partition_for(None, 4) == 0 and partition_for(b"x", 1) == 0
    spread = {partition_for(f"t/doc-{i}".encode(), 4) for i in range(64)}
    assert spread == {0, 1, 2, 3}
    assert partition_for(b"acme/doc-1", 6) == int.from_bytes(
        __import__("hashlib").sha256(b"acme/doc-1").digest()[:4], "big") % 6


def _spec(step, source: str = "in", name: str = "demo") -> StageSpec:
    return StageSpec(name=name, source=source, decode=json.loads, step=step,
                     route=lambda out: Output("out", b"acme/doc-1", json.dumps(out).encode()))


def _runner(bus: InMemoryBus, step, attempts: int = 2, source: str = "in", name: str = "demo") -> StageRunner:
    consumer = BusConsumer(bus, f"manifold.{name}")
    consumer.subscribe([source])
    return StageRunner(_spec(step, source, name), consumer, BusProducer(bus), RetryPolicy(attempts, 0.001, 0.002))


def _drain(runner: StageRunner) -> int:
    n = 0
    while msgs := runner.consumer.consume(num_messages=4, timeout=0):
        runner.process_batch(msgs)
        n += len(msgs)
    return n


def test_the_stage_runner_runs_unchanged_over_the_bus() -> None:
    bus = InMemoryBus()
    bus.append([Record("in", b"acme/doc-1", json.dumps({"n": i}).encode()) for i in range(5)])
    runner = _runner(bus, lambda item: {"seen": item["n"]})
    assert _drain(runner) == 5
    assert [json.loads(m.value())["seen"] for m in read_all(bus, "out")] == [0, 1, 2, 3, 4]
    assert lag(bus, "manifold.demo", "in") == 0


def test_a_crash_before_commit_redelivers_the_batch() -> None:
    bus = InMemoryBus()
    bus.append([Record("in", b"k", b'{"n": 1}'), Record("in", b"k", b'{"n": 2}')])
    consumer = BusConsumer(bus, "g")
    consumer.subscribe(["in"])
    assert len(consumer.consume(10, timeout=0)) == 2  # handled, then the process dies: no commit
    again = BusConsumer(bus, "g")
    again.subscribe(["in"])
    got = again.consume(10, timeout=0)
    assert [json.loads(m.value())["n"] for m in got] == [1, 2]
    again.commit(got[0])  # only the first one is done
    third = BusConsumer(bus, "g")
    third.subscribe(["in"])
    assert [json.loads(m.value())["n"] for m in third.consume(10, timeout=0)] == [2]


def test_outputs_are_durable_before_the_input_is_committed() -> None:
    """If the output cannot be appended the runner raises and commits nothing: the input stays."""
    bus = InMemoryBus()
    bus.append([Record("in", b"k", b'{"n": 1}')])
    runner = _runner(bus, lambda item: {"seen": item["n"]})
    bus.fail_next_append = RuntimeError("disk full")
    with pytest.raises(Transient):
        _drain(runner)
    assert bus.committed("manifold.demo", "in") == {}
    assert read_all(bus, "out") == []
    assert _drain(_runner(bus, lambda item: {"seen": item["n"]})) == 1  # a new runner gets it again
    assert len(read_all(bus, "out")) == 1


def test_bad_input_and_exhausted_retries_go_to_the_dlq_and_the_partition_moves_on() -> None:
    bus = InMemoryBus()
    bus.append([Record("in", b"acme/doc-1", b'{"n": 1}'), Record("in", b"acme/doc-1", b'not json'),
                Record("in", b"acme/doc-1", b'{"n": 3}')])

    def step(item):
        if item["n"] == 3:
            raise Transient("store down")
        return {"seen": item["n"]}

    assert _drain(_runner(bus, step)) == 3
    letters = [DeadLetter.model_validate_json(m.value()) for m in read_all(bus, topics.DLQ)]
    assert [(d.error_kind, d.source_offset) for d in letters] == [("poison", 1), ("exhausted", 2)]
    assert letters[1].attempts == 2 and letters[1].value == b'{"n": 3}'
    assert lag(bus, "manifold.demo", "in") == 0


def test_bad_input_is_dead_lettered_at_once() -> None:
    bus = InMemoryBus()
    bus.append([Record("in", b"k", b'{"n": 1}')])
    calls = []

    def step(item):
        calls.append(item)
        raise BadInput("nope")

    _drain(_runner(bus, step, attempts=5))
    assert len(calls) == 1
    (letter,) = [DeadLetter.model_validate_json(m.value()) for m in read_all(bus, topics.DLQ)]
    assert letter.error_kind == "bad_input"


def test_a_dead_letter_is_redelivered_to_its_source_and_handled() -> None:
    bus = InMemoryBus()
    source = topics.STAGE_PARSED  # a real stage's source: redelivery goes only there
    bus.append([Record(source, b"acme/doc-1", b'{"n": 7}')])
    broken = {"on": True}

    def step(item):
        if broken["on"]:
            raise Transient("down")
        return {"seen": item["n"]}

    _drain(_runner(bus, step, source=source, name="chunk"))
    letters = [DeadLetter.model_validate_json(m.value()) for m in read_all(bus, topics.DLQ)]
    broken["on"] = False
    assert redeliver(bus, letters) == 1
    assert _drain(_runner(bus, step, source=source, name="chunk")) == 1
    assert [json.loads(m.value()) for m in read_all(bus, "out")] == [{"seen": 7}]
    replayed = read_all(bus, source)[-1]
    assert dict(replayed.headers())["x-manifold-replay-of"] == b"%s/%d/0" % (source.encode(),
                                                                              partition_for(b"acme/doc-1", 4))


def test_seek_replays_a_group_from_an_offset() -> None:
    bus = InMemoryBus()
    bus.append([Record("in", b"k", json.dumps({"n": i}).encode()) for i in range(3)])
    seen: list[int] = []
    step = lambda item: seen.append(item["n"]) or {"ok": True}  # noqa: E731 - a one-line stage handler
    _drain(_runner(bus, step))
    seek(bus, "manifold.demo", "in", 1, partition=partition_for(b"k", bus.partitions))
    _drain(_runner(bus, step))
    seek(bus, "manifold.demo", "in", None)  # to the end: nothing more
    _drain(_runner(bus, step))
    assert seen == [0, 1, 2, 1, 2]
