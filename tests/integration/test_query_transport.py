"""Query request/reply over the real Kafka, with a fake answerer (the transport, not the engine).

Each test uses its own request/reply topics and consumer group, so reruns never collide.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from confluent_kafka import Producer

from manifold.query import protocol
from manifold.query.auth import mint_token, signing_key
from manifold.query.request_client import QueryClient, mint_dev_token
from manifold.query.types import Principal, QueryReply, QueryRequest, Trace
from manifold.query.worker import serve
from manifold.shared.config import ManifoldSettings
from manifold.shared.kafka import producer_config, send_sync


class EchoAnswerer:
    """Answers with the principal's tenant and the question; records who it served."""

    def __init__(self, name: str = "echo") -> None:
        self.name = name
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def answer(self, request: QueryRequest, principal: Principal) -> QueryReply:
        with self._lock:
            self.calls.append((request.request_id, principal.tenant_id))
        return QueryReply(request_id=request.request_id, status="answered",
                          answer=f"{principal.tenant_id}|{request.question}",
                          result={"worker": self.name},
                          trace=Trace(request_id=request.request_id, policy=("tenant: from token",)))

    def close(self) -> None:
        pass


@pytest.fixture
def qsettings(kafka_bootstrap: str, settings: ManifoldSettings) -> ManifoldSettings:
    run = uuid.uuid4().hex[:10]
    query = settings.query.model_copy(update={
        "request_topic": f"test.query.requests.{run}", "reply_topic": f"test.query.replies.{run}",
        "metrics_port": 0,
    })
    return settings.model_copy(update={"query": query})


@contextmanager
def running(settings: ManifoldSettings, answerer: EchoAnswerer, *, group: str, threads: int = 1) -> Iterator[None]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            serve(settings, stop, answerer, threads=threads, group_id=group)
        except BaseException as err:  # noqa: BLE001 - surfaced below
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "serve() did not stop"
    assert not errors, errors


def _client(settings: ManifoldSettings, tenant: str = "acme", **kw) -> QueryClient:
    return QueryClient(settings, token=mint_dev_token(settings, tenant), **kw)


def test_round_trip_correlates_by_request_id(qsettings: ManifoldSettings) -> None:
    answerer = EchoAnswerer()
    with running(qsettings, answerer, group=f"g-{uuid.uuid4().hex[:8]}"), _client(qsettings) as client:
        first = client.ask("total for beta?", deadline_ms=30_000)
        second = client.ask("who supplies PRD-401?", deadline_ms=30_000)
    assert first.status == "answered" and first.answer == "acme|total for beta?"
    assert second.answer == "acme|who supplies PRD-401?"
    assert first.request_id != second.request_id
    assert [rid for rid, _ in answerer.calls] == [first.request_id, second.request_id]


def test_concurrent_clients_get_their_own_replies(qsettings: ManifoldSettings) -> None:
    answerer = EchoAnswerer()
    results: dict[str, list[str]] = {}

    def ask_many(tenant: str) -> None:
        with _client(qsettings, tenant) as client:
            results[tenant] = [client.ask(f"q{i} from {tenant}", deadline_ms=30_000).answer for i in range(4)]

    with running(qsettings, answerer, group=f"g-{uuid.uuid4().hex[:8]}", threads=2):
        askers = [threading.Thread(target=ask_many, args=(t,)) for t in ("alpha", "beta")]
        for t in askers:
            t.start()
        for t in askers:
            t.join(60)
    for tenant in ("alpha", "beta"):
        assert results[tenant] == [f"{tenant}|q{i} from {tenant}" for i in range(4)]


def test_forged_and_expired_tokens_are_refused(qsettings: ManifoldSettings) -> None:
    q = qsettings.query
    answerer = EchoAnswerer()
    forged = mint_token("attacker-key-0123456789abcdef0123456789", tenant_id="acme", subject="mallory",
                        issuer=q.token_issuer, audience=q.token_audience, ttl_s=300)
    algorithm, key = signing_key(qsettings)
    expired = mint_token(key, tenant_id="acme", subject="cli", issuer=q.token_issuer, algorithm=algorithm,
                         audience=q.token_audience, ttl_s=60, now=1_700_000_000)
    with running(qsettings, answerer, group=f"g-{uuid.uuid4().hex[:8]}"):
        with QueryClient(qsettings, token=forged) as client:
            bad_sig = client.ask("secret totals?", deadline_ms=30_000)
        with QueryClient(qsettings, token=expired) as client:
            old = client.ask("secret totals?", deadline_ms=30_000)
    assert bad_sig.status == "refused" and bad_sig.error == "invalid token: bad signature"
    assert old.status == "refused" and old.error == "invalid token: expired"
    for reply in (bad_sig, old):
        assert not reply.answer and not reply.evidence and not reply.result
    assert answerer.calls == []


def _raw_request(settings: ManifoldSettings, body: dict, token: str) -> None:
    producer = Producer(producer_config(settings.kafka.bootstrap_servers, "test-raw"))
    send_sync(producer, settings.query.request_topic, body["request_id"].encode(), json.dumps(body).encode(),
              [("authorization", f"Bearer {token}".encode())])


def _wait_reply(client: QueryClient, request_id: str, seconds: float = 30.0) -> QueryReply:
    import time

    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        msg = client._consumer.poll(0.5)  # the test reads the reply topic directly
        if msg is None or msg.error() is not None:
            continue
        reply = protocol.decode_reply(msg.value())
        if reply.request_id == request_id:
            return reply
    raise AssertionError(f"no reply to {request_id}")


def _wait_replies(client: QueryClient, request_ids: set[str], seconds: float = 60.0) -> dict[str, QueryReply]:
    give_up, got = time.monotonic() + seconds, {}
    while time.monotonic() < give_up and set(got) != request_ids:
        msg = client._consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            reply = protocol.decode_reply(msg.value())
            if reply.request_id in request_ids:
                got[reply.request_id] = reply
    assert set(got) == request_ids, f"no reply to {sorted(request_ids - set(got))}"
    return got


def test_tenant_in_body_and_foreign_reply_topic_are_rejected(qsettings: ManifoldSettings) -> None:
    answerer = EchoAnswerer()
    token = mint_dev_token(qsettings, "acme")
    deadline = (protocol.utcnow() + timedelta(seconds=30)).isoformat()
    with running(qsettings, answerer, group=f"g-{uuid.uuid4().hex[:8]}"), _client(qsettings) as listener:
        _raw_request(qsettings, {"request_id": "forged-tenant", "reply_topic": qsettings.query.reply_topic,
                                 "deadline": deadline, "question": "q", "tenant_id": "victim"}, token)
        forged = _wait_reply(listener, "forged-tenant")
        _raw_request(qsettings, {"request_id": "foreign-topic", "reply_topic": "manifold.documents",
                                 "deadline": deadline, "question": "q"}, token)
        foreign = _wait_reply(listener, "foreign-topic")
        _raw_request(qsettings, {"request_id": "late", "reply_topic": qsettings.query.reply_topic,
                                 "deadline": "2020-01-01T00:00:00Z", "question": "q"}, token)
        late = _wait_reply(listener, "late")
    assert forged.status == "refused" and "may not name a tenant" in (forged.error or "")
    assert foreign.status == "error" and "not allowed" in (foreign.error or "")
    assert late.status == "error" and late.error == "deadline passed before work started"
    assert answerer.calls == []


def test_private_reply_topic_under_the_prefix(qsettings: ManifoldSettings) -> None:
    with running(qsettings, EchoAnswerer(), group=f"g-{uuid.uuid4().hex[:8]}"), \
            _client(qsettings, reply_topic=qsettings.query.reply_topic + ".me") as client:
        assert client.ask("q", deadline_ms=30_000).answer == "acme|q"


def test_two_workers_in_one_group_both_serve(qsettings: ManifoldSettings) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = EchoAnswerer("a"), EchoAnswerer("b")
    with running(qsettings, a, group=group), running(qsettings, b, group=group), _client(qsettings) as client:
        served: set[str] = set()
        # The second member's join is a rebalance that can take seconds on a busy machine: keep
        # asking (time-bounded, not count-bounded) until both members have served requests.
        give_up, i = time.monotonic() + 90, 0
        while time.monotonic() < give_up and not (served == {"a", "b"} and i >= 12):
            served.add(client.ask(f"q{i}", deadline_ms=30_000).result["worker"])
            i += 1
            time.sleep(0.1)
    assert served == {"a", "b"}, "one worker served everything: the group did not share partitions"


def test_answerer_exception_becomes_error_reply(qsettings: ManifoldSettings) -> None:
    class Broken(EchoAnswerer):
        def answer(self, request: QueryRequest, principal: Principal) -> QueryReply:
            raise RuntimeError("store exploded")

    with running(qsettings, Broken(), group=f"g-{uuid.uuid4().hex[:8]}"), _client(qsettings) as client:
        first = client.ask("q1", deadline_ms=30_000)
        second = client.ask("q2", deadline_ms=30_000)  # the loop survived
    assert first.status == second.status == "error"
    assert "store exploded" in (first.error or "")


class ClarifyAnswerer(EchoAnswerer):
    """First turn: asks which supplier (sealed continuation). Second turn: answers with the choice."""

    KEY = "clarify-test-key-0123456789abcdef0123"

    def answer(self, request: QueryRequest, principal: Principal) -> QueryReply:
        from manifold.query.sessions import open_, seal
        from manifold.query.types import CatalogEntry, Clarification

        super().answer(request, principal)
        if request.continuation is None:
            blob = seal({"question": request.question}, key=self.KEY, tenant_id=principal.tenant_id,
                        session_id=request.session_id or "")
            cands = (CatalogEntry(kind="supplier", entity_id="ent_b1", key="supplier beta", name="Supplier Beta"),
                     CatalogEntry(kind="supplier", entity_id="ent_b2", key="beta gmbh", name="Beta GmbH"))
            return QueryReply(request_id=request.request_id, status="clarify",
                              clarification=Clarification(question="Which Beta?", anchor="beta", candidates=cands,
                                                          continuation=blob),
                              trace=Trace(request_id=request.request_id))
        state = open_(request.continuation, key=self.KEY, tenant_id=principal.tenant_id,
                      session_id=request.session_id or "")
        return QueryReply(request_id=request.request_id, status="answered",
                          answer=f"{state['question']} -> {request.choice}", trace=Trace(request_id=request.request_id))


def test_cli_ask_with_a_clarify_turn(qsettings: ManifoldSettings, monkeypatch, tmp_path, capsys) -> None:
    """`manifold ask` end to end: clarify stores the continuation (0600), --choice sends it back."""
    from manifold.deploy.cli import main

    monkeypatch.setenv("MANIFOLD_QUERY__REQUEST_TOPIC", qsettings.query.request_topic)
    monkeypatch.setenv("MANIFOLD_QUERY__REPLY_TOPIC", qsettings.query.reply_topic)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with running(qsettings, ClarifyAnswerer(), group=f"g-{uuid.uuid4().hex[:8]}"):
        assert main(["ask", "total for beta?", "--tenant", "acme", "--session", "s1", "--deadline-ms", "30000"]) == 0
        first = capsys.readouterr().out
        stored = tmp_path / "manifold" / "sessions" / "acme" / "s1.json"
        assert stored.stat().st_mode & 0o777 == 0o600
        assert main(["ask", "--tenant", "acme", "--session", "s1", "--choice", "ent_b2", "--json",
                     "--deadline-ms", "30000"]) == 0
        second = json.loads(capsys.readouterr().out)
    assert "status: clarify" in first and "ent_b1" in first and "--choice" in first
    assert second["status"] == "answered" and second["answer"] == "total for beta? -> ent_b2"
    assert not stored.exists()
    assert main(["ask", "--tenant", "acme", "--session", "s1", "--choice", "x"]) == 2  # nothing pending


def test_poison_requests_never_stop_the_worker(qsettings: ManifoldSettings) -> None:
    """Issue 13, finding 1, over the real Kafka: ~10 KB of nested arrays (a RecursionError in
    the decoder before the fix), without a token, produced three times; plus non-UTF-8 bytes and
    a body nobody can be told about. Each answerable one gets an `error` reply, and afterwards a
    normal question is answered by the same worker (the same `serve()` call, still running)."""
    depth = 5_000
    poison = (b'{"request_id": "poison-%d", "reply_topic": "' + qsettings.query.reply_topic.encode()
              + b'", "plan": ' + b"[" * depth + b"]" * depth + b"}")
    answerer = EchoAnswerer()
    producer = Producer(producer_config(qsettings.kafka.bootstrap_servers, "test-poison"))
    with running(qsettings, answerer, group=f"g-{uuid.uuid4().hex[:8]}"), _client(qsettings) as client:
        for i in range(3):
            send_sync(producer, qsettings.query.request_topic, f"poison-{i}".encode(), poison % i)
        send_sync(producer, qsettings.query.request_topic, b"not-utf8", b'{"request_id": "x", "q": "\xff\xfe"}')
        send_sync(producer, qsettings.query.request_topic, None, b"[" * depth)  # no key, no id: skipped
        got = _wait_replies(client, {"poison-0", "poison-1", "poison-2", "x"})  # any order: several partitions
        replies, garbled = [got[f"poison-{i}"] for i in range(3)], got["x"]
        normal = client.ask("still there?", deadline_ms=30_000)
    for reply in replies:
        assert reply.status == "error" and "nested too deeply" in (reply.error or "")
        assert not reply.answer and not reply.evidence
    assert garbled.status == "error"
    assert normal.status == "answered" and normal.answer == "acme|still there?"
    assert [rid for rid, _ in answerer.calls] == [normal.request_id]
