"""The stage runner: consume a micro-batch → decode → handle (batch, with bounded retries) →
produce every output → commit. Kafka and the embedded profile's bus use this same runner: it is
typed against the project's bus port (`shared/messaging.py`), and waits for acknowledgements
through its one implementation (`messaging.Deliveries`).

Guarantees:
- **Micro-batches.** `run` consumes up to `BatchPolicy.max_messages` messages, waiting at most
  `linger_s` for them, and hands them to the stage in groups of at most `max_bytes` of values.
  A stage with a `step_batch` gets the whole group in one call (cross-document encoding, one
  transaction per store); other stages get one `step` call per message.
- **Per-document outcomes.** `step_batch` returns one outcome per item (a result, None, or the
  exception that item raised), so one bad document goes to the DLQ with its own reason while the
  rest of its batch proceeds. If the batch call itself fails (after `Transient` retries) the
  runner falls back to `step` per item, so a failure is always attributed to its own document.
- **Per-key order.** Outputs are produced in input order; a partition's messages stay in order.
- **At-least-once with idempotent handlers.** Offsets are committed only after every output (or
  dead letter) of the batch is acknowledged by the broker, so a crash replays the batch, never
  loses it (see docs/ingestion.md 'Runtime: why confluent-kafka').
- **Poison-proof.** Errors are routed in one place: `BadInput` goes to the DLQ at once;
  `Transient` is retried with exponential backoff up to `max_attempts`, then dead-lettered as
  `exhausted`; any other exception (a handler bug, a RecursionError from absurdly nested JSON, a
  MemoryError, a wrong type) is dead-lettered as `poison` with its traceback. Building the dead
  letter never raises on the message's content (a value too large for the DLQ is truncated and
  the error says so). One bad message never stops the partition.
- If the DLQ itself cannot be written the runner stops without committing (the batch will be
  processed again), rather than dropping it.
- **Rejoin.** Given a `rejoin` hook (Kafka workers: `shared/rejoin.py`), the runner hands it the
  consumer before each consume, between batches (nothing consumed is uncommitted then), and uses
  the consumer it returns: the same, or a rebuilt one that has already subscribed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from manifold.shared import metrics, topics, tracing
from manifold.shared.dlq import DeadLetter, ErrorKind, b64
from manifold.shared.errors import BadInput, Transient
from manifold.shared.kafka import commit_sync
from manifold.shared.messaging import Consumer, Deliveries, Message, Producer

log = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Output:
    topic: str
    key: bytes
    value: bytes


Outcome = Any
"""What `step_batch` returns per item: the step's result, None, or the exception it raised."""


@dataclass(frozen=True)
class StageSpec(Generic[In, Out]):
    """How one stage meets the bus: where it reads, how it decodes, what it runs, where it writes."""

    name: str
    source: str
    decode: Callable[[bytes], In]
    step: Callable[[In], Out | None]
    route: Callable[[Out], Output]
    none_means: str = "stale"
    """What a step returning None means: `stale` (skipped, counted as such) or `done` (a final
    stage with nothing downstream, counted as processed)."""
    tombstones: bool = False
    """True on a compacted topic whose keys may be erased (the ACL applier's): a message without a
    value is a compaction marker, handed to `step` as None; otherwise it is dead-lettered."""
    step_batch: Callable[[list[In]], list[Outcome]] | None = None
    """Optional: handle several items at once; must return one outcome per item, in order (the
    item's result, None, or the exception that item raised) and raise only for a failure of the
    whole batch (e.g. a store outage: `Transient`)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_s: float = 0.5
    max_s: float = 10.0


@dataclass(frozen=True)
class BatchPolicy:
    """Bounds of one micro-batch: count, bytes of message values, and how long to wait for it."""

    max_messages: int = 64
    max_bytes: int = 8 * 1024 * 1024
    linger_s: float = 0.2


DLQ_VALUE_LIMIT = 600_000
"""Largest original value kept in a dead letter (base64 grows it by 4/3; the producer's limit is
1,000,000 bytes per message). Larger values are truncated and the error says so."""


class StageRunner(Generic[In, Out]):
    """Runs one stage in a consumer group `manifold.<stage>` until `stop` is set."""

    def __init__(
        self,
        spec: StageSpec[In, Out],
        consumer: Consumer,
        producer: Producer,
        retry: RetryPolicy,
        batch: BatchPolicy | None = None,
        lag: Callable[[], int] | None = None,
        rejoin: Callable[[Consumer], Consumer] | None = None,
    ) -> None:
        self.spec = spec
        self.consumer = consumer
        self.producer = producer
        self.retry = retry
        self.batch = batch or BatchPolicy()
        self.lag = lag
        """How many messages of the source wait for this stage (`kafka.consumer_lag`, `bus.lag`);
        None: no lag gauge."""
        self.rejoin = rejoin
        """Called between batches with the consumer; returns the one to use from now on (the same,
        or a rebuilt and subscribed one: `rejoin.RejoinWatchdog.check`). None: never replaced."""
        self._lag_checked = 0.0
        self._delivery = Deliveries(producer)
        self._spans: dict[int, Any] = {}  # the current group's span per message (id(msg))

    # -- messages ----------------------------------------------------------------------------
    def process(self, msg: Message) -> None:
        """Handle one message completely (output or dead letter acknowledged), then commit it."""
        self._handle_group([msg])
        self._delivery.flush()
        self._commit(message=msg)

    def process_batch(self, msgs: list[Message]) -> None:
        """Handle messages (in groups of at most `batch.max_bytes`), wait until all their outputs
        are acknowledged, then commit the consumer's positions (just past the last of them)."""
        for group in _by_bytes(msgs, self.batch.max_bytes):
            self._handle_group(group)
        self._delivery.flush()
        self._commit()

    def _commit(self, message: Message | None = None) -> None:
        """Commit; a commit lost to a rebalance is logged, and the batch will be re-delivered."""
        if not commit_sync(self.consumer, message):
            log.warning("%s: commit skipped after a rebalance; the batch will be re-delivered", self.spec.name)

    def _retrying(self) -> Retrying:
        name = self.spec.name

        def count_retry(state: RetryCallState) -> None:
            metrics.RETRIED.labels(name).inc()
            log.warning("%s: transient failure (attempt %d): %s", name, state.attempt_number,
                        state.outcome.exception() if state.outcome else "?")

        return Retrying(
            stop=stop_after_attempt(self.retry.max_attempts),
            wait=wait_exponential(multiplier=self.retry.initial_s, max=self.retry.max_s),
            retry=retry_if_exception_type(Transient),
            before_sleep=count_retry,
            reraise=True,
        )

    def _handle_group(self, msgs: list[Message]) -> None:
        """Decode each message, run the stage over the decodable ones, route every outcome."""
        started = time.monotonic()
        self._spans = {id(msg): tracing.start_span(f"stage {self.spec.name}", parent=_headers(msg)) for msg in msgs}
        try:
            self._handle_decoded(msgs)
        finally:
            for span in self._spans.values():
                span.end()
            self._spans = {}
        per_message = (time.monotonic() - started) / max(len(msgs), 1)
        for _ in msgs:  # busy time shared by the batch's messages (sum = the batch's time)
            metrics.LATENCY.labels(self.spec.name).observe(per_message)

    def _handle_decoded(self, msgs: list[Message]) -> None:
        decoded: list[tuple[Message, Any]] = []
        for msg in msgs:
            try:
                value = msg.value()
                if value is None and not self.spec.tombstones:
                    raise BadInput("message has no value (tombstone) on a stage topic")
                item = None if value is None else self.spec.decode(value)
                decoded.append((msg, item))
                self._spans[id(msg)].set_attributes(_span_ids(item))
            except Exception as err:  # noqa: BLE001 - any decode failure is this message's own
                self._route_error(msg, err, 1)
        if self.spec.step_batch is not None and len(decoded) > 1:
            outcomes = self._run_batch([item for _, item in decoded])
        else:
            outcomes = None
        for i, (msg, item) in enumerate(decoded):
            if outcomes is None or isinstance(outcomes[i], Transient):
                self._handle_one(msg, item)  # alone, with its own retries
            else:
                self._finish(msg, outcomes[i], 1)

    def _run_batch(self, items: list[Any]) -> list[Outcome] | None:
        """The batch's outcomes, or None when the batch call failed as a whole (then each item is
        handled alone, so the failure lands on the document that caused it)."""
        assert self.spec.step_batch is not None
        try:
            for attempt in self._retrying():
                with attempt:
                    outcomes = self.spec.step_batch(items)
            if not isinstance(outcomes, list) or len(outcomes) != len(items):
                raise TypeError(f"step_batch returned {type(outcomes).__name__}, not {len(items)} outcomes")
            return outcomes
        except Exception as err:  # noqa: BLE001 - fall back to one item at a time
            log.warning("%s: batch of %d failed as a whole (%s: %s); handling each message alone",
                        self.spec.name, len(items), type(err).__name__, _safe_str(err)[:200])
            return None

    def _handle_one(self, msg: Message, item: Any) -> None:
        attempts = 0
        try:
            for attempt in self._retrying():
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    result = self.spec.step(item)
        except Exception as err:  # noqa: BLE001 - routed below
            self._route_error(msg, err, attempts)
            return
        self._finish(msg, result, attempts)

    def _finish(self, msg: Message, outcome: Outcome, attempts: int) -> None:
        """Route one item's outcome: an exception to the DLQ, a result downstream."""
        if isinstance(outcome, BaseException):
            self._route_error(msg, outcome, attempts)
            return
        name = self.spec.name
        try:
            if outcome is None and self.spec.none_means == "done":
                metrics.PROCESSED.labels(name).inc()
            elif outcome is None:
                metrics.SKIPPED.labels(name, self.spec.none_means).inc()
            else:
                out = self.spec.route(outcome)
                span = self._spans.get(id(msg))
                self._delivery.send(out.topic, out.key, out.value,
                                    tracing.headers_for(span) if span is not None else None)
                metrics.PROCESSED.labels(name).inc()
        except Exception as err:  # noqa: BLE001 - e.g. an output the bus refuses (too large)
            self._route_error(msg, err, attempts)

    def _route_error(self, msg: Message, err: BaseException, attempts: int) -> None:
        if isinstance(err, BadInput):
            self._dead_letter(msg, err.error_kind, _safe_str(err), max(attempts, 1))  # bad_input or unauthorized
        elif isinstance(err, Transient):
            self._dead_letter(msg, "exhausted", f"{_safe_str(err)} (after {attempts} attempts)", max(attempts, 1))
        else:
            try:
                detail = "".join(traceback.format_exception(err))[-8000:]
            except Exception:  # noqa: BLE001 - a traceback that cannot be rendered
                detail = ""
            self._dead_letter(msg, "poison", f"{type(err).__name__}: {_safe_str(err)}\n{detail}", max(attempts, 1))

    def _dead_letter(self, msg: Message, kind: ErrorKind, error: str, attempts: int) -> None:
        raw = msg.value() or b""
        if not isinstance(raw, bytes | bytearray):
            raw = b""
        if len(raw) > DLQ_VALUE_LIMIT:
            error = f"[original value truncated from {len(raw)} to {DLQ_VALUE_LIMIT} bytes] {error}"
            raw = bytes(raw[:DLQ_VALUE_LIMIT])
        key = msg.key()
        key = bytes(key[:4096]) if isinstance(key, bytes | bytearray) else None
        letter = DeadLetter(
            stage=self.spec.name,
            error_kind=kind,
            error=error[:20000],
            attempts=attempts,
            source_topic=msg.topic(),  # type: ignore[arg-type]  # Optional in the client's types; set when consumed
            source_partition=msg.partition(),  # type: ignore[arg-type]  # as above
            source_offset=msg.offset(),  # type: ignore[arg-type]  # as above
            key_b64=b64(key),
            value_b64=b64(bytes(raw)) or "",
            **_identity(msg.value()),
        )
        log.error("%s: dead-lettering %s/%d/%d (%s): %s", self.spec.name, msg.topic(), msg.partition(),
                  msg.offset(), kind, error.splitlines()[0][:500] if error else "")
        # If the DLQ is unreachable the flush raises Transient: the runner stops, nothing is committed.
        self._delivery.send(topics.DLQ, key, letter.model_dump_json().encode(), letter.headers())
        metrics.FAILED.labels(self.spec.name, kind).inc()

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, poll_s: float | None = None, batch: int | None = None) -> None:
        """Consume micro-batches (count and linger from `self.batch`) until `stop` is set, then
        close the consumer (the current one, if `rejoin` replaced it)."""
        self.consumer.subscribe([self.spec.source])
        linger = self.batch.linger_s if poll_s is None else poll_s
        count = batch or self.batch.max_messages
        try:
            while not stop.is_set():
                if self.rejoin is not None:
                    self.consumer = self.rejoin(self.consumer)
                msgs = self.consumer.consume(num_messages=count, timeout=max(linger, 0.05))
                self._update_lag()
                good = []
                for msg in msgs:
                    if msg.error() is not None:
                        log.warning("%s: consumer error: %s", self.spec.name, msg.error())
                    else:
                        good.append(msg)
                if good:
                    self.process_batch(good)
        finally:
            self.consumer.close()

    def _update_lag(self, every_s: float = 5.0) -> None:
        now = time.monotonic()
        if self.lag is None or now - self._lag_checked < every_s:
            return
        self._lag_checked = now
        try:
            metrics.LAG.labels(self.spec.name).set(self.lag())
        except Exception as err:  # noqa: BLE001 - metrics must never stop the worker
            log.debug("lag update failed: %s", err)


def _by_bytes(msgs: list[Message], max_bytes: int) -> list[list[Message]]:
    """Consecutive groups of `msgs`, each with at most `max_bytes` of values (at least one message)."""
    groups: list[list[Message]] = []
    size = max_bytes + 1
    for msg in msgs:
        value = msg.value()
        n = len(value) if isinstance(value, bytes | bytearray) else 0
        if not groups or size + n > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(msg)
        size += n
    return groups


def _safe_str(err: BaseException) -> str:
    """`str(err)`, or its type name if even that fails (never raises)."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001
        return type(err).__name__


def _identity(value: bytes | None) -> dict[str, Any]:
    """Best-effort tenant/document/version of a message for the DLQ record (never raises: not on
    invalid UTF-8, not on JSON nested deeper than the interpreter's recursion limit)."""
    try:
        if not isinstance(value, bytes | bytearray) or len(value) > DLQ_VALUE_LIMIT:
            return {}
        data = json.loads(value or b"")
        if not isinstance(data, dict):
            return {}
        doc = data.get("doc")
        if not isinstance(doc, dict):
            doc = data
        out: dict[str, Any] = {}
        if isinstance(doc.get("tenant_id"), str):
            out["tenant_id"] = doc["tenant_id"][:128]
        if isinstance(doc.get("document_id"), str):
            out["document_id"] = doc["document_id"][:512]
        if isinstance(doc.get("version"), int) and not isinstance(doc.get("version"), bool) \
                and -2**63 <= doc["version"] < 2**63:
            out["version"] = doc["version"]
        return out
    except Exception:  # noqa: BLE001 - identity is a courtesy; the dead letter must still be written
        return {}


def _headers(msg: Message) -> Any:
    try:
        return msg.headers()
    except Exception:  # noqa: BLE001 - a message without readable headers starts a new trace
        return None


def _span_ids(item: Any) -> dict[str, Any]:
    """The ids a stage span carries (never content)."""
    ref = getattr(item, "doc", item)  # a LoadNotice names its document in `doc`
    ids = {k: getattr(ref, k, None) for k in ("tenant_id", "document_id", "version")}
    return {f"manifold.{k}": v for k, v in ids.items() if isinstance(v, str | int)}
