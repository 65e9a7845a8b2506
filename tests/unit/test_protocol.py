"""The request wire format: only well-formed, token-carrying, reply-topic-safe requests decode."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from manifold.query import protocol
from manifold.query.protocol import BadRequest, decode_request
from manifold.query.types import QueryRequest

REPLIES = "manifold.query.replies"
HEADERS = [("authorization", b"Bearer tok.en.sig")]


def _body(**over) -> dict:
    body = {"request_id": "r-1", "reply_topic": REPLIES,
            "deadline": (datetime.now(UTC) + timedelta(seconds=5)).isoformat(), "question": "total for beta?"}
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


def _decode(body: dict | bytes, headers=HEADERS):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return decode_request(raw, headers, allowed_reply_topic=REPLIES)


def _bad(body: dict | bytes, headers=HEADERS) -> BadRequest:
    with pytest.raises(BadRequest) as info:
        _decode(body, headers)
    return info.value


def test_round_trip_with_encode_request() -> None:
    request = QueryRequest.model_validate(_body())
    key, value, headers = protocol.encode_request(request, "abc.def.ghi")
    decoded, token = decode_request(value, headers, allowed_reply_topic=REPLIES)
    assert key == b"r-1" and decoded == request and token == "abc.def.ghi"


def test_header_name_is_case_insensitive() -> None:
    assert _decode(_body(), [("Authorization", "bearer xyz")])[1] == "xyz"


def test_malformed_json_and_oversize() -> None:
    assert "not valid JSON" in _bad(b"{nope").reason
    assert "JSON object" in _bad(b"[1]").reason
    big = _body(question="x" * 10)
    big["plan"] = {"pad": "y" * (65 * 1024)}
    err = _bad(json.dumps(big).encode())
    assert "limit is 65536" in err.reason and err.request_id is None


def test_missing_token_is_refused_with_request_id() -> None:
    for headers in (None, [], [("authorization", b"Basic abc")], [("authorization", b"Bearer ")]):
        err = _bad(_body(), headers)
        assert err.status == "refused" and "missing token" in err.reason
        assert err.request_id == "r-1" and err.reply_topic == REPLIES


def test_question_plan_rules() -> None:
    assert "not both" in _bad(_body(plan={"steps": []})).reason
    assert "send a question or a plan" in _bad(_body(question=None)).reason
    assert "send a question or a plan" in _bad(_body(question="   ")).reason
    request, _ = _decode(_body(question=None, plan={"steps": []}))
    assert request.plan == {"steps": []}
    request, _ = _decode(_body(question=None, continuation="blob", choice="ent_1", session_id="s1"))
    assert request.question is None and request.choice == "ent_1"
    assert "cannot be combined" in _bad(_body(question=None, plan={"s": 1}, continuation="blob")).reason


def test_reply_topic_must_be_under_the_configured_one() -> None:
    assert _decode(_body(reply_topic=REPLIES + ".client-7"))[0].reply_topic == REPLIES + ".client-7"
    for topic in ("manifold.dlq", "manifold.documents", REPLIES + "x", REPLIES + "."):
        err = _bad(_body(reply_topic=topic))
        assert "not allowed" in err.reason
        assert err.reply_topic is None  # the worker answers on the default topic instead


def test_tenant_in_body_is_refused() -> None:
    for field in ("tenant", "tenant_id"):
        err = _bad(_body(**{field: "victim"}))
        assert err.status == "refused" and "may not name a tenant" in err.reason


def test_unknown_field_and_invalid_values() -> None:
    assert "extra" in _bad(_body(colour="red")).reason.lower()
    assert "request_id" in _bad(_body(request_id="has space")).reason
    assert "timezone" in _bad(_body(deadline="2030-01-01T00:00:00")).reason


def test_bad_request_reply_correlates() -> None:
    err = _bad(_body(tenant_id="victim"))
    reply = protocol.bad_request_reply(err, b"key-1")
    assert reply.request_id == "r-1" and reply.status == "refused" and reply.trace.request_id == "r-1"
    assert not reply.evidence and not reply.answer
    from_key = protocol.bad_request_reply(_bad(b"{nope"), b"key-1")
    assert from_key.request_id == "key-1" and from_key.status == "error"
    assert protocol.bad_request_reply(_bad(b"{nope"), None).request_id == "unknown"


def test_encode_reply_round_trip() -> None:
    reply = protocol.status_reply("r-9", "error", "boom")
    assert protocol.decode_reply(protocol.encode_reply(reply)) == reply


def test_client_gives_up_at_the_deadline_when_the_broker_does_not_acknowledge() -> None:
    """An unreachable broker: the send waits at most the request's deadline plus grace (not the
    30 s default) and then raises QueryTimeout."""
    import threading

    from manifold.query.request_client import QueryClient, QueryTimeout
    from manifold.shared.config import ManifoldSettings

    waited: list[float] = []

    class NoAckProducer:
        def produce(self, *args, **kwargs) -> None:
            pass

        def flush(self, timeout: float) -> int:
            waited.append(timeout)
            return 1  # still queued: not acknowledged

    client = QueryClient.__new__(QueryClient)  # no Kafka: only the send path is exercised
    client.settings, client.token, client.grace_s = ManifoldSettings(), "t", 0.2
    client.reply_topic = client.settings.query.reply_topic
    client._producer, client._lock, client._closed = NoAckProducer(), threading.Lock(), False

    class IdleConsumer:
        def poll(self, timeout: float = 0) -> None:
            return None

    client._consumer, client._rebuild = IdleConsumer(), False
    with pytest.raises(QueryTimeout):
        client.ask("q", deadline_ms=300)
    assert len(waited) == 1 and waited[0] <= 0.3 + 0.2


# -- poison requests (issue 13, finding 1) ---------------------------------------------------------
def _nested_plan(depth: int = 10_000, rid: str | None = "poison-1") -> bytes:
    head = b'{' + (f'"request_id": "{rid}", '.encode() if rid else b"") + f'"reply_topic": "{REPLIES}", '.encode()
    return head + b'"plan": ' + b"[" * depth + b"]" * depth + b"}"


POISONS = {
    "nested_arrays": _nested_plan(),
    "nested_objects": b'{"request_id": "poison-2", "plan": ' + b'{"a":' * 6000 + b"1" + b"}" * 6000 + b"}",
    "not_utf8": b'{"request_id": "poison-3", "question": "\xff\xfe\xfa"}',
    "huge_integer": b'{"request_id": "poison-4", "question": "q", "max_rows": ' + b"9" * 20000 + b"}",
    "huge_float": b'{"request_id": "poison-5", "question": "q", "deadline": 1e999999}',
    "nul_and_controls": b'{"request_id": "poison-6", "question": "\\u0000\\u0001", "plan": "\\ud800"}',
    "bare_string": b'"' + b"x" * 60000 + b'"',
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(POISONS))
def test_poison_bodies_raise_only_bad_request(name: str) -> None:
    err = _bad(POISONS[name])
    assert err.status == "error" and err.reason


def test_deeply_nested_request_keeps_its_request_id_and_reply_topic() -> None:
    """The RecursionError case of finding 1: still answerable, on the topic it asked for."""
    err = _bad(_nested_plan(rid="deep-7"))
    assert err.request_id == "deep-7" and err.reply_topic == REPLIES
    assert "nested too deeply" in err.reason
    foreign = _bad(_nested_plan(rid="deep-8").replace(REPLIES.encode(), b"manifold.publish"))
    assert foreign.request_id == "deep-8" and foreign.reply_topic is None


def test_worker_handle_never_raises_and_skips_what_it_cannot_correlate() -> None:
    from manifold.query import worker
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    settings = settings.model_copy(update={"query": settings.query.model_copy(update={"reply_topic": REPLIES})})

    class Never:
        def answer(self, *_):
            raise AssertionError("the answerer must not see a poison request")

    for name, raw in POISONS.items():
        out = worker.handle(raw, HEADERS, b"k-" + name.encode(), settings=settings, verifier=None,  # type: ignore[arg-type]
                            answerer=Never())  # type: ignore[arg-type]
        assert out.reply is not None and out.reply.status == "error", name
        assert out.topic == REPLIES
    skipped = worker.handle(_nested_plan(rid=None), HEADERS, None, settings=settings, verifier=None,  # type: ignore[arg-type]
                            answerer=Never())  # type: ignore[arg-type]
    assert skipped.reply is None


def test_worker_handle_turns_an_unexpected_exception_into_an_error_reply() -> None:
    """Belt and braces: even a verifier that raises something unexpected yields an error reply."""
    from manifold.query import worker
    from manifold.shared.config import ManifoldSettings

    class Exploding:
        def verify(self, token: str):
            raise RecursionError("boom")

    out = worker.handle(json.dumps(_body()).encode(), HEADERS, b"r-1", settings=ManifoldSettings(),
                        verifier=Exploding(), answerer=None)  # type: ignore[arg-type]
    assert out.reply is not None and out.reply.status == "error" and "RecursionError" in (out.reply.error or "")
    assert out.reply.request_id == "r-1"


def test_worker_loop_survives_an_exception_from_one_message(monkeypatch) -> None:
    """The loop itself: `process` raising on one message replies error, commits it, and serves
    the next; only `stop` ends the loop."""
    import threading

    from manifold.query import worker
    from manifold.shared.config import ManifoldSettings

    stop = threading.Event()

    class Msg:
        def __init__(self, key: bytes, offset: int) -> None:
            self._key, self._offset = key, offset

        def key(self): return self._key
        def value(self): return json.dumps(_body(request_id=self._key.decode())).encode()
        def headers(self): return HEADERS
        def error(self): return None
        def topic(self): return "req"
        def partition(self): return 0
        def offset(self): return self._offset

    class Consumer:
        def __init__(self) -> None:
            self.queue = [Msg(b"boom-1", 1), Msg(b"boom-2", 2), Msg(b"fine-3", 3)]
            self.committed: list[int] = []

        def subscribe(self, _topics): pass
        def consume(self, num_messages, timeout):
            if not self.queue:
                stop.set()
                return []
            return [self.queue.pop(0)]
        def commit(self, message, asynchronous): self.committed.append(message.offset())
        def close(self): pass

    sent: list[tuple[str, bytes]] = []

    class Producer:
        def produce(self, topic, key, value, headers, on_delivery):
            sent.append((topic, value))
            on_delivery(None, None)
        def flush(self, _t=None): return 0

    real_handle = worker.handle

    def flaky(value, headers, key, **kw):
        if key.startswith(b"boom"):
            raise RuntimeError("a bug in handling")
        return real_handle(value, headers, key, **kw)

    class Verifier:
        def verify(self, token):
            from manifold.query.types import Principal
            return Principal(tenant_id="acme", subject="s", scopes=("query:read",))

    class Answerer:
        def answer(self, request, principal):
            return protocol.status_reply(request.request_id, "answered", None)

    monkeypatch.setattr(worker, "handle", flaky)
    consumer = Consumer()
    w = worker.QueryWorker(ManifoldSettings(), Answerer(), consumer, Producer(), Verifier())  # type: ignore[arg-type]
    w.run(stop, poll_s=0.01)
    assert consumer.committed == [1, 2, 3]
    replies = [protocol.decode_reply(v) for _, v in sent]
    assert [(r.request_id, r.status) for r in replies] == [("boom-1", "error"), ("boom-2", "error"),
                                                           ("fine-3", "answered")]


def test_the_query_worker_swaps_in_the_consumer_its_rejoin_hook_rebuilds() -> None:
    """A consumer that dropped out of its group is replaced between requests (shared/rejoin.py):
    the loop consumes from the new one and closes only the one it holds at the end."""
    import threading

    from manifold.query import worker
    from manifold.shared.config import ManifoldSettings

    stop = threading.Event()

    class Consumer:
        def __init__(self, name: str) -> None:
            self.name, self.polls, self.closed = name, 0, False

        def subscribe(self, _topics): pass  # noqa: ANN001, ANN202
        def consume(self, num_messages, timeout):  # noqa: ANN001, ANN202
            self.polls += 1
            if self.name == "rebuilt" and self.polls >= 2:
                stop.set()
            return []
        def close(self): self.closed = True  # noqa: ANN202

    class Producer:
        def flush(self, _t=None): return 0  # noqa: ANN001, ANN202

    old, new = Consumer("stuck"), Consumer("rebuilt")

    def rejoin(consumer):  # noqa: ANN001, ANN202
        return new if consumer is old and old.polls >= 3 else consumer

    w = worker.QueryWorker(ManifoldSettings(), object(), old, Producer(), object(), rejoin=rejoin)  # type: ignore[arg-type]
    w.run(stop, poll_s=0.0)
    assert old.polls == 3 and new.polls == 2
    assert w.consumer is new and new.closed


def test_a_reply_stuck_on_a_producer_without_brokers_is_retried_on_a_new_one(monkeypatch) -> None:  # noqa: ANN001
    """librdkafka#5301 can leave a producer without any broker after a restart: a reply still
    undelivered after `renew_producer_after_s` goes out on a freshly made producer."""
    import threading

    from confluent_kafka import KafkaError

    from manifold.query import worker
    from manifold.shared.config import ManifoldSettings

    class Producer:
        def __init__(self, name: str) -> None:
            self.name, self.flushed = name, False

        def flush(self, _t=None):  # noqa: ANN001, ANN202
            self.flushed = True
            return 0

    stuck, made = Producer("stuck"), []

    def new_producer() -> Producer:
        made.append(Producer(f"new-{len(made)}"))
        return made[-1]

    w = worker.QueryWorker(ManifoldSettings(), object(), object(), stuck, object(),  # type: ignore[arg-type]
                           retry_initial_s=0.01, retry_max_s=0.01, new_producer=new_producer,  # type: ignore[arg-type]
                           renew_producer_after_s=0.05)
    sent_on: list[str] = []

    def send_once(topic, key, value, stop):  # noqa: ANN001, ANN202
        sent_on.append(w.producer.name)
        return KafkaError(KafkaError._MSG_TIMED_OUT) if w.producer is stuck else None

    monkeypatch.setattr(w, "_send_once", send_once)
    out = worker.Outcome(reply=protocol.status_reply("q-1", "answered", ""), topic="replies", tenant="acme")
    assert w._deliver(out, threading.Event())
    assert sent_on[-1] == "new-0" and set(sent_on[:-1]) == {"stuck"} and len(made) == 1 and stuck.flushed
