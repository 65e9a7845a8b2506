"""The Kafka stage runner: consume → decode → handle (with bounded retries) → produce → commit.

Guarantees:
- At-least-once with idempotent handlers: offsets are committed only after every output (or
  dead letter) of the messages before them is acknowledged by the broker, so a crash replays
  messages, never loses them. Messages are handled in small batches: one flush and one
  synchronous commit per batch (see README 'Why confluent-kafka').
- Errors are routed in one place: `BadInput` goes to the DLQ at once; `Transient` is retried
  with exponential backoff up to `max_attempts`, then dead-lettered as `exhausted`; any other
  exception is a handler bug and is dead-lettered as `poison` with its traceback. One bad
  message never stops the partition.
- If the DLQ itself cannot be written the runner stops without committing (the message will be
  processed again), rather than dropping it.
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

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from manifold.shared import metrics, topics
from manifold.shared.dlq import DeadLetter, ErrorKind, b64
from manifold.shared.errors import BadInput, Transient
from manifold.shared.kafka import DeliveryTracker, commit_sync

log = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Output:
    topic: str
    key: bytes
    value: bytes


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


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_s: float = 0.5
    max_s: float = 10.0


class StageRunner(Generic[In, Out]):
    """Runs one stage in a consumer group `manifold.<stage>` until `stop` is set."""

    def __init__(
        self,
        spec: StageSpec[In, Out],
        consumer: Consumer,
        producer: Producer,
        retry: RetryPolicy,
    ) -> None:
        self.spec = spec
        self.consumer = consumer
        self.producer = producer
        self.retry = retry
        self._lag_checked = 0.0
        self._delivery = DeliveryTracker(producer)

    # -- messages ----------------------------------------------------------------------------
    def process(self, msg: Message) -> None:
        """Handle one message completely (output or dead letter acknowledged), then commit it."""
        self._handle(msg)
        self._delivery.flush()
        self._commit(message=msg)

    def process_batch(self, msgs: list[Message]) -> None:
        """Handle messages in order, wait until all their outputs are acknowledged, then commit
        the consumer's positions (which are just past the last of these messages)."""
        for msg in msgs:
            self._handle(msg)
        self._delivery.flush()
        self._commit()

    def _commit(self, message: Message | None = None) -> None:
        """Commit; a commit lost to a rebalance is logged, and the batch will be re-delivered."""
        if not commit_sync(self.consumer, message):
            log.warning("%s: commit skipped after a rebalance; the batch will be re-delivered", self.spec.name)

    def _handle(self, msg: Message) -> None:
        name = self.spec.name
        started = time.monotonic()
        attempts = 0
        try:
            value = msg.value()
            if value is None:
                raise BadInput("message has no value (tombstone) on a stage topic")
            item = self.spec.decode(value)

            def count_retry(state: RetryCallState) -> None:
                metrics.RETRIED.labels(name).inc()
                log.warning("%s: transient failure (attempt %d): %s", name, state.attempt_number,
                            state.outcome.exception() if state.outcome else "?")

            for attempt in Retrying(
                stop=stop_after_attempt(self.retry.max_attempts),
                wait=wait_exponential(multiplier=self.retry.initial_s, max=self.retry.max_s),
                retry=retry_if_exception_type(Transient),
                before_sleep=count_retry,
                reraise=True,
            ):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    result = self.spec.step(item)
            if result is None and self.spec.none_means == "done":
                metrics.PROCESSED.labels(name).inc()
            elif result is None:
                metrics.SKIPPED.labels(name, self.spec.none_means).inc()
            else:
                out = self.spec.route(result)
                self._delivery.produce(out.topic, out.key, out.value)
                metrics.PROCESSED.labels(name).inc()
        except BadInput as err:
            self._dead_letter(msg, err.error_kind, str(err), max(attempts, 1))  # type: ignore[arg-type]
        except Transient as err:
            self._dead_letter(msg, "exhausted", f"{err} (after {attempts} attempts)", attempts)
        except Exception as err:  # noqa: BLE001 - a handler bug: keep the partition moving
            detail = "".join(traceback.format_exception(err))[-8000:]
            self._dead_letter(msg, "poison", f"{type(err).__name__}: {err}\n{detail}", max(attempts, 1))
        finally:
            metrics.LATENCY.labels(name).observe(time.monotonic() - started)

    def _dead_letter(self, msg: Message, kind: ErrorKind, error: str, attempts: int) -> None:
        ident = _identity(msg.value())
        letter = DeadLetter(
            stage=self.spec.name,
            error_kind=kind,
            error=error[:20000],
            attempts=attempts,
            source_topic=msg.topic(),
            source_partition=msg.partition(),
            source_offset=msg.offset(),
            key_b64=b64(msg.key()),
            value_b64=b64(msg.value() or b"") or "",
            **ident,
        )
        log.error("%s: dead-lettering %s/%d/%d (%s): %s", self.spec.name, msg.topic(), msg.partition(),
                  msg.offset(), kind, error.splitlines()[0] if error else "")
        # If the DLQ is unreachable the flush raises Transient: the runner stops, nothing is committed.
        self._delivery.produce(topics.DLQ, msg.key(), letter.model_dump_json().encode(), letter.headers())
        metrics.FAILED.labels(self.spec.name, kind).inc()

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, poll_s: float = 0.5, batch: int = 16) -> None:
        self.consumer.subscribe([self.spec.source])
        try:
            while not stop.is_set():
                msgs = self.consumer.consume(num_messages=batch, timeout=poll_s)
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
        if now - self._lag_checked < every_s:
            return
        self._lag_checked = now
        try:
            assigned: list[TopicPartition] = self.consumer.assignment()
            positions = self.consumer.position(assigned) if assigned else []
            lag = 0
            for tp in positions:
                low, high = self.consumer.get_watermark_offsets(tp, timeout=2, cached=False)
                lag += max(0, high - (tp.offset if tp.offset >= 0 else low))
            metrics.LAG.labels(self.spec.name).set(lag)
        except Exception as err:  # noqa: BLE001 - metrics must never stop the worker
            log.debug("lag update failed: %s", err)


def _identity(value: bytes | None) -> dict[str, Any]:
    """Best-effort tenant/document/version of a message for the DLQ record (never raises)."""
    try:
        data = json.loads(value or b"")
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    doc = data.get("doc") if isinstance(data.get("doc"), dict) else data
    out: dict[str, Any] = {}
    if isinstance(doc.get("tenant_id"), str):
        out["tenant_id"] = doc["tenant_id"][:128]
    if isinstance(doc.get("document_id"), str):
        out["document_id"] = doc["document_id"][:512]
    if isinstance(doc.get("version"), int):
        out["version"] = doc["version"]
    return out
