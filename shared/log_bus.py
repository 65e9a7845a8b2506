"""The bus port of the embedded profile, an in-memory bus, and Kafka-shaped clients over any bus.

The embedded profile keeps the parts of the Kafka contract (DESIGN.md §4) that the pipeline's
correctness rests on, so the SAME `StageRunner`, stage handlers, publisher and upstream client run
over it unchanged:

- **Per-key ordering.** A message's partition is a stable hash of its key (`partition_for`);
  within a partition offsets are gap-free and increase in append order, and a consumer sees a
  partition's messages in offset order.
- **At-least-once with committed offsets.** A consumer group's position per partition is stored
  only by `commit`; a consumer that stops before committing (a crash) leaves the messages to be
  delivered again to the next consumer of the group. `BusProducer.flush` returns only once its
  messages are durable, so the runner's order "handle → flush outputs → commit" holds.
- **Dead letters.** The DLQ is just the topic `manifold.dlq` (the runner writes `DeadLetter`s).
- **Replay.** `seek` moves a group to any offset (re-delivering everything after it);
  `redeliver` re-appends a dead letter's original message to its source topic.

Adapters: `InMemoryBus` (here; tests and fakes) and `PostgresBus` (`shared/stores/pg_bus.py`,
durable, in the embedded PostgreSQL). `BusConsumer` / `BusProducer` implement the project's bus
port (`shared/messaging.py`: `Consumer` / `Producer`), whose other adapter is confluent-kafka.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

Headers = list[tuple[str, bytes]]


def partition_for(key: bytes | None, partitions: int) -> int:
    """Stable across processes and Python versions (not `hash()`): first 4 bytes of sha256."""
    if key is None or partitions <= 1:
        return 0
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") % partitions


@dataclass(frozen=True)
class Record:
    """A message to append: where it goes is decided by the bus from `topic` and `key`."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers = field(default_factory=list)


class BusMessage:
    """A stored message, with the accessor methods of `confluent_kafka.Message`."""

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_ts")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes,
                 headers: Headers | None = None, ts: datetime | None = None) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, list(headers or [])
        self._ts = ts or datetime.now(UTC)

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> Headers:
        return list(self._headers)

    def timestamp(self) -> datetime:
        return self._ts

    def error(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"BusMessage({self._topic}/{self._partition}/{self._offset})"


class Bus(Protocol):
    """A partitioned, append-only log with consumer-group offsets.

    Guarantees every implementation keeps (the contract tests in tests/contract/test_bus.py):
    - `append` is atomic (all records or none) and durable when it returns; records with the same
      topic and key land in one partition, in the order given, after everything appended before.
    - `fetch` returns, per partition, a prefix (in offset order) of the messages at or after the
      given positions; it never skips an offset.
    - `committed` returns exactly what the last `commit` stored for the group (offset = the next
      message to deliver); nothing moves a group's position but `commit` and `seek`.
    """

    partitions: int

    def append(self, records: Sequence[Record]) -> list[BusMessage]: ...

    def fetch(self, topic: str, positions: Mapping[int, int], limit: int) -> list[BusMessage]: ...

    def committed(self, group: str, topic: str) -> dict[int, int]: ...

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None: ...

    def end_offsets(self, topic: str) -> dict[int, int]: ...

    def close(self) -> None: ...


def seek(bus: Bus, group: str, topic: str, offset: int | None = 0, partition: int | None = None) -> None:
    """Replay: move `group` on `topic` to `offset` (0 = from the beginning, None = the end, i.e.
    skip everything so far) in one partition or all of them. Idempotent handlers make the
    re-delivered messages harmless."""
    ends = bus.end_offsets(topic)
    targets = [partition] if partition is not None else list(range(bus.partitions))
    bus.commit(group, topic, {p: ends.get(p, 0) if offset is None else offset for p in targets})


def lag(bus: Bus, group: str, topic: str) -> int:
    """Messages on `topic` not yet committed by `group`."""
    done = bus.committed(group, topic)
    return sum(max(0, end - done.get(p, 0)) for p, end in bus.end_offsets(topic).items())


def read_all(bus: Bus, topic: str, batch: int = 500, since: Mapping[int, int] | None = None) -> list[BusMessage]:
    """Every message on `topic` (e.g. the DLQ), or only those at or after the per-partition
    offsets `since` (end offsets taken earlier), without touching any group's offsets."""
    positions = {p: (since or {}).get(p, 0) for p in range(bus.partitions)}
    out: list[BusMessage] = []
    while True:
        got = bus.fetch(topic, positions, batch)
        if not got:
            return out
        for msg in got:
            positions[msg.partition()] = msg.offset() + 1
        out.extend(got)


REPLAY_HEADER = "x-manifold-replay-of"


def redeliver(bus: Bus, dead_letters: Iterable[Any]) -> int:
    """Re-append each `DeadLetter`'s original message to its source topic (same key, so same
    partition), tagged with where it came from; returns how many were re-appended. A letter
    whose `replay_topic` is None (forged source) is never re-appended."""
    dead_letters = [d for d in dead_letters if d.replay_topic is not None]
    records = [Record(d.source_topic, d.key, d.value,
                      [(REPLAY_HEADER, f"{d.source_topic}/{d.source_partition}/{d.source_offset}".encode())])
               for d in dead_letters]
    if records:
        bus.append(records)
    return len(records)


class InMemoryBus:
    """`Bus` in process memory (thread-safe): for unit tests and fakes; not durable."""

    def __init__(self, partitions: int = 4) -> None:
        self.partitions = partitions
        self._log: dict[tuple[str, int], list[BusMessage]] = {}
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()
        self.fail_next_append: Exception | None = None
        """Set to make the next `append` raise (and store nothing): a bus outage in tests."""

    def append(self, records: Sequence[Record]) -> list[BusMessage]:
        with self._lock:
            if self.fail_next_append is not None:
                err, self.fail_next_append = self.fail_next_append, None
                raise err
            out = []
            for r in records:
                part = partition_for(r.key, self.partitions)
                log = self._log.setdefault((r.topic, part), [])
                msg = BusMessage(r.topic, part, len(log), r.key, r.value, r.headers)
                log.append(msg)
                out.append(msg)
            return out

    def fetch(self, topic: str, positions: Mapping[int, int], limit: int) -> list[BusMessage]:
        with self._lock:
            out: list[BusMessage] = []
            for part, start in sorted(positions.items()):
                out.extend(self._log.get((topic, part), [])[max(start, 0):][: limit - len(out)])
                if len(out) >= limit:
                    break
            return out

    def committed(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return {p: o for (g, t, p), o in self._offsets.items() if g == group and t == topic}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        with self._lock:
            for part, offset in offsets.items():
                self._offsets[(group, topic, part)] = offset

    def end_offsets(self, topic: str) -> dict[int, int]:
        with self._lock:
            return {p: len(self._log.get((topic, p), [])) for p in range(self.partitions)}

    def close(self) -> None:
        pass


class BusConsumer:
    """One member of consumer group `group`, shaped like `confluent_kafka.Consumer` (the methods
    `StageRunner` uses). Positions start at the group's committed offsets; `commit` stores them.
    Not thread-safe: one consumer per thread, and (embedded profile) one consumer per group."""

    def __init__(self, bus: Bus, group: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.bus = bus
        self.group = group
        self._topics: list[str] = []
        self._positions: dict[str, dict[int, int]] = {}
        self._sleep = sleep

    def subscribe(self, topics: Sequence[str]) -> None:
        self._topics = list(topics)
        self._positions = {}

    def _position(self, topic: str) -> dict[int, int]:
        if topic not in self._positions:
            done = self.bus.committed(self.group, topic)
            self._positions[topic] = {p: done.get(p, 0) for p in range(self.bus.partitions)}
        return self._positions[topic]

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[BusMessage]:
        """Up to `num_messages` messages past this consumer's positions; waits up to `timeout`
        seconds (polling) when there are none. Positions advance; nothing is committed."""
        deadline = time.monotonic() + max(timeout, 0)
        while True:
            out: list[BusMessage] = []
            for topic in self._topics:
                positions = self._position(topic)
                got = self.bus.fetch(topic, positions, num_messages - len(out))
                for msg in got:
                    positions[msg.partition()] = msg.offset() + 1
                out.extend(got)
                if len(out) >= num_messages:
                    break
            if out or time.monotonic() >= deadline:
                return out
            self._sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def commit(self, message: BusMessage | None = None, asynchronous: bool = False) -> None:
        """Store the position just past `message`, or every current position of this consumer."""
        if message is not None:
            self.bus.commit(self.group, message.topic(), {message.partition(): message.offset() + 1})
            return
        for topic, positions in self._positions.items():
            self.bus.commit(self.group, topic, positions)

    def assignment(self) -> list[Any]:
        return []  # one member per group: no partition assignment to report (lag: see `lag`)

    def close(self) -> None:
        self._positions = {}


class BusProducer:
    """Shaped like `confluent_kafka.Producer`: `produce` buffers, `flush` appends the buffer to
    the bus in one atomic step and then reports every delivery. If the append fails, nothing was
    stored: each callback gets the error and `flush` returns the number still pending, so the
    caller (`messaging.Deliveries`) raises and does not commit."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._pending: list[tuple[Record, Callable[[Any, Any], None] | None]] = []
        self.last_error: BaseException | None = None

    def produce(self, topic: str, key: bytes | None = None, value: bytes | None = None,
                headers: Headers | None = None, on_delivery: Callable[[Any, Any], None] | None = None) -> None:
        self._pending.append((Record(topic, key, value or b"", list(headers or [])), on_delivery))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        if not self._pending:
            return 0
        pending, self._pending = self._pending, []
        try:
            stored = self.bus.append([record for record, _ in pending])
        except Exception as err:  # noqa: BLE001 - reported to the callbacks and by the return value
            self.last_error = err
            for _, callback in pending:
                if callback is not None:
                    callback(err, None)
            return len(pending)
        for (_, callback), msg in zip(pending, stored, strict=True):
            if callback is not None:
                callback(None, msg)
        return 0

    def __len__(self) -> int:
        return len(self._pending)
