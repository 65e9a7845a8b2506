"""The `Bus` contract suite against both adapters: in memory and PostgreSQL (the embedded bus)."""

from __future__ import annotations

import pytest
from bus_contract import BusContract

from manifold.shared.log_bus import InMemoryBus


class TestInMemoryBus(BusContract):
    @pytest.fixture
    def make_bus(self):
        storage = InMemoryBus(partitions=4)
        return lambda: storage


class TestPostgresBus(BusContract):
    @pytest.fixture
    def make_bus(self, settings, pg_conninfo):
        from manifold.shared.stores import pg_schema
        from manifold.shared.stores.pg_bus import PostgresBus

        pg = settings.postgres
        pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                          query_password=pg.query_password.get_secret_value())
        made: list[PostgresBus] = []

        def make() -> PostgresBus:
            made.append(PostgresBus(pg.ingest_conninfo(), partitions=4))
            return made[-1]

        yield make
        for bus in made:
            bus.close()

    def test_erase_deletes_consumed_messages_of_a_deleted_document_and_never_reuses_offsets(self, make_bus) -> None:
        """Finding 3 of issue 13: the embedded bus kept a deleted document's upsert forever."""
        import json
        import uuid

        from manifold.shared.events import event_key
        from manifold.shared.log_bus import Record

        bus = make_bus()
        topic, tenant = f"t-erase-{uuid.uuid4().hex[:8]}", f"erase-{uuid.uuid4().hex[:8]}"
        key = event_key(tenant, "doc.txt")
        body = [json.dumps({"tenant_id": tenant, "document_id": "doc.txt", "version": v}).encode() for v in (1, 2, 3)]
        placed = bus.append([Record(topic, key, b) for b in body] + [Record(topic, key, b"not json")])
        part = placed[0].partition()
        assert bus.erase_documents(tenant, {"doc.txt": 2}) == 0  # nothing consumed yet: nothing erased
        bus.commit("g", topic, {part: placed[1].offset() + 1})  # versions 1 and 2 consumed
        assert bus.erase_documents(tenant, {"doc.txt": 2}) == 2
        left = [m.value() for m in bus.fetch(topic, {part: 0}, 10)]
        assert left == [body[2], b"not json"]  # a newer version and an unconsumed message stay
        bus.commit("g", topic, {part: placed[3].offset() + 1})
        assert bus.erase_documents(tenant, {"doc.txt": 3}) == 2  # the newest row of the partition too
        assert bus.fetch(topic, {part: 0}, 10) == []
        again = bus.append([Record(topic, key, b"after")])
        assert again[0].offset() == placed[3].offset() + 1  # the offset is not handed out twice
        assert bus.end_offsets(topic)[part] == placed[3].offset() + 2

    def test_trim_deletes_old_messages_every_group_has_read_and_keeps_the_rest(self, make_bus, monkeypatch) -> None:
        """Retention of the embedded bus (issue 30: the log grew without bound over a long run)."""
        import time
        import uuid

        from manifold.shared import topics
        from manifold.shared.log_bus import Record

        bus = make_bus()
        topic = f"t-trim-{uuid.uuid4().hex[:8]}"
        monkeypatch.setattr(topics, "DLQ", f"{topic}-dlq")  # this test's own dead-letter topic, not the shared one
        placed = bus.append([Record(topic, b"k", f"m{i}".encode()) for i in range(4)])
        part = placed[0].partition()
        bus.commit("fast", topic, {part: placed[3].offset() + 1})  # read everything
        bus.commit("slow", topic, {part: placed[1].offset() + 1})  # read m0 and m1
        dead = bus.append([Record(topics.DLQ, b"k", b"a dead letter")])
        bus.commit("dlq-reader", topics.DLQ, {dead[0].partition(): dead[0].offset() + 1})
        assert bus.trim(3600, only=[topic]) == 0  # read, but younger than the retention
        assert [m.value() for m in bus.fetch(topic, {part: 0}, 10)] == [b"m0", b"m1", b"m2", b"m3"]
        time.sleep(0.05)
        assert bus.trim(0.01, only=[topic, topics.DLQ]) == 2
        # only what both groups read went; the slow group's next messages stay
        assert [m.value() for m in bus.fetch(topic, {part: 0}, 10)] == [b"m2", b"m3"]
        # the dead-letter topic is never trimmed
        assert [m.value() for m in bus.fetch(topics.DLQ, {dead[0].partition(): dead[0].offset()}, 1)] == [
            b"a dead letter"]
        assert bus.append([Record(topic, b"k", b"m4")])[0].offset() == placed[3].offset() + 1  # offsets not reused
        with pytest.raises(ValueError):
            bus.trim(0)

