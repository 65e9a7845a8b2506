"""The query worker: consumes requests, answers them, produces replies (DESIGN.md §4, §5).

Loop order per message: decode → verify token → deadline check → answer → produce the reply →
wait for the broker's acknowledgement → commit the request's offset.

Guarantees:
- At-least-once: a request's offset is committed only after its reply was acknowledged by Kafka.
  A reply that cannot be delivered is retried (with backoff) until it is, or until `stop` is
  set; then the offset stays uncommitted and the request is served again by whichever worker
  gets the partition next. Answers are reads, so a duplicate reply is harmless; clients
  de-duplicate by request id.
- Nothing in a request can bypass the token: an undecodable request, a missing/invalid token or
  a body naming a tenant gets a `refused` or `error` reply with the reason and no data, and the
  answerer is never called for it. The answerer sees only verified `Principal`s.
- The answerer cannot crash the loop: an exception becomes an `error` reply.
- No request can stop a worker, whatever its size, shape or bytes (issue 13, finding 1): a request
  that cannot be decoded gets an `error` reply when a request id can be read from it (its body or
  its Kafka key), else it is counted (`manifold_query_undecodable_total`), logged and skipped; its
  offset is committed either way. As a second line of defence the loop itself catches any
  exception raised while handling one message, replies `error` (or skips), commits and goes on;
  only `stop` ends it.
- Replies go only to the configured reply topic or topics under it (`protocol.decode_request`).
  If a reply topic under it does not exist, the error is sent to the configured reply topic.
- Several workers (threads or processes) in the group `manifold.query` share the partitions of
  the request topic: scale out by starting more.
- A reply still undelivered 30 s after its first attempt is retried on a new producer
  (`manifold_query_producer_renewed_total`): after a broker restart librdkafka can leave a
  producer without any broker for good (confluentinc/librdkafka#5301).
- A worker's consumer that has dropped out of its group (after a broker outage) is rebuilt
  between requests by the rejoin watchdog (`shared/rejoin.py`, metric
  `manifold_consumer_rebuilt_total{stage="query"}`); requests it had not committed are served
  again by whichever member gets their partition.
- Metrics (`manifold_query_requests_total{status}`, `manifold_query_seconds{status}`) have
  bounded labels; one structured log line per request (request_id, tenant, status, elapsed_ms).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as KafkaProducer
from prometheus_client import Counter, Histogram

from manifold.query import protocol
from manifold.query.auth import TokenError, TokenVerifier
from manifold.query.composition import Answerer
from manifold.query.types import Principal, QueryReply, QueryRequest
from manifold.shared import topics, tracing
from manifold.shared.config import ManifoldSettings
from manifold.shared.kafka import commit_sync, consumer_config, ensure_topics, producer_config
from manifold.shared.messaging import Consumer, Deliveries, Message, Producer
from manifold.shared.rejoin import kafka_watchdog

log = logging.getLogger(__name__)

GROUP_ID = "manifold.query"
REQUIRED_SCOPE = "query:read"

REQUESTS = Counter("manifold_query_requests_total", "Query requests finished, by reply status", ["status"])
LATENCY = Histogram(
    "manifold_query_seconds",
    "Time from taking a request to its reply being acknowledged, by reply status",
    ["status"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
DELIVERY_RETRIES = Counter("manifold_query_reply_retries_total", "Reply deliveries retried")
UNDECODABLE = Counter("manifold_query_undecodable_total",
                      "Requests skipped without a reply: nothing in them says who to answer")
PRODUCER_RENEWED = Counter("manifold_query_producer_renewed_total",
                           "Reply producers replaced after a reply stayed undelivered (left without brokers)")
UNHANDLED = Counter("manifold_query_unhandled_total",
                    "Messages whose handling raised inside the worker loop (answered error or skipped)")

# Delivery failures that retrying the same topic cannot fix.
_PERMANENT = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
              KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}


@dataclass(frozen=True)
class Outcome:
    """What to send for one request: the reply (None: nobody to answer, skip it), where, and for
    the log line the tenant."""

    reply: QueryReply | None
    topic: str
    tenant: str


def handle(msg_value: bytes | None, headers: Any, key: bytes | None, *, settings: ManifoldSettings,
           verifier: TokenVerifier, answerer: Answerer) -> Outcome:
    """Turn one request message into the reply to send (pure apart from the answerer; never raises)."""
    started = time.monotonic()
    allowed = settings.query.reply_topic

    def ms() -> float:
        return round((time.monotonic() - started) * 1000, 3)

    try:
        return _handle(msg_value, headers, key, settings, verifier, answerer, ms)
    except Exception as err:  # noqa: BLE001 - belt and braces: nothing a request holds may escape
        log.exception("handling a request raised %s; replying error", type(err).__name__)
        return fallback_outcome(key, allowed, err)


def fallback_outcome(key: bytes | None, topic: str, err: BaseException) -> Outcome:
    """The `error` reply (keyed by the Kafka key) for a message whose handling raised; no reply
    (skip) when the message has no key to correlate it by."""
    bad = protocol.BadRequest(f"request could not be handled ({type(err).__name__})")
    return Outcome(protocol.bad_request_reply(bad, key) if key else None, topic, "-")


def _handle(msg_value: bytes | None, headers: Any, key: bytes | None, settings: ManifoldSettings,
            verifier: TokenVerifier, answerer: Answerer, ms: Any) -> Outcome:
    allowed = settings.query.reply_topic
    try:
        request, token = protocol.decode_request(msg_value, headers, allowed_reply_topic=allowed)
    except protocol.BadRequest as err:
        if err.request_id is None and not key:
            return Outcome(None, allowed, "-")  # nobody to tell: counted, logged and skipped
        return Outcome(protocol.bad_request_reply(err, key, elapsed_ms=ms()), err.reply_topic or allowed, "-")
    try:
        principal = verifier.verify(token)
    except TokenError as err:
        reply = protocol.status_reply(request.request_id, "refused", f"invalid token: {err.reason}",
                                      policy=("token: refused",), elapsed_ms=ms())
        return Outcome(reply, request.reply_topic, "-")
    if REQUIRED_SCOPE not in principal.scopes:
        reply = protocol.status_reply(request.request_id, "refused", f"token lacks scope {REQUIRED_SCOPE!r}",
                                      policy=("token: ok", "scope: refused"), elapsed_ms=ms())
        return Outcome(reply, request.reply_topic, principal.tenant_id)
    now = protocol.utcnow()
    if request.deadline <= now:
        reply = protocol.status_reply(request.request_id, "error", "deadline passed before work started",
                                      policy=("token: ok",), elapsed_ms=ms())
        return Outcome(reply, request.reply_topic, principal.tenant_id)
    latest = now + timedelta(milliseconds=settings.query.max_deadline_ms)
    if request.deadline > latest:  # a caller cannot hold a worker longer than the configured cap
        request = request.model_copy(update={"deadline": latest})
    with tracing.span("query request", parent=headers):  # continues the caller's trace, if it sent one
        reply = _answer(answerer, request, principal, ms)
    return Outcome(reply, request.reply_topic, principal.tenant_id)


def _answer(answerer: Answerer, request: QueryRequest, principal: Principal, ms: Any) -> QueryReply:
    try:
        reply = answerer.answer(request, principal)
        if not isinstance(reply, QueryReply):
            raise TypeError(f"answerer returned {type(reply).__name__}, not QueryReply")
    except Exception as err:  # noqa: BLE001 - an answerer bug must not stop the worker
        log.exception("answerer failed on request %s", request.request_id)
        return protocol.status_reply(request.request_id, "error", f"answerer failed: {type(err).__name__}: {err}"[:500],
                                     policy=("token: ok",), elapsed_ms=ms())
    if reply.request_id != request.request_id:  # correlation is the worker's promise, not the answerer's
        reply = reply.model_copy(update={"request_id": request.request_id})
    return reply


class QueryWorker:
    """One consumer in the query group: serves requests one at a time until `stop` is set."""

    def __init__(self, settings: ManifoldSettings, answerer: Answerer, consumer: Consumer, producer: Producer,
                 verifier: TokenVerifier, *, retry_initial_s: float = 0.5, retry_max_s: float = 10.0,
                 rejoin: Callable[[Any], Any] | None = None,
                 new_producer: Callable[[], Producer] | None = None, renew_producer_after_s: float = 30.0) -> None:
        """`rejoin`: called with the consumer between requests, returns it or a rebuilt and
        subscribed one (`shared.rejoin.RejoinWatchdog.check`); None: never replaced.
        `new_producer`: makes a fresh producer; a reply still undelivered `renew_producer_after_s`
        after its first attempt is retried on a new one (librdkafka#5301 can leave a producer
        without any broker after a broker restart, and retrying on it would never end); None:
        the producer is never replaced."""
        self.rejoin = rejoin
        self.new_producer = new_producer
        self.renew_producer_after_s = renew_producer_after_s
        self.settings = settings
        self.answerer = answerer
        self.consumer = consumer
        self.producer = producer
        self.verifier = verifier
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s

    def run(self, stop: threading.Event, poll_s: float = 0.5) -> None:
        self.consumer.subscribe([self.settings.query.request_topic])
        try:
            while not stop.is_set():
                if self.rejoin is not None:
                    self.consumer = self.rejoin(self.consumer)
                got = self.consumer.consume(num_messages=1, timeout=poll_s)
                if not got:
                    continue
                msg = got[0]
                if msg.error() is not None:
                    log.warning("query consumer error: %s", msg.error())
                    continue
                try:
                    if not self.process(msg, stop):
                        return  # stopping with an undelivered reply: leave the offset uncommitted
                except Exception as err:  # noqa: BLE001 - one message must never stop the worker
                    UNHANDLED.inc()
                    log.exception("query worker: handling %s/%s/%s raised %s; answering error and going on",
                                  msg.topic(), msg.partition(), msg.offset(), type(err).__name__)
                    self._recover(msg, err, stop)
        finally:
            self.producer.flush(5)
            self.consumer.close()

    def _recover(self, msg: Message, err: BaseException, stop: threading.Event) -> None:
        """After `process` raised: reply `error` if the message can be correlated, then commit it.
        Failures here are logged and swallowed (the message is then served again later)."""
        try:
            out = fallback_outcome(msg.key(), self.settings.query.reply_topic, err)
            if out.reply is not None and not self._deliver(out, stop):
                return
            commit_sync(self.consumer, msg)
        except Exception:  # noqa: BLE001 - the loop goes on; the offset stays uncommitted
            log.exception("query worker: could not reply to or commit %s/%s/%s", msg.topic(), msg.partition(),
                          msg.offset())

    def process(self, msg: Message, stop: threading.Event) -> bool:
        """Serve one request; True once its reply is acknowledged (or it was skipped as
        unanswerable) and its offset committed."""
        started = time.monotonic()
        out = handle(msg.value(), msg.headers(), msg.key(), settings=self.settings, verifier=self.verifier,
                     answerer=self.answerer)
        if out.reply is None:
            UNDECODABLE.inc()
            log.warning("query: skipped an undecodable request with no request id or key at %s/%s/%s",
                        msg.topic(), msg.partition(), msg.offset())
            commit_sync(self.consumer, msg)
            return True
        if not self._deliver(out, stop):
            return False
        if not commit_sync(self.consumer, msg):
            log.warning("request %s: commit skipped after a rebalance; it may be answered again "
                        "(the client matches replies by request id)", out.reply.request_id)
        elapsed = time.monotonic() - started
        status = out.reply.status
        REQUESTS.labels(status).inc()
        LATENCY.labels(status).observe(elapsed)
        log.info("query request_id=%s tenant=%s status=%s elapsed_ms=%.1f%s", out.reply.request_id, out.tenant,
                 status, elapsed * 1000, f" error={out.reply.error!r}" if out.reply.error else "")
        return True

    def _deliver(self, out: Outcome, stop: threading.Event) -> bool:
        """Produce the reply and wait for the acknowledgement, retrying until done or `stop`."""
        topic, reply = out.topic, out.reply
        assert reply is not None
        delay = self.retry_initial_s
        renew_at = time.monotonic() + self.renew_producer_after_s
        while True:
            if self.new_producer is not None and time.monotonic() >= renew_at:
                self._renew_producer(reply.request_id)
                renew_at = time.monotonic() + self.renew_producer_after_s
            err = self._send_once(topic, reply.request_id.encode(), protocol.encode_reply(reply), stop)
            if err is None:
                return True
            if isinstance(err, str):  # "stopped"
                return False
            code = err.code()
            default = self.settings.query.reply_topic
            if code == KafkaError.MSG_SIZE_TOO_LARGE and reply.status != "error":
                reply = protocol.status_reply(reply.request_id, "error", "reply too large for the bus",
                                              policy=reply.trace.policy)
            elif code in _PERMANENT and topic != default:
                log.warning("reply topic %s unusable (%s); telling the client on %s", topic, err, default)
                reply = protocol.status_reply(reply.request_id, "error", f"reply topic {topic!r} unusable: {err.str()}",
                                              policy=reply.trace.policy)
                topic = default
            else:
                DELIVERY_RETRIES.inc()
                log.warning("reply %s to %s not delivered (%s); retrying in %.1fs", reply.request_id, topic, err, delay)
                if stop.wait(delay):
                    return False
                delay = min(delay * 2, self.retry_max_s)

    def _renew_producer(self, request_id: str) -> None:
        """Replace the producer with a new one, bootstrapped again (the old one is dropped; a reply
        it still delivers is a duplicate, which clients skip by request id)."""
        assert self.new_producer is not None
        old, self.producer = self.producer, self.new_producer()
        PRODUCER_RENEWED.inc()
        log.warning("reply %s undelivered for %.0fs: retrying on a new producer", request_id,
                    self.renew_producer_after_s)
        try:
            old.flush(0)
        except Exception:  # noqa: BLE001 - the old producer is dropped either way
            pass

    def _send_once(self, topic: str, key: bytes, value: bytes, stop: threading.Event) -> KafkaError | str | None:
        """None once the broker acknowledged the reply; its error if refused; "stopped" when
        `stop` was set before an answer came."""
        deliveries = Deliveries(self.producer, timeout=1.0, bus="kafka")
        try:
            deliveries.send(topic, key, value)
        except KafkaException as err:  # rejected locally, e.g. message too large
            return err.args[0]  # type: ignore[no-any-return]
        while True:
            report = deliveries.wait()
            if report.failed:
                return report.failed[0][1]  # type: ignore[no-any-return]
            if report.acked:
                return None
            if stop.is_set():
                return "stopped"


def _producer(settings: ManifoldSettings, client_id: str) -> KafkaProducer:
    config = producer_config(settings.kafka.bootstrap_servers, client_id)
    config["message.timeout.ms"] = 30_000  # learn about an undeliverable reply in bounded time
    return KafkaProducer(config)


def serve(settings: ManifoldSettings, stop: threading.Event, answerer: Answerer, *, threads: int = 1,
          group_id: str = GROUP_ID) -> None:
    """Serve query requests with `threads` consumers in `group_id` until `stop` is set.

    Ensures the request and reply topics exist (`topics.DEFAULT_PARTITIONS` partitions). Refuses
    to start with an insecure token key (`auth.InsecureKey`). The answerer is shared by the
    threads and must be thread-safe. Does not close the answerer (its owner does) and does not
    serve /metrics (`start_metrics` does). Raises RuntimeError if a consumer thread died.
    """
    if threads < 1:
        raise ValueError("threads must be >= 1")
    verifier = TokenVerifier.from_settings(settings)
    q = settings.query
    ensure_topics(settings.kafka.bootstrap_servers, (q.request_topic, q.reply_topic), topics.DEFAULT_PARTITIONS)
    failures: list[BaseException] = []

    def work(n: int) -> None:
        client_id = f"manifold-query-{os.getpid()}-{n}"
        bootstrap = settings.kafka.bootstrap_servers

        def new_consumer() -> Any:
            return KafkaConsumer(consumer_config(bootstrap, group_id, client_id))

        watchdog = kafka_watchdog("query", bootstrap, group_id, [q.request_topic], new_consumer)
        worker = QueryWorker(settings, answerer, new_consumer(),
                             _producer(settings, client_id), verifier,  # type: ignore[arg-type]  # confluent_kafka's stubs: invariant list headers, overloaded commit vs the bus port
                             rejoin=watchdog.check,
                             new_producer=lambda: _producer(settings, client_id))  # type: ignore[arg-type,return-value]  # as above
        try:
            worker.run(stop)
        except BaseException as err:  # a worker stops only on an unrecoverable fault
            log.exception("query worker %d stopped: %s", n, err)
            failures.append(err)
            stop.set()

    pool = [threading.Thread(target=work, args=(n,), name=f"manifold-query-{n}", daemon=True) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} query worker(s) stopped on errors: {failures[0]}")


def start_metrics(settings: ManifoldSettings) -> None:
    """Serve /metrics on `query.metrics_port` (127.0.0.1); 0 disables it."""
    if settings.query.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.query.metrics_port, addr="127.0.0.1")
