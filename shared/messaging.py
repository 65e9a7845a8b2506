"""The bus port the project owns: what the stage runner, the query worker and the DLQ tools need
from a consumer and a producer, and the one way to produce and wait for acknowledgements.

Two adapters implement `Consumer` / `Producer` / `Message`: confluent-kafka's own classes
(configured by `shared/kafka.py`) and the embedded profile's `BusConsumer` / `BusProducer`
(`shared/log_bus.py`, over `PostgresBus` or `InMemoryBus`). The protocols are the narrow subset of
confluent-kafka's interface that those callers use, so the Kafka adapter is the library itself
and nothing above this module imports confluent-kafka's classes for typing.

Guarantees of `Deliveries` (the one produce-and-wait-for-acks implementation; the stage runner,
`kafka.send_sync`, the query worker's replies and the DLQ tools all use it):
- `send` never drops a message silently: a full local queue is drained (`poll`) and the send
  retried; a local refusal (e.g. a message over the size limit) raises to the caller at once.
- `wait(timeout)` flushes and reports, for the messages sent since the previous `wait`, which the
  bus acknowledged (`acked`, by tag), which it refused (`failed`, with the error) and how many
  are still unanswered (`pending`); acknowledgements that arrive later are reported by the next
  `wait`.
- `flush()` raises `Transient` unless every message sent since the previous `wait`/`flush` was
  acknowledged, so a caller that commits offsets only after `flush()` returns never commits
  past an unacknowledged output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from manifold.shared.errors import Transient

Headers = list[tuple[str, bytes]]
DeliveryCallback = Callable[[Any, Any], None]
"""`on_delivery(error, message)`: error is None when the bus acknowledged the message."""


class Message(Protocol):
    """A consumed message (confluent-kafka's `Message` accessors)."""

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> Any: ...

    def error(self) -> Any:
        """None for a message; a bus-specific error for an error event (skip it)."""


class Consumer(Protocol):
    """One member of a consumer group: never auto-commits (the caller commits after effects)."""

    def subscribe(self, topics: list[str]) -> None: ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> Sequence[Message]:
        """Up to `num_messages` messages past this member's positions, waiting up to `timeout`."""

    def commit(self, message: Any = None, asynchronous: bool = True) -> Any:
        """Store the position just past `message`, or every current position."""

    def close(self) -> None: ...


class Producer(Protocol):
    """Appends messages; `flush` returns how many are still unacknowledged."""

    def produce(self, topic: str, *, key: bytes | None = None, value: bytes | None = None,
                headers: Headers | None = None, on_delivery: DeliveryCallback | None = None) -> None:
        """Append asynchronously; `on_delivery` learns the outcome during `poll` / `flush`."""

    def poll(self, timeout: float = 0) -> int: ...

    def flush(self, timeout: float = -1) -> int: ...


@dataclass
class DeliveryReport:
    """What one `Deliveries.wait` learned (see the module guarantees)."""

    acked: list[Any] = field(default_factory=list)
    failed: list[tuple[Any, Any]] = field(default_factory=list)
    pending: int = 0

    @property
    def complete(self) -> bool:
        return not self.failed and not self.pending


class Deliveries:
    """Produce through `producer` and learn, on `wait` / `flush`, what the bus acknowledged."""

    def __init__(self, producer: Producer, timeout: float = 60.0, *, bus: str = "the bus") -> None:
        self.producer = producer
        self.timeout = timeout
        self.bus = bus
        self._report = DeliveryReport()

    def _callback(self, tag: Any) -> DeliveryCallback:
        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None:
                self._report.acked.append(tag)
            else:
                self._report.failed.append((tag, err))
        return on_delivery

    def send(self, topic: str, key: bytes | None, value: bytes, headers: Headers | None = None,
             tag: Any = None) -> None:
        """Hand one message to the producer (asynchronously); `tag` names it in the report."""
        callback = self._callback(tag)
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers, on_delivery=callback)
                return
            except BufferError:  # local queue full: let deliveries drain, then retry
                self.producer.poll(0.5)

    def wait(self, timeout: float | None = None) -> DeliveryReport:
        """Flush for up to `timeout` (default `self.timeout`) seconds and report what was learned."""
        pending = self.producer.flush(self.timeout if timeout is None else timeout)
        report, self._report = self._report, DeliveryReport()
        report.pending = pending
        return report

    def flush(self) -> None:
        """Wait; raise `Transient` unless everything sent since the last wait was acknowledged."""
        report = self.wait()
        if report.failed:
            raise Transient(f"{self.bus} rejected {len(report.failed)} message(s): {report.failed[0][1]}")
        if report.pending:
            raise Transient(f"{self.bus} did not acknowledge {report.pending} message(s) within {self.timeout}s")


def send_and_wait(producer: Producer, topic: str, key: bytes | None, value: bytes,
                  headers: Headers | None = None, timeout: float = 30.0, *, bus: str = "the bus") -> None:
    """Produce one message and wait until the bus acknowledged it; raise `Transient` if not."""
    deliveries = Deliveries(producer, timeout, bus=bus)
    deliveries.send(topic, key, value, headers)
    deliveries.flush()


__all__ = ["Consumer", "Deliveries", "DeliveryReport", "Headers", "Message", "Producer", "send_and_wait"]
