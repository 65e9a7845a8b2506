"""The `Bus` contract suite against both adapters: in memory and PostgreSQL (the embedded bus)."""

from __future__ import annotations

import pytest

from bus_contract import BusContract

from manifold.shared.bus import InMemoryBus


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
