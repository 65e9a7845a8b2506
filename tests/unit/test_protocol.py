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

    from manifold.query.client import QueryClient, QueryTimeout
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
    with pytest.raises(QueryTimeout):
        client.ask("q", deadline_ms=300)
    assert len(waited) == 1 and waited[0] <= 0.3 + 0.2
