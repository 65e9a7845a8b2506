"""The migrator on a real PostgreSQL: a fresh database gets every packaged migration once, a
database migrated before keeps working, and an applied migration whose file changed is refused
with an error naming the file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from manifold.shared.stores import pg_schema


@pytest.fixture
def fresh_db(pg_conninfo: str) -> Iterator[str]:
    name = f"migrations_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(pg_conninfo, dbname=name)
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _passwords(settings) -> dict[str, str]:
    return {"ingest_password": settings.postgres.ingest_password.get_secret_value(),
            "query_password": settings.postgres.query_password.get_secret_value()}


def test_fresh_database_gets_every_file_once_with_its_checksum(fresh_db: str, settings) -> None:
    applied = pg_schema.migrate(fresh_db, **_passwords(settings))
    assert applied == [m.version for m in pg_schema.MIGRATIONS]
    assert pg_schema.migrate(fresh_db, **_passwords(settings)) == []
    assert pg_schema.current_version(fresh_db) == int(pg_schema.PG_SCHEMA_VERSION)
    with psycopg.connect(fresh_db) as conn:
        stored = dict(conn.execute("SELECT version, checksum FROM manifold.schema_migrations").fetchall())
    assert stored == {m.version: m.checksum for m in pg_schema.MIGRATIONS}


def test_a_changed_applied_migration_is_refused_naming_its_file(fresh_db: str, settings) -> None:
    pg_schema.migrate(fresh_db, **_passwords(settings))
    edited = tuple(replace(m, sql=m.sql + "\n-- edited\n") if m.version == 2 else m
                   for m in pg_schema.MIGRATIONS)
    with pytest.raises(pg_schema.MigrationDrift, match=r"migration 2 \(0002_upstream_version_ledger\.sql\)"):
        pg_schema.migrate(fresh_db, migrations=edited, **_passwords(settings))


def test_a_new_file_applies_on_top_of_an_existing_database(fresh_db: str, settings) -> None:
    pg_schema.migrate(fresh_db, **_passwords(settings))
    top = pg_schema.MIGRATIONS[-1].version + 1
    extra = pg_schema.Migration(top, "probe", f"{top:04d}_probe.sql",
                                "SET LOCAL ROLE manifold_owner;\nCREATE TABLE manifold.probe (x int);\nRESET ROLE;\n")
    assert pg_schema.migrate(fresh_db, migrations=(*pg_schema.MIGRATIONS, extra), **_passwords(settings)) == [top]
    assert pg_schema.current_version(fresh_db) == top
    with psycopg.connect(fresh_db) as conn:
        owner = conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'probe'").fetchone()
    assert owner == ("manifold_owner",)
