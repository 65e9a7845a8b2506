"""The PostgreSQL version ledger: atomic versions, resend-until-confirmed, tenant isolation."""

from __future__ import annotations

import threading

import pytest

from manifold.shared.stores import pg_schema
from manifold.shared.stores.ledger import PostgresVersionLedger


@pytest.fixture(scope="module")
def ledger(settings, pg_conninfo: str) -> PostgresVersionLedger:
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    return PostgresVersionLedger(pg.ingest_conninfo())


def test_versions_follow_content(ledger: PostgresVersionLedger, unique) -> None:
    tenant = unique("ledger")
    assert ledger.reserve(tenant, "a.txt", "1" * 64) == 1
    assert ledger.reserve(tenant, "a.txt", "1" * 64) == 1  # unconfirmed: same version again
    ledger.confirm(tenant, "a.txt", 1)
    assert ledger.reserve(tenant, "a.txt", "1" * 64) is None  # unchanged
    assert ledger.reserve(tenant, "a.txt", "2" * 64) == 2
    ledger.confirm(tenant, "a.txt", 2)
    assert ledger.reserve(tenant, "a.txt", None) == 3  # delete
    ledger.confirm(tenant, "a.txt", 3)
    assert ledger.reserve(tenant, "a.txt", None) is None
    assert ledger.reserve(tenant, "a.txt", "2" * 64) == 4  # re-created after delete
    assert ledger.reserve(tenant, "never.txt", None) is None


def test_newest_version_is_the_newest_handed_out_and_per_tenant(ledger: PostgresVersionLedger, unique) -> None:
    a, b = unique("ledger-newest-a"), unique("ledger-newest-b")
    assert ledger.newest_version(a, "n.txt") is None
    assert ledger.reserve(a, "n.txt", "1" * 64) == 1
    assert ledger.newest_version(a, "n.txt") == 1  # unconfirmed counts: it was handed out
    ledger.confirm(a, "n.txt", 1)
    assert ledger.reserve(a, "n.txt", None) == 2  # a delete is a version too
    assert ledger.newest_version(a, "n.txt") == 2 and ledger.newest_version(b, "n.txt") is None


def test_tenants_do_not_share_documents(ledger: PostgresVersionLedger, unique) -> None:
    a, b = unique("ledger-a"), unique("ledger-b")
    assert ledger.reserve(a, "same.txt", "1" * 64) == 1
    ledger.confirm(a, "same.txt", 1)
    assert ledger.reserve(b, "same.txt", "1" * 64) == 1


def test_concurrent_publishers_get_distinct_versions(ledger: PostgresVersionLedger, unique) -> None:
    tenant = unique("ledger-race")
    got: list[int | None] = []

    def publish(i: int) -> None:
        got.append(ledger.reserve(tenant, "hot.txt", f"{i:064d}"))

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 9))
