"""The query role reads `chunks` directly (for HNSW) but still sees only active versions.

Reads run as a reader the per-document ACL policies admit (a principal with the default `tenant`
and no ACL on these documents): without a principal the query role reads nothing at all."""

from __future__ import annotations

import psycopg


def _as_reader(conn: psycopg.Connection, tenant: str) -> None:
    conn.execute("SET LOCAL ROLE manifold_query")
    conn.execute("SELECT set_config('manifold.tenant_id', %s, true), set_config('manifold.principal', 'reader', true), "
                 "set_config('manifold.acl_default', 'tenant', true)", (tenant,))


def _count(conn: psycopg.Connection, tenant: str, document_id: str) -> int:
    _as_reader(conn, tenant)
    row = conn.execute("SELECT count(*) FROM manifold.chunks WHERE document_id = %s", (document_id,)).fetchone()
    conn.execute("RESET ROLE")
    return int(row[0])


def test_query_role_sees_chunks_only_of_active_versions_of_its_tenant(world, pg_conninfo: str) -> None:
    doc = "policies/returns-policy.html"
    with psycopg.connect(pg_conninfo) as conn:
        with conn.transaction(force_rollback=True):
            assert _count(conn, world.northstar, doc) > 0
            assert _count(conn, world.southwind, doc) == 0  # another tenant: nothing
            conn.execute("UPDATE manifold.version_manifest SET state = 'retired' "
                         "WHERE tenant_id = %s AND document_id = %s", (world.northstar, doc))
            assert _count(conn, world.northstar, doc) == 0  # no longer active: invisible at once


def test_vector_search_uses_the_hnsw_index_under_the_query_role(world, pg_conninfo: str) -> None:
    with psycopg.connect(pg_conninfo) as conn:
        with conn.transaction(force_rollback=True):
            _as_reader(conn, world.northstar)
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_sort = off")  # only the HNSW index can order by distance
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT chunk_id FROM manifold.chunks WHERE tenant_id = %s "
                "ORDER BY embedding <=> (SELECT embedding FROM manifold.chunks LIMIT 1) LIMIT 10",
                (world.northstar,)).fetchall())
    assert "chunks_embedding_hnsw" in plan, plan
