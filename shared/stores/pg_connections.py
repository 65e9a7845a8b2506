"""Tenant-scoped PostgreSQL transactions for the `manifold_ingest` adapters: `TenantConnections`.

Every adapter on PostgreSQL connects as `manifold_ingest` (a role held to row-level security with
FORCE) and opens one transaction per call in which the tenant is set with
`SELECT set_config('manifold.tenant_id', %s, true)`; every statement also names the tenant
explicitly. Isolation therefore holds in the data layer even if a statement were wrong.

Guarantees:
- `transaction` is one transaction with the tenant set for its duration; inside `batch` it is a
  SAVEPOINT of the batch's one transaction, so a failed call undoes only its own work.
- A server that cannot be reached or aborts the transaction (`psycopg.OperationalError`,
  including serialization failures and deadlocks) raises `Transient`, and the connection is
  discarded so the next call reconnects.
- Nothing connects until a transaction is opened; one connection is kept per thread.
- When a read scope is entered for the transaction's tenant (`shared.access.reading_as`), its
  principal and ACL default are set transaction-locally too, so the query role's RESTRICTIVE
  ACL policies (migration 12) confine every read; without one the query role reads nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from manifold.shared import access
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.stores import manifest as mf
from manifold.shared.stores.pg_schema import INGEST_ROLE, SCHEMA


def schema_table(name: str) -> sql.Identifier:
    """`name` qualified with the manifold schema, as an identifier."""
    return sql.Identifier(SCHEMA, name)


def ingest_conninfo(settings: ManifoldSettings, password: str | None) -> str:
    """The conninfo of the `manifold_ingest` role: from `settings`, or with `password` if given."""
    if password is None:
        return settings.postgres.ingest_conninfo()
    return settings.postgres.conninfo(user=INGEST_ROLE, password=password)


def _as_transient(exc: psycopg.OperationalError) -> Transient:
    return Transient(f"postgres unavailable or transaction aborted: {type(exc).__name__}: {exc}".strip())


class TenantConnections:
    """One transaction per call with the tenant set for its duration, on a connection kept per
    thread (opening one costs a SCRAM handshake). A connection that failed is discarded, so the
    next call reconnects.

    Statements are never prepared server-side (`prepare_threshold=None`), so every execution is
    planned with its actual parameters: with psycopg's default a statement is prepared after 5
    runs and PostgreSQL moves it to a generic plan after 5 more, and for the vector search under
    the active-only policy that plan took ~1 s instead of ~55 ms at 50,000 chunks, from the 11th
    query of every long-lived connection on (bench/query_latency.py). Planning costs ~1 ms."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 10, vectors: bool = False) -> None:
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._vectors = vectors
        self._local = threading.local()

    def _connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(self._conninfo, connect_timeout=self._connect_timeout, autocommit=True,
                                   prepare_threshold=None)
            if self._vectors:
                register_vector(conn)
            self._local.conn = conn
        return conn

    def _discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    @contextmanager
    def batch(self, tenant_id: str, *, snapshot: bool = False) -> Iterator[None]:
        """One transaction (REPEATABLE READ, read-only with `snapshot`) for every `transaction`
        call this thread makes for `tenant_id` inside the block: each call runs in a SAVEPOINT of
        it, so a call that fails rolls back only its own work (its exception propagates to the
        caller, which may go on), and everything that succeeded commits once, at the end of the
        block. A fault of the connection or the final commit raises `Transient` for the batch,
        also when the connection broke inside a call whose exception the caller caught: then
        nothing committed, and no call's success may be reported."""
        mf.check_tenant(tenant_id)
        if getattr(self._local, "batch", None) is not None:
            raise RuntimeError("TenantConnections.batch does not nest")
        try:
            conn = self._tenant_connection(snapshot)
            with conn.transaction():
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant_id,))
                self._local.batch = tenant_id
                try:
                    yield
                finally:
                    self._local.batch = None
            if conn.broken or conn.closed:
                # psycopg leaves a transaction whose connection broke without a COMMIT and without
                # an error when the block itself ended normally (a savepoint's fault was caught by
                # the caller, which went on): nothing was committed, so the batch must fail.
                raise Transient("postgres connection lost during the batch: nothing was committed")
        except psycopg.OperationalError as exc:
            self._discard()
            raise _as_transient(exc) from exc
        except Transient:
            self._discard()
            raise

    def _tenant_connection(self, snapshot: bool) -> psycopg.Connection[Any]:
        """This thread's connection, set for a snapshot (read-only REPEATABLE READ) or a write."""
        conn = self._connection()
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if snapshot else None
        conn.read_only = True if snapshot else None
        return conn

    @contextmanager
    def transaction(self, tenant_id: str, *, snapshot: bool = False) -> Iterator[psycopg.Connection[Any]]:
        mf.check_tenant(tenant_id)
        outer = getattr(self._local, "batch", None)
        if outer is not None:  # inside `batch`: a savepoint of the batch's transaction
            if outer != tenant_id:
                raise RuntimeError(f"a batch for tenant {outer!r} cannot run a call for another tenant")
            conn = self._local.conn
            try:
                with conn.transaction():
                    yield conn
            except psycopg.OperationalError as exc:  # the batch fails at its commit, if not before
                raise _as_transient(exc) from exc
            return
        try:
            conn = self._tenant_connection(snapshot)
            with conn.transaction():
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant_id,))
                scope = access.for_tenant(tenant_id)
                if scope is not None:  # the reader of this request
                    conn.execute("SELECT set_config('manifold.principal', %(manifold.principal)s, true), "
                                 "set_config('manifold.acl_default', %(manifold.acl_default)s, true)",
                                 scope.pg_settings())
                yield conn
        except psycopg.OperationalError as exc:
            self._discard()
            raise _as_transient(exc) from exc

