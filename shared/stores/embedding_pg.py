"""PostgreSQL adapter for embedding migrations: configuration states and parallel vectors.

Tables (migration 6): `embedding_configs` (global definitions), `embedding_states` (per tenant:
backfilling → verified → active → retired; at most one active; no active row means `primary`),
`chunk_vectors` (one vector per tenant, chunk and configuration). Connects as `manifold_ingest`
(RLS forced), one transaction per call, like `PostgresRelationalStore`.

Guarantees:
- `register` records a configuration's definition once; a stored definition that differs from
  the code's raises `EmbeddingConfigMismatch` (a name never changes meaning).
- `upsert_vectors` is idempotent (keyed by tenant, chunk, configuration; rewrites nothing
  unchanged) and writes only while the configuration is live (backfilling, verified or active)
  for the tenant and only for a chunk that still exists with the same content hash.
- `verify` reads one snapshot: every chunk of a staged, verified or active version must have
  exactly one vector for the configuration with the chunk's content hash, the configuration's
  dimension and (if normalised) unit norm. The checksum is `ids.set_checksum` over
  (chunk id, content hash:vector hash), order-independent.
- `activate` switches every given tenant in ONE transaction, re-verifying inside it; any
  refusal rolls back all of them. The previous active configuration becomes `verified` (its
  vectors stay and keep being written, so a rollback is one more `activate`) until `retire`.
- `active_config(conn, tenant)` is what readers call inside their own transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from manifold.shared.config import ManifoldSettings
from manifold.shared.embedding_configs import PRIMARY, EmbeddingConfig, EmbeddingConfigMismatch
from manifold.shared.embedding_configs import get as get_config
from manifold.shared.ids import set_checksum
from manifold.shared.stores import manifest as mf
from manifold.shared.stores.pg_connections import TenantConnections

LIVE_STATES = ("backfilling", "verified", "active")
ELIGIBLE_VERSION_STATES = ("staged", "verified", "active")
"""Versions whose chunks a configuration must cover (active ones serve; the others may soon)."""

_NORM_TOLERANCE = 1e-3


class ActivationRefused(RuntimeError):
    """The configuration is not verified for a tenant, or its re-verification failed."""


@dataclass(frozen=True)
class ChunkToEmbed:
    chunk_id: str
    document_id: str
    version: int
    text: str
    title: str
    content_sha256: str


@dataclass(frozen=True)
class VectorRow:
    chunk_id: str
    document_id: str
    version: int
    content_sha256: str
    vector: Sequence[float]


@dataclass
class Verification:
    tenant_id: str
    config: str
    chunks: int = 0
    active_chunks: int = 0
    vectors: int = 0
    missing: int = 0
    stale: int = 0
    bad_dim: int = 0
    bad_norm: int = 0
    orphaned: int = 0
    checksum: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.bad_dim or self.bad_norm)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        del out["problems"]
        return out


_STATE_COLS = "config, state, counts, checksum, backfill_started_at, verified_at, activated_at, retired_at, updated_at"
_ACTIVE = "SELECT config FROM manifold.embedding_states WHERE tenant_id = %s AND state = 'active'"
_ELIGIBLE = ("JOIN manifold.version_manifest m ON m.tenant_id = c.tenant_id AND m.document_id = c.document_id "
             "AND m.version = c.version AND m.state IN ('staged', 'verified', 'active')")
_VERIFY_PRIMARY = ("SELECT c.chunk_id, c.content_sha256, c.content_sha256, c.embedding, m.state "
                   f"FROM manifold.chunks c {_ELIGIBLE} WHERE c.tenant_id = %(tenant)s")
_VERIFY_PARALLEL = ("SELECT c.chunk_id, c.content_sha256, v.content_sha256, v.embedding, m.state "
                    f"FROM manifold.chunks c {_ELIGIBLE} "
                    "LEFT JOIN manifold.chunk_vectors v ON v.tenant_id = c.tenant_id AND v.chunk_id = c.chunk_id "
                    "AND v.config = %(config)s WHERE c.tenant_id = %(tenant)s")
_ORPHANED = ("SELECT count(*) FROM manifold.chunk_vectors v WHERE v.tenant_id = %(tenant)s AND v.config = %(config)s "
             "AND NOT EXISTS (SELECT 1 FROM manifold.chunks c " + _ELIGIBLE +
             " WHERE c.tenant_id = v.tenant_id AND c.chunk_id = v.chunk_id)")
# Chunks of versions not retired or deleted (or not yet in the manifest) lacking a current vector.
_MISSING_FROM = (
    "FROM manifold.chunks c "
    "LEFT JOIN manifold.version_manifest m ON m.tenant_id = c.tenant_id AND m.document_id = c.document_id "
    "AND m.version = c.version "
    "LEFT JOIN manifold.chunk_vectors v ON v.tenant_id = c.tenant_id AND v.chunk_id = c.chunk_id "
    "AND v.config = %(config)s "
    "WHERE c.tenant_id = %(tenant)s AND (m.state IS NULL OR m.state IN ('staged', 'verified', 'active')) "
    "AND (v.chunk_id IS NULL OR v.content_sha256 <> c.content_sha256)"
)
_MISSING = ("SELECT c.chunk_id, c.document_id, c.version, c.text, coalesce(s.title, ''), c.content_sha256 "
            + _MISSING_FROM.replace(
                "WHERE c.tenant_id",
                "LEFT JOIN manifold.sections s ON s.tenant_id = c.tenant_id AND s.section_id = c.section_id "
                "WHERE c.tenant_id")
            + " AND c.chunk_id > %(after)s ORDER BY c.chunk_id LIMIT %(limit)s")
_COUNT_MISSING = "SELECT count(*) " + _MISSING_FROM
_UPSERT = (
    "INSERT INTO manifold.chunk_vectors (tenant_id, chunk_id, config, document_id, version, embedding, content_sha256) "
    "SELECT c.tenant_id, c.chunk_id, %(config)s, c.document_id, c.version, %(v)s, c.content_sha256 "
    "FROM manifold.chunks c WHERE c.tenant_id = %(tenant)s AND c.chunk_id = %(chunk)s AND c.content_sha256 = %(sha)s "
    "AND EXISTS (SELECT 1 FROM manifold.embedding_states e WHERE e.tenant_id = %(tenant)s AND e.config = %(config)s "
    "AND e.state IN ('backfilling', 'verified', 'active')) "
    "ON CONFLICT (tenant_id, chunk_id, config) DO UPDATE SET embedding = EXCLUDED.embedding, "
    "content_sha256 = EXCLUDED.content_sha256, document_id = EXCLUDED.document_id, version = EXCLUDED.version, "
    "updated_at = now() WHERE (chunk_vectors.embedding, chunk_vectors.content_sha256) "
    "IS DISTINCT FROM (EXCLUDED.embedding, EXCLUDED.content_sha256)"
)


def active_config(conn: psycopg.Connection[Any], tenant_id: str) -> str:
    """The tenant's active configuration, read in the caller's transaction (`primary` if none)."""
    row = conn.execute(_ACTIVE, (tenant_id,)).fetchone()
    return str(row[0]) if row else PRIMARY


class PostgresEmbeddingStore:
    """Configuration states and parallel vectors (see module docstring). `conninfo` logs in as
    `manifold_ingest`."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout, vectors=True)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> PostgresEmbeddingStore:
        return cls(settings.postgres.ingest_conninfo())

    # ------------------------------------------------------------------ definitions and states

    def register(self, tenant_id: str, config: EmbeddingConfig) -> None:
        with self._db.transaction(tenant_id) as conn:
            self._register(conn, config)

    @staticmethod
    def _register(conn: psycopg.Connection[Any], config: EmbeddingConfig) -> None:
        d = config.definition()
        conn.execute(
            "INSERT INTO manifold.embedding_configs (name, model, revision, dim, normalized, template, "
            "query_template) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
            (config.name, d["model"], d["revision"], d["dim"], d["normalized"], d["template"], d["query_template"]))
        row = conn.execute(
            "SELECT model, revision, dim, normalized, template, query_template FROM manifold.embedding_configs "
            "WHERE name = %s", (config.name,)).fetchone()
        stored = dict(zip(("model", "revision", "dim", "normalized", "template", "query_template"), row or (),
                          strict=False))  # no row: nothing stored
        if stored != d:
            raise EmbeddingConfigMismatch(f"configuration {config.name!r} is stored as {stored}, the code says {d}")

    def states(self, tenant_id: str) -> dict[str, dict[str, Any]]:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute(f"SELECT {_STATE_COLS} FROM manifold.embedding_states WHERE tenant_id = %s",
                                (tenant_id,)).fetchall()
            counts = dict(conn.execute(
                "SELECT config, count(*) FROM manifold.chunk_vectors WHERE tenant_id = %s GROUP BY config",
                (tenant_id,)).fetchall())
            row = conn.execute("SELECT count(*) FROM manifold.chunks WHERE tenant_id = %s AND embedding IS NOT NULL",
                               (tenant_id,)).fetchone()
            counts[PRIMARY] = int(row[0]) if row else 0
        names = _STATE_COLS.split(", ")
        out = {r[0]: dict(zip(names, r, strict=True)) for r in rows}
        for name, body in out.items():
            body["stored_vectors"] = int(counts.get(name, 0))
        if not any(b["state"] == "active" for b in out.values()):
            out.setdefault(PRIMARY, {"config": PRIMARY, "state": "active",
                                     "stored_vectors": int(counts.get(PRIMARY, 0))})["state"] = "active"
        return out

    def active(self, tenant_id: str) -> str:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return active_config(conn, tenant_id)

    def live_configs(self, tenant_id: str) -> list[str]:
        """Parallel configurations new writes must cover: not primary, state backfilling,
        verified or active."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute(
                "SELECT config FROM manifold.embedding_states WHERE tenant_id = %s AND config <> %s "
                "AND state IN ('backfilling', 'verified', 'active') ORDER BY config", (tenant_id, PRIMARY)).fetchall()
        return [r[0] for r in rows]

    def begin_backfill(self, tenant_id: str, config: str) -> str:
        """Make `config` live for the tenant (state `backfilling` unless already verified or
        active); return the state it is in now."""
        with self._tenant_locked(tenant_id) as conn:
            conn.execute(
                "INSERT INTO manifold.embedding_states (tenant_id, config, state, backfill_started_at) "
                "VALUES (%s, %s, 'backfilling', now()) ON CONFLICT (tenant_id, config) DO UPDATE SET "
                "state = 'backfilling', backfill_started_at = now(), updated_at = now() "
                "WHERE embedding_states.state = 'retired'", (tenant_id, config))
            row = conn.execute("SELECT state FROM manifold.embedding_states WHERE tenant_id = %s AND config = %s",
                               (tenant_id, config)).fetchone()
        return str(row[0]) if row else "backfilling"

    def mark(self, tenant_id: str, config: str, state: str, *, only_from: Iterable[str]) -> None:
        with self._tenant_locked(tenant_id) as conn:
            conn.execute("UPDATE manifold.embedding_states SET state = %s, updated_at = now() "
                         "WHERE tenant_id = %s AND config = %s AND state = ANY(%s)",
                         (state, tenant_id, config, list(only_from)))

    # ------------------------------------------------------------------ vectors

    def count_missing(self, tenant_id: str, config: str) -> int:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            row = conn.execute(_COUNT_MISSING, {"tenant": tenant_id, "config": config}).fetchone()
        return int(row[0]) if row else 0

    def missing_chunks(self, tenant_id: str, config: str, *, after: str = "", limit: int = 64) -> list[ChunkToEmbed]:
        """Chunks (id order, after `after`) that lack a current vector for `config`."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute(_MISSING, {"tenant": tenant_id, "config": config, "after": after,
                                           "limit": limit}).fetchall()
        return [ChunkToEmbed(*r) for r in rows]

    def upsert_vectors(self, tenant_id: str, config: str, rows: Sequence[VectorRow]) -> None:
        if config == PRIMARY:
            raise ValueError("primary vectors are written with their version (chunks.embedding)")
        if not rows:
            return
        with self._db.transaction(tenant_id) as conn, conn.cursor() as cur:
            cur.executemany(_UPSERT, [
                {"tenant": tenant_id, "config": config, "chunk": r.chunk_id, "sha": r.content_sha256,
                 "v": np.asarray(r.vector, dtype=np.float32)} for r in rows])

    # ------------------------------------------------------------------ verify, activate, retire

    def verify(self, tenant_id: str, config: EmbeddingConfig) -> Verification:
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            return self._verify(conn, tenant_id, config)

    @staticmethod
    def _verify(conn: psycopg.Connection[Any], tenant_id: str, config: EmbeddingConfig) -> Verification:
        args = {"tenant": tenant_id, "config": config.name}
        rows = conn.execute(_VERIFY_PRIMARY if config.name == PRIMARY else _VERIFY_PARALLEL, args).fetchall()
        report = Verification(tenant_id=tenant_id, config=config.name, chunks=len(rows))
        pairs: list[tuple[str, str]] = []
        for chunk_id, chunk_sha, vector_sha, embedding, state in rows:
            report.active_chunks += state == "active"
            if embedding is None:
                report.missing += 1
                continue
            report.vectors += 1
            values = embedding.to_numpy() if hasattr(embedding, "to_numpy") else np.asarray(embedding)
            if vector_sha != chunk_sha:
                report.stale += 1
            elif len(values) != config.dim:
                report.bad_dim += 1
            elif config.normalized and abs(float(np.linalg.norm(values)) - 1.0) > _NORM_TOLERANCE:
                report.bad_norm += 1
            pairs.append((chunk_id, f"{vector_sha}:{mf.vector_hash(values)}"))
        if config.name != PRIMARY:
            row = conn.execute(_ORPHANED, args).fetchone()
            report.orphaned = int(row[0]) if row else 0
        report.checksum = set_checksum(pairs)
        return report

    def mark_verified(self, reports: Sequence[Verification]) -> None:
        """Record each tenant's verification; `backfilling` becomes `verified` (an active one
        stays active)."""
        for r in reports:
            with self._tenant_locked(r.tenant_id) as conn:
                conn.execute(
                    "UPDATE manifold.embedding_states SET state = CASE WHEN state = 'backfilling' THEN 'verified' "
                    "ELSE state END, counts = %s, checksum = %s, verified_at = now(), updated_at = now() "
                    "WHERE tenant_id = %s AND config = %s AND state <> 'retired'",
                    (Jsonb(r.to_json()), r.checksum, r.tenant_id, r.config))

    def activate(self, tenant_ids: Sequence[str], config: EmbeddingConfig) -> dict[str, Verification]:
        """Make `config` the active one for every tenant in one transaction (see module docstring)."""
        if not tenant_ids:
            return {}
        out: dict[str, Verification] = {}
        with self._db.transaction(tenant_ids[0]) as conn:
            self._register(conn, config)
            self._register(conn, get_config(PRIMARY))  # the fallback row below names it
            for tenant in tenant_ids:
                mf.check_tenant(tenant)
                conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (tenant,))
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('manifold.embedding_states:' || %s))", (tenant,))
                current = active_config(conn, tenant)
                row = conn.execute("SELECT state FROM manifold.embedding_states WHERE tenant_id = %s AND config = %s "
                                   "FOR UPDATE", (tenant, config.name)).fetchone()
                state = row[0] if row else ("active" if current == config.name else None)
                if state not in ("verified", "active"):
                    raise ActivationRefused(f"{config.name!r} is {state or 'not started'} for tenant {tenant!r}, "
                                            "not verified: run backfill and verify first")
                report = self._verify(conn, tenant, config)
                out[tenant] = report
                if not report.ok:
                    raise ActivationRefused(
                        f"{config.name!r} failed re-verification for tenant {tenant!r}: {report.missing} missing, "
                        f"{report.stale} stale, {report.bad_dim} wrong dimension, {report.bad_norm} not unit norm")
                if current == config.name:
                    continue
                conn.execute("UPDATE manifold.embedding_states SET state = 'verified', updated_at = now() "
                             "WHERE tenant_id = %s AND state = 'active'", (tenant,))
                if current == PRIMARY:  # implicit primary: record it as the verified fallback
                    conn.execute("INSERT INTO manifold.embedding_states (tenant_id, config, state) "
                                 "VALUES (%s, %s, 'verified') ON CONFLICT (tenant_id, config) DO UPDATE "
                                 "SET state = 'verified', updated_at = now()", (tenant, PRIMARY))
                conn.execute(
                    "INSERT INTO manifold.embedding_states (tenant_id, config, state, counts, checksum, verified_at, "
                    "activated_at) VALUES (%s, %s, 'active', %s, %s, now(), now()) ON CONFLICT (tenant_id, config) "
                    "DO UPDATE SET state = 'active', counts = EXCLUDED.counts, checksum = EXCLUDED.checksum, "
                    "verified_at = now(), activated_at = now(), updated_at = now()",
                    (tenant, config.name, Jsonb(report.to_json()), report.checksum))
        return out

    def retire(self, tenant_id: str, config: str) -> int:
        """Stop writing `config` for the tenant and delete its vectors; returns how many. Refuses
        the active configuration and `primary` (its vectors belong to the versions)."""
        if config == PRIMARY:
            raise ActivationRefused("primary cannot be retired: its vectors are part of every version")
        with self._tenant_locked(tenant_id) as conn:
            if active_config(conn, tenant_id) == config:
                raise ActivationRefused(f"{config!r} is active for tenant {tenant_id!r}; activate another first")
            conn.execute("UPDATE manifold.embedding_states SET state = 'retired', retired_at = now(), "
                         "updated_at = now() WHERE tenant_id = %s AND config = %s", (tenant_id, config))
            cur = conn.execute("DELETE FROM manifold.chunk_vectors WHERE tenant_id = %s AND config = %s",
                               (tenant_id, config))
            return cur.rowcount

    @contextmanager
    def _tenant_locked(self, tenant_id: str) -> Iterator[psycopg.Connection[Any]]:
        with self._db.transaction(tenant_id) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('manifold.embedding_states:' || %s))", (tenant_id,))
            yield conn
