"""`PostgresVersionManifest`: the publication manifest (`version_manifest`, migration 3).

One row per (tenant, document, version) the publisher has seen, plus the tombstone row of a
delete. States: `staged` (load notice received) -> `verified` (every store matched the notice)
-> `active` (served) -> `retired` (superseded, artifacts kept for a grace period, then purged by
`gc`); any state -> `deleted` (a delete at a newer version). `purged_at` records that a retired
or deleted version's artifacts were removed from every store.

Guarantees (see `manifold.shared.ports.VersionManifest`):
- Every state change of one document runs in one transaction that first locks the document's
  `documents` row, so publisher instances, `gc` and the reconciler serialise per document.
- Activation and retirement of the previous version are one transaction; the partial unique
  index `version_manifest_one_active` makes two active versions impossible.
- `document_versions.state` (the relational store's copy) is kept equal to the manifest state in
  the same transaction, so the two can only disagree through outside interference (the
  reconciler reports and repairs that as `wrong_version`).
- Connects as `manifold_ingest`, held to row-level security; the tenant is set per transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from manifold.shared.artifacts import LoadNotice, StoreManifest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient
from manifold.shared.ports import Activation, VersionEntry
from manifold.shared.stores.pg_connections import TenantConnections

_COLS = ("tenant_id, document_id, version, state, expected, config_fingerprint, staged_at, activated_at, "
         "retired_at, deleted_at, purged_at")


def _entry(row: tuple[Any, ...]) -> VersionEntry:
    t, d, v, state, expected, fp, staged, activated, retired, deleted, purged = row
    return VersionEntry(
        tenant_id=t, document_id=d, version=v, state=state,
        expected=tuple(StoreManifest.model_validate(m) for m in expected or ()),
        config_fingerprint=fp, staged_at=staged, activated_at=activated, retired_at=retired,
        deleted_at=deleted, purged_at=purged,
    )


class PostgresVersionManifest:
    """`VersionManifest` on PostgreSQL (`conninfo` logs in as `manifold_ingest`)."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)
        self._conninfo = conninfo

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> PostgresVersionManifest:
        return cls(settings.postgres.ingest_conninfo())

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every call of this thread for `tenant_id` inside the block in one transaction, each in
        its own savepoint (`TenantConnections.batch`): e.g. a batch of activations commits once."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _lock(conn: psycopg.Connection[Any], tenant_id: str, document_id: str) -> None:
        conn.execute("INSERT INTO manifold.documents (tenant_id, document_id) VALUES (%s, %s) "
                     "ON CONFLICT DO NOTHING", (tenant_id, document_id))
        conn.execute("SELECT 1 FROM manifold.documents WHERE tenant_id = %s AND document_id = %s FOR UPDATE",
                     (tenant_id, document_id))

    @staticmethod
    def _set_state(conn: psycopg.Connection[Any], tenant_id: str, document_id: str, versions: Iterable[int],
                   state: str, stamp: str | None) -> None:
        versions = list(versions)
        if not versions:
            return
        stamp_sql = f", {stamp} = coalesce({stamp}, now())" if stamp else ""
        conn.execute(
            f"UPDATE manifold.version_manifest SET state = %s, updated_at = now(){stamp_sql} "
            "WHERE tenant_id = %s AND document_id = %s AND version = ANY(%s)",
            (state, tenant_id, document_id, versions),
        )
        conn.execute(
            "UPDATE manifold.document_versions SET state = %s, updated_at = now() "
            "WHERE tenant_id = %s AND document_id = %s AND version = ANY(%s) AND state <> %s",
            (state, tenant_id, document_id, versions, state),
        )

    @staticmethod
    def _rows(conn: psycopg.Connection[Any], tenant_id: str, document_id: str) -> list[VersionEntry]:
        return [_entry(r) for r in conn.execute(
            f"SELECT {_COLS} FROM manifold.version_manifest WHERE tenant_id = %s AND document_id = %s "
            "ORDER BY version", (tenant_id, document_id)).fetchall()]

    # ------------------------------------------------------------------ VersionManifest

    def stage(self, notice: LoadNotice) -> VersionEntry:
        ref = notice.doc
        with self._db.transaction(ref.tenant_id) as conn:
            self._lock(conn, ref.tenant_id, ref.document_id)
            conn.execute(
                "INSERT INTO manifold.version_manifest AS m (tenant_id, document_id, version, content_sha256, "
                "config_fingerprint, pipeline_versions, expected) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, document_id, version) DO UPDATE SET expected = EXCLUDED.expected, "
                "config_fingerprint = EXCLUDED.config_fingerprint, pipeline_versions = EXCLUDED.pipeline_versions, "
                "updated_at = now() WHERE m.state IN ('staged', 'verified') AND "
                "(m.expected, m.config_fingerprint) IS DISTINCT FROM (EXCLUDED.expected, EXCLUDED.config_fingerprint)",
                (ref.tenant_id, ref.document_id, ref.version, ref.content_sha256, notice.versions.fingerprint(),
                 Jsonb(notice.versions.model_dump()), Jsonb([m.model_dump() for m in notice.stores])),
            )
            row = conn.execute(
                f"SELECT {_COLS} FROM manifold.version_manifest WHERE tenant_id = %s AND document_id = %s "
                "AND version = %s", (ref.tenant_id, ref.document_id, ref.version)).fetchone()
        assert row is not None
        return _entry(row)

    def mark_verified(self, tenant_id: str, document_id: str, version: int) -> None:
        with self._db.transaction(tenant_id) as conn:
            self._lock(conn, tenant_id, document_id)
            conn.execute(
                "UPDATE manifold.version_manifest SET state = 'verified', verified_at = now(), updated_at = now() "
                "WHERE tenant_id = %s AND document_id = %s AND version = %s AND state = 'staged'",
                (tenant_id, document_id, version))

    def activate(self, tenant_id: str, document_id: str, version: int) -> Activation:
        try:
            with self._db.transaction(tenant_id) as conn:
                self._lock(conn, tenant_id, document_id)
                rows = {e.version: e for e in self._rows(conn, tenant_id, document_id)}
                me = rows.get(version)
                if me is None:
                    raise Transient(f"{document_id}@{version} is not in the manifest yet")
                if me.state == "active":  # a replay: a crash may have left the retired versions marked
                    left = sorted(v for v, e in rows.items() if e.state == "retired" and e.purged_at is None)
                    return Activation(True, tuple(left), "already_active")
                tombstone = max((v for v, e in rows.items() if e.state == "deleted"), default=0)
                if me.state == "deleted" or version < tombstone:
                    self._set_state(conn, tenant_id, document_id, [version], "deleted", "deleted_at")
                    return Activation(False, (), "deleted")
                active = [v for v, e in rows.items() if e.state == "active"]
                if me.state == "retired" or any(v > version for v in active):
                    self._set_state(conn, tenant_id, document_id, [version], "retired", "retired_at")
                    return Activation(False, (), "stale")
                older = [v for v, e in rows.items()
                         if v < version and e.state in ("active", "staged", "verified")]
                self._set_state(conn, tenant_id, document_id, older, "retired", "retired_at")
                self._set_state(conn, tenant_id, document_id, [version], "active", "activated_at")
                return Activation(True, tuple(sorted(older)), "activated")
        except psycopg.errors.UniqueViolation as exc:  # a concurrent activation won; retry decides
            raise Transient(f"concurrent activation of {document_id}: {exc}") from exc

    def delete_document(self, tenant_id: str, document_id: str, version: int) -> list[int] | None:
        with self._db.transaction(tenant_id) as conn:
            self._lock(conn, tenant_id, document_id)
            rows = {e.version: e for e in self._rows(conn, tenant_id, document_id)}
            if any(v >= version and e.state == "active" for v, e in rows.items()):
                return None
            conn.execute(
                "INSERT INTO manifold.version_manifest (tenant_id, document_id, version, state, deleted_at, "
                "purged_at) VALUES (%s, %s, %s, 'deleted', now(), now()) "
                "ON CONFLICT (tenant_id, document_id, version) DO NOTHING",
                (tenant_id, document_id, version))
            loaded = {r[0] for r in conn.execute(
                "SELECT version FROM manifold.document_versions WHERE tenant_id = %s AND document_id = %s "
                "AND version < %s", (tenant_id, document_id, version)).fetchall()}
            # a loaded version the publisher never saw still gets a row, so it is tracked and purged
            for v in loaded - set(rows):
                conn.execute(
                    "INSERT INTO manifold.version_manifest (tenant_id, document_id, version) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING", (tenant_id, document_id, v))
            older = sorted((set(rows) | loaded) - {version})
            older = [v for v in older if v < version]
            self._set_state(conn, tenant_id, document_id, older, "deleted", "deleted_at")
            return [v for v in older if v in loaded or rows[v].purged_at is None]

    def mark_purged(self, tenant_id: str, document_id: str, versions: list[int]) -> None:
        if not versions:
            return
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                "UPDATE manifold.version_manifest SET purged_at = now(), updated_at = now() WHERE tenant_id = %s "
                "AND document_id = %s AND version = ANY(%s) AND state IN ('retired', 'deleted')",
                (tenant_id, document_id, versions))

    def entries(self, tenant_id: str, document_id: str | None = None) -> list[VersionEntry]:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            if document_id is not None:
                return self._rows(conn, tenant_id, document_id)
            return [_entry(r) for r in conn.execute(
                f"SELECT {_COLS} FROM manifold.version_manifest WHERE tenant_id = %s "
                "ORDER BY document_id, version", (tenant_id,)).fetchall()]

    def states(self, tenant_id: str) -> list[tuple[str, int, str]]:
        """(document, version, state) of every version of the tenant, in document order: what a
        list of documents needs, without decoding each version's expected manifests."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute("SELECT document_id, version, state FROM manifold.version_manifest "
                                "WHERE tenant_id = %s ORDER BY document_id, version", (tenant_id,)).fetchall()
        return [(str(d), int(v), str(st)) for d, v, st in rows]

    def entries_of(self, tenant_id: str, document_ids: Sequence[str]) -> list[VersionEntry]:
        """Every version of the named documents (one statement)."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return [_entry(r) for r in conn.execute(
                f"SELECT {_COLS} FROM manifold.version_manifest WHERE tenant_id = %s AND document_id = ANY(%s) "
                "ORDER BY document_id, version", (tenant_id, list(document_ids))).fetchall()]

    def purgeable(self, tenant_id: str, grace_s: float) -> list[VersionEntry]:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return [_entry(r) for r in conn.execute(
                f"SELECT {_COLS} FROM manifold.version_manifest WHERE tenant_id = %s AND purged_at IS NULL AND "
                "(state = 'deleted' OR (state = 'retired' AND retired_at <= now() - make_interval(secs => %s))) "
                "ORDER BY document_id, version", (tenant_id, float(grace_s))).fetchall()]

    def tenants(self) -> list[str]:
        try:
            with psycopg.connect(self._conninfo) as conn:
                return sorted(r[0] for r in conn.execute("SELECT manifold.known_tenants()").fetchall())
        except psycopg.OperationalError as exc:
            raise Transient(f"postgres unavailable: {exc}") from exc

    # ------------------------------------------------------------------ reconciler support

    def recently_loaded(self, tenant_id: str, within_s: float) -> set[tuple[str, int]]:
        """Versions the load stage wrote within `within_s` that the publisher has not seen yet:
        in flight, so not orphans."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return {(d, v) for d, v in conn.execute(
                "SELECT d.document_id, d.version FROM manifold.document_versions d WHERE d.tenant_id = %s "
                "AND d.updated_at > now() - make_interval(secs => %s) AND NOT EXISTS (SELECT 1 FROM "
                "manifold.version_manifest m WHERE m.tenant_id = d.tenant_id AND m.document_id = d.document_id "
                "AND m.version = d.version)", (tenant_id, float(within_s))).fetchall()}

    def state_drift(self, tenant_id: str) -> set[tuple[str, int]]:
        """Versions whose `document_versions.state` differs from the manifest state."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return {(d, v) for d, v in conn.execute(
                "SELECT d.document_id, d.version FROM manifold.document_versions d JOIN manifold.version_manifest m "
                "USING (tenant_id, document_id, version) WHERE d.tenant_id = %s AND d.state <> m.state",
                (tenant_id,)).fetchall()}

    def sync_state(self, tenant_id: str, document_id: str, version: int) -> None:
        with self._db.transaction(tenant_id) as conn:
            self._lock(conn, tenant_id, document_id)
            conn.execute(
                "UPDATE manifold.document_versions d SET state = m.state, updated_at = now() FROM "
                "manifold.version_manifest m WHERE d.tenant_id = m.tenant_id AND d.document_id = m.document_id "
                "AND d.version = m.version AND d.tenant_id = %s AND d.document_id = %s AND d.version = %s",
                (tenant_id, document_id, version))
