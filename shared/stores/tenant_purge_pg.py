"""Erase one tenant from PostgreSQL: every row of every tenant table, and its bus messages.

Guarantees:
- Generic: the tables are found in `information_schema` (every table of schema `manifold` with a
  `tenant_id` column), so a table a later migration adds is covered without a code change.
- One transaction for the tenant tables: all of the tenant's rows go, or none. Children go
  before their parents (a delete refused by a foreign key is retried after the others).
- The embedded bus (`bus_messages`, no tenant column) loses every message keyed `tenant/...` and
  every dead letter naming the tenant (`PostgresBus.purge_tenant`).
- Runs as a superuser (`settings.postgres.conninfo()`, like `migrate`): it must also delete from
  tables the ingestion role may only insert into (the ledger, the manifest). Idempotent.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from manifold.shared.stores.pg_bus import PostgresBus
from manifold.shared.stores.pg_schema import SCHEMA

_TENANT_TABLES = """
SELECT c.table_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = %s AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name
"""


def tenant_tables(conn: psycopg.Connection) -> list[str]:
    """Every base table of the manifold schema that has a `tenant_id` column."""
    return [name for (name,) in conn.execute(_TENANT_TABLES, (SCHEMA,)).fetchall()]


def purge_tenant(admin_conninfo: str, tenant_id: str) -> dict[str, int]:
    """Delete all of `tenant_id`'s rows; returns the rows removed per table (tables with none
    are listed with 0) and `bus_messages`."""
    removed: dict[str, int] = {}
    with psycopg.connect(admin_conninfo) as conn, conn.transaction():
        pending = tenant_tables(conn)
        removed = dict.fromkeys(pending, 0)
        while pending:
            refused: list[str] = []
            for table in pending:
                try:
                    with conn.transaction():
                        cur = conn.execute(sql.SQL("DELETE FROM {}.{} WHERE tenant_id = %s").format(
                            sql.Identifier(SCHEMA), sql.Identifier(table)), (tenant_id,))
                        removed[table] += cur.rowcount
                except psycopg.errors.ForeignKeyViolation:
                    refused.append(table)
            if len(refused) == len(pending):
                raise RuntimeError(f"cannot purge tenant {tenant_id!r}: foreign keys block {refused}")
            pending = refused
    bus = PostgresBus(admin_conninfo)
    try:
        removed["bus_messages"] = bus.purge_tenant(tenant_id)
    finally:
        bus.close()
    return removed
