"""`EmbeddingCache` on PostgreSQL (`embedding_cache`, migration 11), as `manifold_ingest` under RLS.

Guarantees (see `manifold.shared.ports.EmbeddingCache`):
- Vectors are stored as pgvector float32 and read back as float32, so a vector read from the
  cache is bit for bit the one first stored; `fill` inserts with ON CONFLICT DO NOTHING and then
  reads every requested entry back in the same transaction, so concurrent writers of one text
  converge on the first stored vector.
- One transaction and a constant number of statements per call, whatever the number of hashes.
- `sweep` deletes the tenant's entries created more than `grace_s` ago that no row of `chunks`
  (any version still stored: staged, active or retired before gc) uses; `delete_version` in
  `pg_relational.py` removes a deleted version's now unused entries at once.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput
from manifold.shared.stores.pg_connections import TenantConnections, ingest_conninfo, schema_table

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _check(config: str, hashes: list[str]) -> None:
    if not 1 <= len(config) <= 512:
        raise BadInput("embedding configuration key must be 1-512 characters")
    bad = next((h for h in hashes if not _SHA256.match(h)), None)
    if bad is not None:
        raise BadInput(f"not a sha256: {bad[:80]!r}")


def _floats(value: object) -> list[float]:
    """A stored vector (numpy array or pgvector `Vector`) as the exact float32 values, in floats."""
    to_numpy = getattr(value, "to_numpy", None)
    floats: list[float] = np.asarray(to_numpy() if to_numpy else value, dtype=np.float32).tolist()
    return floats


class PostgresEmbeddingCache:
    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout, vectors=True)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, *, password: str | None = None) -> PostgresEmbeddingCache:
        return cls(ingest_conninfo(settings, password))

    @staticmethod
    def _read(conn: psycopg.Connection[Any], tenant_id: str, config: str, hashes: list[str]) -> dict[str, list[float]]:
        rows = conn.execute(
            sql.SQL("SELECT text_sha256, vector FROM {} WHERE tenant_id = %s AND config = %s "
                    "AND text_sha256 = ANY(%s)").format(schema_table("embedding_cache")),
            (tenant_id, config, hashes),
        ).fetchall()
        return {h: _floats(v) for h, v in rows}

    def lookup(self, tenant_id: str, config: str, hashes: list[str]) -> dict[str, list[float]]:
        _check(config, hashes)
        if not hashes:
            return {}
        with self._db.transaction(tenant_id) as conn:
            return self._read(conn, tenant_id, config, sorted(set(hashes)))

    def fill(self, tenant_id: str, config: str, vectors: dict[str, list[float]]) -> dict[str, list[float]]:
        hashes = sorted(vectors)
        _check(config, hashes)
        if not hashes:
            return {}
        with self._db.transaction(tenant_id) as conn, conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {} (tenant_id, config, text_sha256, vector) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT DO NOTHING").format(schema_table("embedding_cache")),
                [(tenant_id, config, h, np.asarray(vectors[h], dtype=np.float32)) for h in hashes],
            )
            return self._read(conn, tenant_id, config, hashes)

    def sweep(self, tenant_id: str, grace_s: float) -> int:
        with self._db.transaction(tenant_id) as conn:
            cur = conn.execute(
                sql.SQL("DELETE FROM {c} e WHERE e.tenant_id = %s AND e.created_at < now() - make_interval(secs => %s) "
                        "AND NOT EXISTS (SELECT 1 FROM {k} k WHERE k.tenant_id = e.tenant_id "
                        "AND k.content_sha256 = e.text_sha256)").format(
                    c=schema_table("embedding_cache"), k=schema_table("chunks")),
                (tenant_id, float(grace_s)),
            )
            return cur.rowcount
