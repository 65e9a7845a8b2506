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

    def commit(self, message=None, asynchronous: bool = True) -> None:
        assert asynchronous is False
        self.committed.append(message.offset() if message is not None else "positions")


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


def _runner(step, producer=None, attempts=3, step_batch=None, decode=None):
    spec = StageSpec(
        name="demo",
        source="in",
        decode=decode or (lambda raw: json.loads(raw)),
        step=step,
        route=lambda out: Output("out", b"acme/doc-1", json.dumps(out).encode()),
        step_batch=step_batch,
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


# -- micro-batches ------------------------------------------------------------------------------
def _batch(*values: bytes) -> list[FakeMessage]:
    return [FakeMessage(v, _offset=i) for i, v in enumerate(values)]


def test_a_batch_goes_to_step_batch_in_one_call_and_commits_once_after_all_outputs() -> None:
    calls = []

    def step_batch(items):
        calls.append(list(items))
        return [{"seen": item["n"]} for item in items]

    runner, consumer, producer = _runner(lambda item: pytest.fail("per-item step used"), step_batch=step_batch)
    runner.process_batch(_batch(b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'))
    assert calls == [[{"n": 1}, {"n": 2}, {"n": 3}]]
    assert [json.loads(v) for _, _, v, _ in producer.sent] == [{"seen": 1}, {"seen": 2}, {"seen": 3}]
    assert consumer.committed == ["positions"]


def test_per_document_outcomes_one_bad_document_does_not_hold_back_its_batch() -> None:
    def step_batch(items):
        return [BadInput(f"doc {item['n']} is corrupt") if item["n"] == 2 else {"seen": item["n"]}
                for item in items]

    runner, consumer, producer = _runner(lambda item: pytest.fail("per-item step used"), step_batch=step_batch)
    runner.process_batch(_batch(b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'))
    assert [(t, json.loads(v).get("seen")) for t, _, v, _ in producer.sent if t == "out"] == [("out", 1), ("out", 3)]
    [letter] = _dead_letters(producer)
    assert letter.error_kind == "bad_input" and "doc 2 is corrupt" in letter.error and letter.source_offset == 1
    assert consumer.committed == ["positions"]


def test_a_batch_that_fails_as_a_whole_is_handled_per_document_so_each_failure_is_its_own() -> None:
    batch_calls = []

    def step_batch(items):
        batch_calls.append(len(items))
        raise Transient("elasticsearch unavailable halfway through the bulk write")

    def step(item):
        if item["n"] == 2:
            raise BadInput("doc 2 has a vector of the wrong dimension")
        return {"seen": item["n"]}

    runner, consumer, producer = _runner(step, step_batch=step_batch, attempts=2)
    runner.process_batch(_batch(b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'))
    assert batch_calls == [3, 3]  # retried as a batch first
    assert [json.loads(v)["seen"] for t, _, v, _ in producer.sent if t == "out"] == [1, 3]
    [letter] = _dead_letters(producer)
    assert letter.source_offset == 1 and "wrong dimension" in letter.error


def test_a_transient_outcome_is_retried_for_that_document_alone() -> None:
    tries = []

    def step(item):
        tries.append(item["n"])
        return {"seen": item["n"], "alone": True}

    runner, _, producer = _runner(step, step_batch=lambda items: [
        Transient("lock timeout") if it["n"] == 2 else {"seen": it["n"]} for it in items])
    runner.process_batch(_batch(b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'))
    assert tries == [2]
    assert [json.loads(v)["seen"] for t, _, v, _ in producer.sent if t == "out"] == [1, 2, 3]  # order kept


def test_a_batch_is_split_by_bytes() -> None:
    from manifold.ingest.runner import BatchPolicy

    sizes = []
    runner, _, producer = _runner(lambda item: item, step_batch=lambda items: sizes.append(len(items)) or items)
    runner.batch = BatchPolicy(max_messages=10, max_bytes=20)
    runner.process_batch(_batch(b'{"n": 1}', b'{"n": 2}', b'{"n": 3}', b'{"n": 4}'))  # 8 bytes each
    assert sizes == [2, 2]
    assert len(producer.sent) == 4


# -- poison: no input of any shape escapes the routing or stops the worker ------------------------
_POISON = {
    "deeply nested JSON": b"[" * 200_000 + b"]" * 200_000,
    "nested object": b'{"doc": ' * 50_000 + b"1" + b"}" * 50_000,
    "not UTF-8": b"\xff\xfe\x00{\x80\x81 tenant",
    "wrong types": b'{"tenant_id": ["a"], "document_id": {"x": 1}, "version": "7", "doc": 3}',
    "huge integer": b'{"tenant_id": "acme", "version": ' + b"9" * 5000 + b"}",
    "huge value": b'{"tenant_id": "acme", "pad": "' + b"x" * 2_000_000 + b'"}',
    "empty": b"",
    "tombstone": None,
    "JSON null": b"null",
}


@pytest.mark.parametrize("decoder", ["parse_event", "stage_notice", "publish"])
def test_poison_of_any_shape_goes_to_the_dlq_with_a_reason_and_the_offset_is_committed(decoder: str) -> None:
    from manifold.ingest import workers
    from manifold.ingest.notices import StageNotice
    from manifold.ingest.runner import DLQ_VALUE_LIMIT
    from manifold.shared.events import parse_event

    decode = {"parse_event": parse_event, "stage_notice": workers._decoder(StageNotice),
              "publish": workers._publish_decode}[decoder]
    runner, consumer, producer = _runner(lambda item: {"ok": 1}, decode=decode,
                                         step_batch=lambda items: [{"ok": 1} for _ in items])
    msgs = _batch(*_POISON.values()) + [FakeMessage(b'{"n": 1}', _offset=99)]
    runner.process_batch(msgs[:-1])
    letters = _dead_letters(producer)
    assert sorted(letter.source_offset for letter in letters) == list(range(len(_POISON)))
    for letter in letters:
        assert letter.error.strip(), letter
        assert len(letter.value_b64) <= DLQ_VALUE_LIMIT * 4 // 3 + 4
    huge = next(letter for letter in letters if letter.source_offset == list(_POISON).index("huge value"))
    assert "truncated" in huge.error
    assert consumer.committed == ["positions"]


def test_poison_raised_by_the_step_itself_is_routed_too() -> None:
    def step(item):
        def nest(n):
            return nest(n + 1)
        return nest(0)  # RecursionError inside a handler

    runner, consumer, producer = _runner(step)
    runner.process_batch(_batch(b'{"n": 1}'))
    [letter] = _dead_letters(producer)
    assert letter.error_kind == "poison" and "RecursionError" in letter.error
    assert consumer.committed == ["positions"]
