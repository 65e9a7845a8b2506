"""`QueryClient` replaces its Kafka handles after every broker was lost or an ask timed out, so a
client that librdkafka left without a broker (confluentinc/librdkafka#5301) hears replies again.

The Kafka classes are fakes here: a "deaf" consumer is one that receives nothing, as the stuck
handle in the reliability suite did while the workers answered in time. The real-broker side is
covered by `tests/integration/test_query_transport.py` and the reliability smoke."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from manifold.query import protocol, request_client
from manifold.query.request_client import QueryClient, QueryTimeout
from manifold.shared.config import ManifoldSettings


class _Msg:
    def __init__(self, key: bytes, value: bytes) -> None:
        self._key, self._value = key, value

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None


class _Meta:
    def __init__(self, topic: str) -> None:
        self.topics = {topic: type("T", (), {"partitions": {0: None}})()}


class _Consumer:
    made: list[_Consumer] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.inbox: list[_Msg] = []
        self.deaf = False
        self.closed = False
        _Consumer.made.append(self)

    def poll(self, timeout: float = 0) -> _Msg | None:
        return None if self.deaf or not self.inbox else self.inbox.pop(0)

    def list_topics(self, topic: str, timeout: float = 0) -> _Meta:
        return _Meta(topic)

    def get_watermark_offsets(self, tp: Any, timeout: float = 0, cached: bool = False) -> tuple[int, int]:
        return 0, 0

    def assign(self, parts: list[Any]) -> None:
        self.assigned = parts

    def close(self) -> None:
        self.closed = True


class _Producer:
    made: list[_Producer] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        _Producer.made.append(self)

    def flush(self, timeout: float = 0) -> int:
        return 0


@pytest.fixture()
def client(monkeypatch: pytest.MonkeyPatch) -> QueryClient:
    _Consumer.made.clear()
    _Producer.made.clear()
    monkeypatch.setattr(request_client, "Consumer", _Consumer)
    monkeypatch.setattr(request_client, "Producer", _Producer)
    monkeypatch.setattr(request_client, "ensure_topics", lambda *a, **k: None)

    def answered(producer: Any, topic: str, key: bytes, value: bytes, headers: Any, timeout: float) -> None:
        # the worker answers at once; the reply reaches whichever reply consumer is current
        request_id = key.decode()
        reply = protocol.status_reply(request_id, "answered", "")
        _Consumer.made[-1].inbox.append(_Msg(key, protocol.encode_reply(reply)))

    monkeypatch.setattr(request_client, "send_sync", answered)
    return QueryClient(ManifoldSettings(), token="t", grace_s=0.0)


def test_a_healthy_client_keeps_its_handles(client: QueryClient) -> None:
    assert client.ask("one", deadline_ms=500).status == "answered"
    assert client.ask("two", deadline_ms=500).status == "answered"
    assert (len(_Consumer.made), len(_Producer.made)) == (1, 1)


def test_after_every_broker_was_lost_the_next_ask_listens_on_new_handles(client: QueryClient) -> None:
    old = _Consumer.made[-1]
    old.deaf = True  # the stuck handle: it never receives another reply
    old.config["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert client.ask("after the restart", deadline_ms=500).status == "answered"
    assert (len(_Consumer.made), len(_Producer.made)) == (2, 2)
    assert old.closed


def test_after_a_timed_out_ask_the_next_one_listens_on_new_handles(client: QueryClient) -> None:
    _Consumer.made[-1].deaf = True  # stuck without librdkafka saying so
    with pytest.raises(QueryTimeout):
        client.ask("lost", deadline_ms=200)
    assert client.ask("heard again", deadline_ms=500).status == "answered"
    assert len(_Consumer.made) == 2


def test_other_errors_do_not_rebuild(client: QueryClient) -> None:
    _Consumer.made[-1].config["error_cb"](KafkaError(KafkaError._TRANSPORT))
    assert client.ask("one", deadline_ms=500).status == "answered"
    assert len(_Consumer.made) == 1
