"""PostgreSQL is real: pgvector's HNSW index answers a nearest-neighbour query, and row-level
security (with FORCE) confines a non-superuser role to the tenant set for its transaction."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql


@pytest.fixture
def rls_table(pg_conninfo: str, unique):
    table = unique("smoke_chunks").replace("-", "_")
    role = unique("smoke_reader").replace("-", "_")
    owner = unique("smoke_owner").replace("-", "_")
    with psycopg.connect(pg_conninfo, autocommit=True) as admin:
        admin.execute(
            sql.SQL(
                """
                CREATE TABLE {t} (
                    id bigint PRIMARY KEY,
                    tenant_id text NOT NULL,
                    body text NOT NULL,
                    embedding vector(3) NOT NULL
                );
                CREATE INDEX ON {t} USING hnsw (embedding vector_cosine_ops);
                ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;
                ALTER TABLE {t} FORCE ROW LEVEL SECURITY;
                CREATE POLICY tenant_isolation ON {t}
                    USING (tenant_id = current_setting('manifold.tenant_id', true));
                CREATE ROLE {r} LOGIN PASSWORD 'smoke';
                GRANT SELECT ON {t} TO {r};
                CREATE ROLE {o} LOGIN PASSWORD 'smoke';
                ALTER TABLE {t} OWNER TO {o};
                """
            ).format(t=sql.Identifier(table), r=sql.Identifier(role), o=sql.Identifier(owner))
        )
        register_vector(admin)
        with admin.cursor() as cur:
            rows = [
                (1, "t1", "steel bolts", [1.0, 0.0, 0.0]),
                (2, "t1", "copper wire", [0.0, 1.0, 0.0]),
                (3, "t2", "steel beams", [0.99, 0.01, 0.0]),
            ]
            cur.executemany(
                sql.SQL("INSERT INTO {t} VALUES (%s, %s, %s, %s)").format(t=sql.Identifier(table)),
                [(i, t, b, np.array(v)) for i, t, b, v in rows],
            )
    try:
        yield table, role, owner
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP TABLE {t}").format(t=sql.Identifier(table)))
            for name in (role, owner):
                admin.execute(sql.SQL("DROP ROLE {r}").format(r=sql.Identifier(name)))


def _nearest(conninfo: str, table: str, tenant: str | None) -> list[tuple[int, str]]:
    with psycopg.connect(conninfo) as conn:
        register_vector(conn)
        with conn.transaction():
            if tenant is not None:
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant,))
            conn.execute("SET LOCAL enable_seqscan = off")  # make the planner use the HNSW index
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    sql.SQL("EXPLAIN SELECT id FROM {t} ORDER BY embedding <=> %s LIMIT 2").format(
                        t=sql.Identifier(table)
                    ),
                    (np.array([1.0, 0.0, 0.0]),),
                )
            )
            assert "hnsw" in plan.lower() or "Index Scan" in plan, plan
            return conn.execute(
                sql.SQL("SELECT id, tenant_id FROM {t} ORDER BY embedding <=> %s LIMIT 2").format(
                    t=sql.Identifier(table)
                ),
                (np.array([1.0, 0.0, 0.0]),),
            ).fetchall()


def test_hnsw_query_under_tenant_policy(settings, pg_conninfo: str, rls_table) -> None:
    table, role, owner = rls_table
    reader = settings.postgres.conninfo(user=role, password="smoke")

    assert _nearest(reader, table, "t1") == [(1, "t1"), (2, "t1")]
    assert _nearest(reader, table, "t2") == [(3, "t2")]
    # No tenant set: the policy yields nothing rather than everything.
    assert _nearest(reader, table, None) == []
    # FORCE: even the table's owner is held to the policy.
    owner_conn = settings.postgres.conninfo(user=owner, password="smoke")
    assert _nearest(owner_conn, table, "t2") == [(3, "t2")]


def test_reader_cannot_write(settings, rls_table) -> None:
    table, role, _ = rls_table
    reader = settings.postgres.conninfo(user=role, password="smoke")
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            sql.SQL("INSERT INTO {t} VALUES (9, 't1', 'x', '[0,0,1]')").format(t=sql.Identifier(table))
        )
