"""The `Bus` contract suite (shared/log_bus.py): every adapter must pass it.

A subclass provides the fixture `make_bus`: a callable returning a NEW bus instance over the same
storage each time (so durability across instances is part of the contract), with 4 partitions.
Topics and groups are unique per test, so a long-lived database never collides.
"""

from __future__ import annotations

import uuid

import pytest

from manifold.shared.log_bus import BusConsumer, BusProducer, Record, lag, partition_for, read_all, seek


class BusContract:
    @pytest.fixture
    def topic(self) -> str:
        return f"t-{uuid.uuid4().hex[:10]}"

    def test_per_key_order_within_one_partition(self, make_bus, topic) -> None:
        bus = make_bus()
        bus.append([Record(topic, f"acme/doc-{i % 3}".encode(), f"{i}".encode()) for i in range(30)])
        bus.append([Record(topic, b"acme/doc-0", b"late")])
        by_key: dict[bytes, list[bytes]] = {}
        for msg in read_all(bus, topic, batch=7):
            assert msg.partition() == partition_for(msg.key(), bus.partitions)
            by_key.setdefault(msg.key(), []).append(msg.value())
        assert by_key[b"acme/doc-0"] == [str(i).encode() for i in range(0, 30, 3)] + [b"late"]
        assert by_key[b"acme/doc-2"] == [str(i).encode() for i in range(2, 30, 3)]

    def test_offsets_are_gap_free_per_partition(self, make_bus, topic) -> None:
        bus = make_bus()
        stored = bus.append([Record(topic, f"k{i}".encode(), b"v") for i in range(20)])
        for part in range(bus.partitions):
            offsets = [m.offset() for m in stored if m.partition() == part]
            assert offsets == list(range(len(offsets)))
        ends = bus.end_offsets(topic)
        assert sum(ends.values()) == 20

    def test_fetch_returns_a_prefix_of_each_partition(self, make_bus, topic) -> None:
        bus = make_bus()
        bus.append([Record(topic, f"k{i}".encode(), str(i).encode()) for i in range(40)])
        got = bus.fetch(topic, dict.fromkeys(range(bus.partitions), 0), 9)
        assert len(got) == 9
        for part in range(bus.partitions):
            assert [m.offset() for m in got if m.partition() == part] == list(
                range(sum(1 for m in got if m.partition() == part)))

    def test_at_least_once_redelivers_uncommitted_messages(self, make_bus, topic) -> None:
        bus = make_bus()
        group = f"g-{topic}"
        bus.append([Record(topic, b"k", str(i).encode()) for i in range(3)])
        first = BusConsumer(bus, group)
        first.subscribe([topic])
        got = first.consume(2, timeout=0)
        first.commit(got[0])
        # crash: the second message was handled but never committed
        second = BusConsumer(make_bus(), group)
        second.subscribe([topic])
        assert [m.value() for m in second.consume(10, timeout=0)] == [b"1", b"2"]
        second.commit()
        assert lag(bus, group, topic) == 0
        third = BusConsumer(make_bus(), group)
        third.subscribe([topic])
        assert third.consume(10, timeout=0) == []

    def test_groups_are_independent(self, make_bus, topic) -> None:
        bus = make_bus()
        bus.append([Record(topic, b"k", b"x")])
        for group in (f"a-{topic}", f"b-{topic}"):
            consumer = BusConsumer(bus, group)
            consumer.subscribe([topic])
            assert [m.value() for m in consumer.consume(5, timeout=0)] == [b"x"]
            consumer.commit()

    def test_producer_flush_appends_atomically_and_reports_deliveries(self, make_bus, topic) -> None:
        bus = make_bus()
        producer = BusProducer(bus)
        delivered = []
        for i in range(3):
            producer.produce(topic, key=b"k", value=str(i).encode(), headers=[("h", b"\x00\x01")],
                             on_delivery=lambda err, msg: delivered.append((err, msg)))
        assert read_all(bus, topic) == []  # nothing before flush
        assert producer.flush(5) == 0
        assert [err for err, _ in delivered] == [None, None, None]
        msgs = read_all(make_bus(), topic)
        assert [m.value() for m in msgs] == [b"0", b"1", b"2"]
        assert msgs[0].headers() == [("h", b"\x00\x01")]

    def test_seek_replays_and_skips(self, make_bus, topic) -> None:
        bus = make_bus()
        group = f"g-{topic}"
        bus.append([Record(topic, b"k", str(i).encode()) for i in range(4)])
        seek(bus, group, topic, None)  # to the end
        consumer = BusConsumer(bus, group)
        consumer.subscribe([topic])
        assert consumer.consume(10, timeout=0) == []
        seek(bus, group, topic, 2, partition=partition_for(b"k", bus.partitions))
        replay = BusConsumer(bus, group)
        replay.subscribe([topic])
        assert [m.value() for m in replay.consume(10, timeout=0)] == [b"2", b"3"]

    def test_state_survives_a_new_bus_instance(self, make_bus, topic) -> None:
        bus = make_bus()
        group = f"g-{topic}"
        bus.append([Record(topic, b"k", b"a"), Record(topic, b"k", b"b")])
        bus.commit(group, topic, {partition_for(b"k", bus.partitions): 1})
        bus.close()
        fresh = make_bus()
        assert fresh.committed(group, topic) == {partition_for(b"k", fresh.partitions): 1}
        assert [m.value() for m in read_all(fresh, topic)] == [b"a", b"b"]
        consumer = BusConsumer(fresh, group)
        consumer.subscribe([topic])
        assert [m.value() for m in consumer.consume(10, timeout=0)] == [b"b"]
