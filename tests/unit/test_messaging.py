"""The one produce-and-wait implementation (`messaging.Deliveries`) over both adapters' shapes."""

from __future__ import annotations

from typing import Any

import pytest

from manifold.shared.errors import Transient
from manifold.shared.log_bus import BusProducer, InMemoryBus, read_all
from manifold.shared.messaging import Deliveries, send_and_wait


def test_over_the_embedded_bus_every_message_is_acknowledged_by_tag() -> None:
    bus = InMemoryBus(partitions=2)
    deliveries = Deliveries(BusProducer(bus))
    for i in range(3):
        deliveries.send("t", f"k{i}".encode(), b"v", [("h", b"1")], tag=i)
    report = deliveries.wait()
    assert sorted(report.acked) == [0, 1, 2] and report.failed == [] and report.complete
    assert [m.value() for m in read_all(bus, "t")] == [b"v"] * 3
    deliveries.flush()  # nothing new: nothing to raise


def test_a_failed_append_is_a_transient_error_and_nothing_is_stored() -> None:
    bus = InMemoryBus()
    bus.fail_next_append = ConnectionError("bus down")
    deliveries = Deliveries(BusProducer(bus))
    deliveries.send("t", b"k", b"v", tag="a")
    with pytest.raises(Transient, match="rejected 1 message"):
        deliveries.flush()
    assert read_all(bus, "t") == []
    with pytest.raises(Transient):
        send_and_wait(BusProducer(_failing(bus)), "t", b"k", b"v")


def _failing(bus: InMemoryBus) -> InMemoryBus:
    bus.fail_next_append = ConnectionError("still down")
    return bus


class SlowProducer:
    """Kafka-shaped: a full queue once, and acknowledgements that arrive one flush late."""

    def __init__(self) -> None:
        self.full_once = True
        self.polled = 0
        self.waiting: list[Any] = []
        self.late: list[Any] = []

    def produce(self, topic: str, *, key: bytes | None = None, value: bytes | None = None,
                headers: Any = None, on_delivery: Any = None) -> None:
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")
        self.waiting.append(on_delivery)

    def poll(self, timeout: float = 0) -> int:
        self.polled += 1
        return 0

    def flush(self, timeout: float = -1) -> int:
        for callback in self.late:
            callback(None, None)
        self.late, self.waiting = self.waiting, []
        return len(self.late)


def test_a_full_queue_is_drained_and_late_acknowledgements_reach_the_next_wait() -> None:
    producer = SlowProducer()
    deliveries = Deliveries(producer, timeout=0.1)
    deliveries.send("t", b"k", b"v", tag="x")
    assert producer.polled == 1  # the BufferError was waited out, not dropped
    first = deliveries.wait()
    assert first.pending == 1 and first.acked == [] and not first.complete
    second = deliveries.wait()
    assert second.acked == ["x"] and second.pending == 0


def test_flush_raises_while_anything_is_unacknowledged() -> None:
    deliveries = Deliveries(SlowProducer(), timeout=0.1, bus="kafka")
    deliveries.send("t", b"k", b"v")
    with pytest.raises(Transient, match="kafka did not acknowledge 1 message"):
        deliveries.flush()
