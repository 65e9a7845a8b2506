"""The stage runner's routing, against fakes of the Kafka consumer and producer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from manifold.ingest.runner import Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared import topics
from manifold.shared.dlq import DeadLetter
from manifold.shared.errors import BadInput, Transient


@dataclass
class FakeMessage:
    _value: bytes | None
    _key: bytes | None = b"acme/doc-1"
    _topic: str = "in"
    _partition: int = 0
    _offset: int = 7

    def value(self): return self._value
    def key(self): return self._key
    def topic(self): return self._topic
    def partition(self): return self._partition
    def offset(self): return self._offset
    def error(self): return None


@dataclass
class FakeConsumer:
    committed: list[int] = field(default_factory=list)

    def commit(self, message, asynchronous: bool) -> None:
        assert asynchronous is False
        self.committed.append(message.offset())


@dataclass
class FakeProducer:
    sent: list[tuple[str, bytes | None, bytes, list | None]] = field(default_factory=list)
    fail: bool = False
    _pending: list = field(default_factory=list)

    def produce(self, topic, key=None, value=None, headers=None, on_delivery=None) -> None:
        self._pending.append((topic, key, value, headers, on_delivery))

    def flush(self, timeout=None) -> int:
        if self.fail:
            return len(self._pending)
        for topic, key, value, headers, cb in self._pending:
            self.sent.append((topic, key, value, headers))
            cb(None, None)
        self._pending.clear()
        return 0


def _runner(step, producer=None, attempts=3):
    spec = StageSpec(
        name="demo",
        source="in",
        decode=lambda raw: json.loads(raw),
        step=step,
        route=lambda out: Output("out", b"acme/doc-1", json.dumps(out).encode()),
    )
    consumer, producer = FakeConsumer(), producer or FakeProducer()
    return StageRunner(spec, consumer, producer, RetryPolicy(attempts, 0.001, 0.002)), consumer, producer


def _dead_letters(producer: FakeProducer) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for t, _, v, _ in producer.sent if t == topics.DLQ]


def test_success_produces_then_commits() -> None:
    runner, consumer, producer = _runner(lambda item: {"seen": item["n"]})
    runner.process(FakeMessage(b'{"n": 1}'))
    assert [(t, json.loads(v)) for t, _, v, _ in producer.sent] == [("out", {"seen": 1})]
    assert consumer.committed == [7]


def test_stale_result_is_committed_without_output() -> None:
    runner, consumer, producer = _runner(lambda item: None)
    runner.process(FakeMessage(b'{"n": 1}'))
    assert producer.sent == [] and consumer.committed == [7]


def test_bad_input_goes_to_the_dlq_once_with_context() -> None:
    calls = []

    def step(item):
        calls.append(item)
        raise BadInput("unsupported media type text/x-foo")

    runner, consumer, producer = _runner(step)
    raw = b'{"tenant_id": "acme", "document_id": "d.foo", "version": 2}'
    runner.process(FakeMessage(raw))
    [letter] = _dead_letters(producer)
    assert len(calls) == 1
    assert (letter.error_kind, letter.attempts, letter.stage) == ("bad_input", 1, "demo")
    assert "unsupported media type" in letter.error
    assert (letter.tenant_id, letter.document_id, letter.version) == ("acme", "d.foo", 2)
    assert letter.value == raw and letter.key == b"acme/doc-1"
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == ("in", 0, 7)
    headers = dict(producer.sent[0][3])
    assert headers["x-manifold-error-kind"] == b"bad_input"
    assert consumer.committed == [7]


def test_undecodable_message_is_dead_lettered_not_crashed() -> None:
    runner, consumer, producer = _runner(lambda item: item)
    runner.process(FakeMessage(b"\x00not json"))
    [letter] = _dead_letters(producer)
    assert letter.error_kind == "poison" and "DecodeError" in letter.error
    assert consumer.committed == [7]


def test_transient_faults_retry_then_succeed() -> None:
    attempts = []

    def step(item):
        attempts.append(1)
        if len(attempts) < 3:
            raise Transient("postgres unavailable")
        return {"ok": True}

    runner, consumer, producer = _runner(step, attempts=5)
    runner.process(FakeMessage(b"{}"))
    assert len(attempts) == 3
    assert [t for t, *_ in producer.sent] == ["out"]


def test_exhausted_retries_go_to_the_dlq() -> None:
    def step(item):
        raise Transient("elasticsearch unavailable")

    runner, consumer, producer = _runner(step, attempts=3)
    runner.process(FakeMessage(b"{}"))
    [letter] = _dead_letters(producer)
    assert (letter.error_kind, letter.attempts) == ("exhausted", 3)
    assert consumer.committed == [7]


def test_unreachable_dlq_stops_without_committing() -> None:
    def step(item):
        raise BadInput("bad")

    runner, consumer, _ = _runner(step, producer=FakeProducer(fail=True))
    with pytest.raises(Transient):
        runner.process(FakeMessage(b"{}"))
    assert consumer.committed == []  # the message will be consumed again


class _LostAssignmentConsumer(FakeConsumer):
    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code

    def commit(self, message, asynchronous: bool) -> None:
        from confluent_kafka import KafkaError, KafkaException

        raise KafkaException(KafkaError(self.code))


def test_a_commit_lost_to_a_rebalance_is_not_fatal_the_batch_is_redelivered() -> None:
    from confluent_kafka import KafkaError

    runner, _, producer = _runner(lambda item: {"ok": item["n"]})
    runner.consumer = _LostAssignmentConsumer(KafkaError._ASSIGNMENT_LOST)
    runner.process(FakeMessage(b'{"n": 1}'))  # no exception: the work stays done, offsets re-read
    assert [t for t, *_ in producer.sent] == ["out"]


def test_other_commit_failures_still_raise() -> None:
    from confluent_kafka import KafkaError, KafkaException

    runner, _, _ = _runner(lambda item: {"ok": item["n"]})
    runner.consumer = _LostAssignmentConsumer(KafkaError._TRANSPORT)
    with pytest.raises(KafkaException):
        runner.process(FakeMessage(b'{"n": 1}'))
