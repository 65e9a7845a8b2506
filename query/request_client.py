"""The request/reply client: send one query, wait for its reply (DESIGN.md §4).

Guarantees:
- A fast reply is never missed: before the first request is produced the client assigns itself
  every partition of the reply topic at the current high watermark (plain `assign`, no consumer
  group, so no rebalance race); any reply produced afterwards is at or after that offset.
- `ask` returns the first reply whose `request_id` equals the one it sent; replies to other
  requests (other clients, earlier timed-out asks, duplicates from at-least-once delivery) are
  skipped. It raises `QueryTimeout` when none arrived by the deadline plus `grace_s`.
- The request is acknowledged by the broker before `ask` starts waiting. Sending shares the
  deadline: if the broker does not acknowledge it by the deadline plus `grace_s` (broker down),
  `ask` raises `QueryTimeout` then, never later. One client may be shared by threads; its asks
  are serialised.
- `close()` (or leaving the `with` block) releases the consumer and the producer.
- A lost broker does not disconnect the client for good: after librdkafka reports that every broker
  connection of the reply consumer or the producer went down (`_ALL_BROKERS_DOWN`), or after an
  ask timed out with its request acknowledged, the next request first replaces both with new ones
  (bootstrapped from `bootstrap.servers` again, the reply consumer re-assigned at the end; about
  0.2 s, once). librdkafka can otherwise stay without any broker after a single-broker restart: a
  Metadata response from the shutting-down broker lists no brokers, the client drops its only
  broker and its re-bootstrap is cancelled (confluentinc/librdkafka#5301), so an idle client
  never receives another reply (seen in the reliability suite: every later ask of one tenant's
  client was `no_reply` while the workers answered it in time).
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from manifold.query import protocol
from manifold.query.auth import mint_token, signing_key
from manifold.query.types import QueryReply, QueryRequest
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import ManifoldError, Transient
from manifold.shared.kafka import ensure_topics, producer_config, send_sync


class QueryTimeout(ManifoldError):
    """No reply to the request arrived before its deadline (plus grace)."""

    def __init__(self, request_id: str, waited_s: float) -> None:
        super().__init__(f"no reply to {request_id} within {waited_s:.1f}s")
        self.request_id = request_id
        self.waited_s = waited_s


def mint_dev_token(settings: ManifoldSettings, tenant: str, subject: str = "cli") -> str:
    """A principal token for `tenant`, signed with the configured signing key
    (`auth.signing_key`: `query.token_signing_key_file`, else `query.token_key`, else the
    development key when `query.allow_dev_key` is true; `auth.InsecureKey` otherwise): for the
    CLI, tests and local tools, never for end users."""
    q = settings.query
    algorithm, key = signing_key(settings)
    return mint_token(key, tenant_id=tenant, subject=subject, issuer=q.token_issuer, audience=q.token_audience,
                      ttl_s=q.token_ttl_s, algorithm=algorithm)


class QueryClient:
    """Sends requests with one bearer token and waits for their replies on `reply_topic`
    (default `settings.query.reply_topic`; a topic under it, `<reply_topic>.<suffix>`, is allowed
    and created if missing)."""

    def __init__(self, settings: ManifoldSettings, *, token: str, reply_topic: str | None = None,
                 grace_s: float = 2.0) -> None:
        q = settings.query
        self.settings = settings
        self.token = token
        self.reply_topic = reply_topic or q.reply_topic
        if not protocol.reply_topic_allowed(self.reply_topic, q.reply_topic):
            raise ValueError(f"reply topic {self.reply_topic!r} is not {q.reply_topic!r} or under it")
        self.grace_s = grace_s
        self._bootstrap = settings.kafka.bootstrap_servers
        self._client_id = f"manifold-query-client-{uuid.uuid4().hex[:8]}"
        ensure_topics(self._bootstrap, {q.request_topic, self.reply_topic}, topics.DEFAULT_PARTITIONS)
        self._rebuild = False  # set by librdkafka's error callback or a timed-out ask; read before each request
        self._producer, self._consumer = self._connect()
        self._lock = threading.Lock()
        self._closed = False
        self._assign_at_end()

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._rebuild = True

    def _connect(self) -> tuple[Producer, Consumer]:
        producer = Producer({**producer_config(self._bootstrap, self._client_id), "error_cb": self._on_error})
        consumer = Consumer({
            "bootstrap.servers": self._bootstrap,
            "group.id": self._client_id,  # required by librdkafka; never joined (assign only, no commits)
            "client.id": self._client_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "latest",
            "error_cb": self._on_error,
        })
        return producer, consumer

    def _reconnect_if_lost(self, timeout_s: float) -> None:
        """Serve the reply consumer's pending events (replies queued now answer earlier requests,
        never the next one; at most 0.2 s of them); if a handle lost every broker since, or the
        last ask timed out, replace both handles."""
        drain_until = time.monotonic() + 0.2
        while self._consumer.poll(0) is not None and time.monotonic() < drain_until:
            pass
        if not self._rebuild:
            return
        old_producer, old_consumer = self._producer, self._consumer
        self._rebuild = False
        self._producer, self._consumer = self._connect()
        for closing in (lambda: old_consumer.close(), lambda: old_producer.flush(0)):
            try:
                closing()
            except Exception:  # noqa: BLE001 - the old handles are dropped either way
                pass
        try:
            self._assign_at_end(timeout_s)
        except Transient:
            self._rebuild = True  # not connected yet: try again before the next request
            raise

    def _assign_at_end(self, timeout_s: float = 30.0) -> None:
        """Assign every reply partition at its high watermark (retrying while a just-created
        topic has no leader yet); raise `Transient` if that does not succeed in `timeout_s`."""
        give_up = time.monotonic() + timeout_s
        while True:
            try:
                meta = self._consumer.list_topics(self.reply_topic, timeout=10)
                parts = sorted(meta.topics[self.reply_topic].partitions)
                if not parts:
                    raise Transient(f"reply topic {self.reply_topic} has no partitions yet")
                assignment = []
                for p in parts:
                    _low, high = self._consumer.get_watermark_offsets(TopicPartition(self.reply_topic, p),
                                                                      timeout=10, cached=False)
                    assignment.append(TopicPartition(self.reply_topic, p, high))
                self._consumer.assign(assignment)
                return
            except (KafkaException, Transient) as err:
                if time.monotonic() >= give_up:
                    raise Transient(f"cannot read the end of reply topic {self.reply_topic}: {err}") from None
                time.sleep(0.2)

    def ask(self, question: str | None = None, plan: dict[str, Any] | None = None, *,
            deadline_ms: int | None = None, session_id: str | None = None, continuation: str | None = None,
            choice: str | None = None, as_of: datetime | None = None) -> QueryReply:
        """Send one request and return its reply (see module guarantees)."""
        q = self.settings.query
        ms = min(deadline_ms or q.default_deadline_ms, q.max_deadline_ms)
        request = QueryRequest(
            request_id=f"q-{uuid.uuid4().hex}",
            reply_topic=self.reply_topic,
            deadline=protocol.utcnow() + timedelta(milliseconds=ms),
            question=question, plan=plan, session_id=session_id, continuation=continuation, choice=choice,
            as_of=as_of,
        )
        return self.send(request)

    def send(self, request: QueryRequest, *, token: str | None = None) -> QueryReply:
        """Send a prepared request (its reply_topic must be this client's) and wait for its reply.
        `token` overrides the client's token for this request (a gateway forwards its caller's)."""
        if request.reply_topic != self.reply_topic:
            raise ValueError(f"request replies to {request.reply_topic!r}, this client listens on {self.reply_topic!r}")
        with self._lock:
            if self._closed:
                raise RuntimeError("client is closed")
            key, value, headers = protocol.encode_request(request, token or self.token)
            wait_s = max(0.0, (request.deadline - protocol.utcnow()).total_seconds()) + self.grace_s
            give_up = time.monotonic() + wait_s
            try:
                self._reconnect_if_lost(max(wait_s, 0.1))
            except Transient as exc:
                raise QueryTimeout(request.request_id, wait_s) from exc
            try:  # the send shares the deadline: an unreachable broker must not hold the caller past it
                send_sync(self._producer, self.settings.query.request_topic, key, value, headers,
                          timeout=max(give_up - time.monotonic(), 0.1))
            except Transient as exc:
                raise QueryTimeout(request.request_id, wait_s) from exc
            while (left := give_up - time.monotonic()) > 0:
                msg = self._consumer.poll(min(left, 0.5))
                if msg is None or msg.error() is not None or (raw := msg.value()) is None:
                    continue
                if msg.key() is not None and msg.key() != key:
                    continue  # another request's reply
                try:
                    reply = protocol.decode_reply(raw)
                except ValueError:
                    continue
                if reply.request_id == request.request_id:
                    return reply
            self._rebuild = True  # the request was acknowledged but no reply came: listen afresh
            raise QueryTimeout(request.request_id, wait_s)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._consumer.close()
            self._producer.flush(5)

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
