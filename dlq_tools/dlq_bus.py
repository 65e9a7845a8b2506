"""Bus I/O for the `dlq` tools: read a whole topic without side effects, append actions,
re-produce originals. The composition happens in `cli.py`; nothing connects at import time.

`DlqBus` is what the commands use; `KafkaDlqBus` (the distributed profile) and `EmbeddedDlqBus`
(the embedded profile's PostgreSQL bus, `shared/stores/pg_bus.py`) implement it, and both produce
through the bus port (`shared/messaging.py`), so `ActionLog` and `replay` are the same code.

Guarantees:
- `read_topic` reads every partition from its low to its high watermark (as of the call) with
  `assign()`, never `subscribe()`: no consumer-group membership, no offset commits, no effect
  on the workers' groups. A missing topic reads as empty. `EmbeddedDlqBus.read` likewise reads
  the log without touching any group's offsets (`bus.read_all`).
- Either bus unreachable is a `BusError` (the CLI exits 3), never a traceback.
- `ActionLog.append` returns only after the broker acknowledged every action.
- `replay` records an entry as `replayed` only after its re-produced original was acknowledged;
  if recording then fails, the entry stays `open` and a second replay is harmless because every
  stage handler is idempotent.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient, NewTopic

from manifold.dlq_tools.records import DlqAction, Entry, RawMessage
from manifold.shared import topics as pipeline_topics
from manifold.shared.kafka import producer_config
from manifold.shared.log_bus import Bus, BusProducer, read_all
from manifold.shared.messaging import Deliveries, Producer

REPLAY_HEADER = "x-manifold-replay-of"
ACTIONS_TOPIC_CONFIG = {"cleanup.policy": "compact"}


# librdkafka logs every failed connection attempt; failures reach the operator as BusError instead.
_QUIET: dict[str, Any] = {"logger": logging.getLogger("manifold.dlq_tools.kafka"), "log_level": 2}


class BusError(RuntimeError):
    """Kafka could not be read or written in time."""


def read_topic(bootstrap: str, topic: str, timeout_s: float = 120.0) -> list[RawMessage]:
    """Every message currently on `topic`, in (partition, offset) order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"manifold-dlq-reader-{uuid.uuid4().hex}",  # required by librdkafka; never joined
        "client.id": "manifold-dlq",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "allow.auto.create.topics": False,
        **_QUIET,
    })
    try:
        try:
            meta = consumer.list_topics(topic, timeout=15).topics.get(topic)
        except KafkaException as err:
            raise BusError(f"cannot reach kafka at {bootstrap}: {err}") from err
        if meta is None or meta.error is not None or not meta.partitions:
            return []
        ends: dict[int, int] = {}
        nexts: dict[int, int] = {}
        assignment = []
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)
            if high > low:
                ends[p] = high
                nexts[p] = low
                assignment.append(TopicPartition(topic, p, low))
        out: list[RawMessage] = []
        if not assignment:
            return out
        consumer.assign(assignment)
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise BusError(f"reading {topic} did not finish within {timeout_s:.0f}s")
            # consume() waits for num_messages or the timeout: ask for no more than can remain.
            remaining = sum(ends[p] - nexts[p] for p in ends)
            for msg in consumer.consume(max(1, min(500, remaining)), timeout=0.5):
                if (error := msg.error()) is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise BusError(f"reading {topic}: {error}")
                p, offset = msg.partition(), msg.offset()
                if p is None or offset is None or p not in ends or offset >= ends[p]:
                    continue
                nexts[p] = offset + 1
                ts_type, ts = msg.timestamp()
                out.append(RawMessage(p, offset, msg.key(), msg.value(),
                                      _header_pairs(msg.headers()), ts if ts_type else None))
                if offset >= ends[p] - 1:
                    del ends[p]
            # Offsets can have gaps (compaction, control records): trust the position too.
            if ends:
                for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                    if tp.offset >= 0:
                        nexts[tp.partition] = max(nexts[tp.partition], tp.offset)
                        if tp.offset >= ends[tp.partition]:
                            del ends[tp.partition]
        out.sort(key=lambda m: (m.partition, m.offset))
        return out
    except KafkaException as err:
        raise BusError(f"reading {topic}: {err}") from err
    finally:
        consumer.close()


def _header_pairs(headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
                  ) -> tuple[tuple[str, bytes | None], ...]:
    """A consumed message's headers as (name, bytes) pairs. librdkafka returns exactly that; the
    client's type also allows a mapping and str values (what a producer may pass), encoded here."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    return tuple((name, value.encode() if isinstance(value, str) else value) for name, value in pairs)


def ensure_actions_topic(bootstrap: str, topic: str) -> None:
    """Create the actions topic (1 partition, compacted) if it does not exist yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    try:
        if topic in admin.list_topics(timeout=15).topics:
            return
        futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                                config=ACTIONS_TOPIC_CONFIG)])
        for future in futures.values():
            try:
                future.result(timeout=30)
            except KafkaException as err:
                if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
    except KafkaException as err:
        raise BusError(f"cannot create {topic}: {err}") from err


def existing_topics(bootstrap: str) -> set[str]:
    try:
        return set(AdminClient({"bootstrap.servers": bootstrap, **_QUIET}).list_topics(timeout=15).topics)
    except KafkaException as err:
        raise BusError(f"cannot reach kafka at {bootstrap}: {err}") from err


class ActionLog:
    """Appends `DlqAction`s to the actions topic, keyed by the DLQ entry id."""

    def __init__(self, producer: Producer, topic: str, timeout_s: float = 60.0) -> None:
        self.producer = producer
        self.topic = topic
        self.timeout_s = timeout_s

    def append(self, actions: Sequence[DlqAction]) -> None:
        deliveries = Deliveries(self.producer, self.timeout_s)
        for action in actions:
            deliveries.send(self.topic, action.dlq_id.encode(), action.model_dump_json().encode(), tag=action.dlq_id)
        report = deliveries.wait()
        if not report.complete:
            detail = str(report.failed[0][1]) if report.failed else f"{report.pending} unacknowledged"
            raise BusError(f"recording actions in {self.topic} failed: {detail}")


@dataclass
class ReplayReport:
    replayed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


class RateLimiter:
    """At most `rate` calls of `wait()` per second, evenly spaced (no bursts)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 1.0 / rate
        self.clock = clock
        self.sleep = sleep
        self._next: float | None = None

    def wait(self) -> None:
        now = self.clock()
        if self._next is not None and now < self._next:
            self.sleep(self._next - now)
            now = self._next
        self._next = now + self.interval


def replay(entries: Sequence[Entry], producer: Producer, log: ActionLog, make_action: Callable[[Entry], DlqAction],
           limiter: RateLimiter, on_sent: Callable[[int], object] = lambda n: None,
           window: int = 100, timeout_s: float = 60.0) -> ReplayReport:
    """Re-produce each entry's original key and value (byte for byte) to its source topic, with
    a `x-manifold-replay-of` header; record the acknowledged ones in the action log."""
    report = ReplayReport()
    for start in range(0, len(entries), window):
        chunk = []
        for entry in entries[start:start + window]:
            letter = entry.letter
            assert letter is not None  # the caller filters out undecodable entries
            if letter.replay_topic is None:  # `records.decode` refuses these already; never trust it alone
                report.failed.append((entry.id, f"refused: {letter.replay_problem()}"))
            else:
                chunk.append(entry)
        deliveries = Deliveries(producer, timeout_s)
        for entry in chunk:
            letter = entry.letter
            assert letter is not None
            limiter.wait()
            deliveries.send(letter.source_topic, letter.key, letter.value, [(REPLAY_HEADER, entry.id.encode())],
                            tag=entry.id)
            producer.poll(0)
            on_sent(1)
        acks = deliveries.wait()  # whatever is still pending counts as failed below
        ok = set(acks.acked)
        failed = {tag: str(err) for tag, err in acks.failed}
        done = [e for e in chunk if e.id in ok]
        report.failed += [(e.id, failed.get(e.id, "not acknowledged in time")) for e in chunk if e.id not in ok]
        if done:
            log.append([make_action(e) for e in done])
            report.replayed += [e.id for e in done]
    return report


def make_producer(bootstrap: str) -> Producer:
    return KafkaProducer({**producer_config(bootstrap, "manifold-dlq"), **_QUIET})  # type: ignore[return-value]  # confluent_kafka's stubs: invariant list headers, overloaded commit vs the bus port


class DlqBus(Protocol):
    """Where the DLQ and the actions live, as the commands need it."""

    name: str

    def read(self, topic: str) -> list[RawMessage]: ...

    def existing_topics(self) -> set[str]: ...

    def ensure_actions_topic(self, topic: str) -> None: ...

    def producer(self) -> Producer: ...


@dataclass
class KafkaDlqBus:
    """The distributed profile: the Kafka cluster at `bootstrap`."""

    bootstrap: str
    name: str = "kafka"

    def read(self, topic: str) -> list[RawMessage]:
        return read_topic(self.bootstrap, topic)

    def existing_topics(self) -> set[str]:
        return existing_topics(self.bootstrap)

    def ensure_actions_topic(self, topic: str) -> None:
        ensure_actions_topic(self.bootstrap, topic)

    def producer(self) -> Producer:
        return make_producer(self.bootstrap)


@dataclass
class EmbeddedDlqBus:
    """The embedded profile: the partitioned log in its PostgreSQL (`PostgresBus`), where every
    topic exists as soon as something is appended to it."""

    bus: Bus
    where: str = "the embedded profile's PostgreSQL"
    name: str = "embedded bus"

    def read(self, topic: str) -> list[RawMessage]:
        try:
            return [RawMessage(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers()),
                               int(m.timestamp().timestamp() * 1000)) for m in read_all(self.bus, topic)]
        except Exception as err:  # noqa: BLE001 - an unreachable database is an operator-facing error
            raise BusError(f"cannot read {topic} from {self.where}: {err} (is it running? `manifold quickstart` "
                           "or `manifold ingest` starts it)") from err

    def existing_topics(self) -> set[str]:
        return {*pipeline_topics.PIPELINE_TOPICS, *pipeline_topics.STAGE_SOURCES.values(), pipeline_topics.DLQ_ACTIONS}

    def ensure_actions_topic(self, topic: str) -> None:
        return None  # appending creates it

    def producer(self) -> Producer:
        return BusProducer(self.bus)

