"""`PostgresStagingStore`: the `StagingStore` port on PostgreSQL (`staging_blobs`, `stage_payloads`).

Connects as `manifold_ingest` under row-level security through `TenantConnections`
(`pg_connections.py`: one tenant-scoped transaction per call, `Transient` on a server fault).

Guarantees (in addition to `manifold.shared.ports`):
- Blobs are keyed by (tenant, sha256) and immutable; payloads by (tenant, key, stage), last
  write wins. A sha256 must be 64 hex digits (`fullmatch`), so a path cannot be expressed.
- Reads are scoped to the tenant (a reference to another tenant's blob is missing) and verify the
  bytes against the stored sha256: a missing item raises `StagedItemMissing`, a corrupt one
  `BadInput`.
- `superseded` says whether a version will never be served (newer or deleted upstream, deleted
  or purged in the manifest): a payload that is missing for such a version was erased, not lost.
- `erase_deleted` removes, in one tenant transaction and idempotently, what deleted or purged
  versions left in staging.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Sequence

from psycopg import sql

from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import BadInput
from manifold.shared.ports import StagedItemMissing
from manifold.shared.stores.pg_connections import TenantConnections, ingest_conninfo, schema_table

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PostgresStagingStore:
    """`StagingStore` on PostgreSQL (`staging_blobs`, `stage_payloads`), same role and RLS.

    Blobs are keyed by (tenant, sha256) and immutable; payloads by (tenant, key, stage), last
    write wins. Reads verify the bytes against the stored sha256; a missing item raises
    `StagedItemMissing`; a corrupt one raises `BadInput`.
    """

    def __init__(self, conninfo: str, *, connect_timeout: int = 10) -> None:
        self._db = TenantConnections(conninfo, connect_timeout=connect_timeout)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings, *, password: str | None = None) -> PostgresStagingStore:
        return cls(ingest_conninfo(settings, password))

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every put and get of `tenant_id` this thread makes inside the block shares one
        transaction, each in its own savepoint (`TenantConnections.batch`): one commit for a
        stage's micro-batch instead of one per payload; a failed call undoes only its own write."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    def put_blob(self, tenant_id: str, content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                sql.SQL("INSERT INTO {} (tenant_id, sha256, content, size) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (tenant_id, sha256) DO NOTHING").format(schema_table("staging_blobs")),
                (tenant_id, digest, content, len(content)),
            )
        return digest

    def get_blob(self, tenant_id: str, sha256: str) -> bytes:
        if not _SHA256.fullmatch(sha256):
            raise BadInput(f"not a sha256: {sha256!r}")
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(
                sql.SQL("SELECT content FROM {} WHERE tenant_id = %s AND sha256 = %s").format(
                    schema_table("staging_blobs")),
                (tenant_id, sha256),
            ).fetchone()
        if row is None:
            raise StagedItemMissing(f"no staged blob {sha256} for tenant {tenant_id}")
        return _verified(bytes(row[0]), sha256, f"blob {sha256}")

    def put_payload(self, tenant_id: str, key: str, stage: str, payload: bytes) -> None:
        _check_payload_key(key, stage)
        with self._db.transaction(tenant_id) as conn:
            conn.execute(_PUT_PAYLOAD, (tenant_id, key, stage, payload, hashlib.sha256(payload).hexdigest()))

    def get_payload(self, tenant_id: str, key: str, stage: str) -> bytes:
        _check_payload_key(key, stage)
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(
                sql.SQL("SELECT payload, sha256 FROM {} WHERE tenant_id = %s AND key = %s AND stage = %s")
                .format(schema_table("stage_payloads")),
                (tenant_id, key, stage),
            ).fetchone()
        if row is None:
            raise StagedItemMissing(f"no {stage} payload under key {key!r} for tenant {tenant_id}")
        return _verified(bytes(row[0]), row[1], f"{stage} payload {key!r}")

    def put_payloads(self, tenant_id: str, items: Sequence[tuple[str, str, bytes]]) -> None:
        """`put_payload` for each (key, stage, payload), in one transaction and one pipelined
        round trip; the last of several writes under one (key, stage) wins, as it would alone."""
        last = {(key, stage): payload for key, stage, payload in items}
        for key, stage in last:
            _check_payload_key(key, stage)
        if not last:
            return
        with self._db.transaction(tenant_id) as conn, conn.cursor() as cur:
            cur.executemany(_PUT_PAYLOAD, [(tenant_id, key, stage, payload, hashlib.sha256(payload).hexdigest())
                                           for (key, stage), payload in sorted(last.items())])

    def get_payloads(self, tenant_id: str, items: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The stored payload of each (key, stage) with ONE statement, each verified as by
        `get_payload` (a corrupt one raises `BadInput`); a missing one is absent from the result
        (the caller decides: `get_payload` would raise `StagedItemMissing`)."""
        wanted = sorted(set(items))
        for key, stage in wanted:
            _check_payload_key(key, stage)
        if not wanted:
            return {}
        with self._db.transaction(tenant_id) as conn:
            rows = conn.execute(_GET_PAYLOADS, ([k for k, _ in wanted], [s for _, s in wanted], tenant_id)).fetchall()
        return {(key, stage): _verified(bytes(payload), sha, f"{stage} payload {key!r}")
                for key, stage, payload, sha in rows}

    def superseded(self, tenant_id: str, document_id: str, version: int) -> bool:
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(_SUPERSEDED, {"tenant": tenant_id, "doc": document_id, "version": version}).fetchone()
        return bool(row and row[0])

    def erase_deleted(self, tenant_id: str) -> dict[str, int]:
        """Erase what deleted documents left in staging, in one tenant transaction; idempotent.

        Removes every stage payload of a deleted document up to its tombstone version (in-flight
        versions included: payloads are found by the document and version in their key) and of
        every version gc has purged, and every blob whose content only such versions used (a blob
        still named by a live version or by the upstream ledger's current version stays).
        Returns the rows removed per table."""
        with self._db.transaction(tenant_id) as conn:
            payloads = conn.execute(_ERASE_PAYLOADS, {"tenant": tenant_id}).rowcount
            blobs = conn.execute(_ERASE_BLOBS, {"tenant": tenant_id}).rowcount
        return {"stage_payloads": payloads, "staging_blobs": blobs}


_PUT_PAYLOAD = sql.SQL(
    "INSERT INTO {t} (tenant_id, key, stage, payload, sha256) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, key, stage) DO UPDATE SET payload = EXCLUDED.payload, "
    "sha256 = EXCLUDED.sha256, updated_at = now() WHERE {t}.sha256 <> EXCLUDED.sha256"
).format(t=schema_table("stage_payloads"))
_GET_PAYLOADS = sql.SQL(
    "SELECT p.key, p.stage, p.payload, p.sha256 FROM {t} p "
    "JOIN unnest(%s::text[], %s::text[]) AS w(key, stage) ON p.key = w.key AND p.stage = w.stage "
    "WHERE p.tenant_id = %s"
).format(t=schema_table("stage_payloads"))
_SUPERSEDED = """
SELECT EXISTS (SELECT 1 FROM manifold.upstream_versions u
                WHERE u.tenant_id = %(tenant)s AND u.document_id = %(doc)s AND u.version > %(version)s)
    OR EXISTS (SELECT 1 FROM manifold.version_manifest m
                WHERE m.tenant_id = %(tenant)s AND m.document_id = %(doc)s
                  AND (m.version > %(version)s
                       OR (m.version = %(version)s AND (m.state = 'deleted' OR m.purged_at IS NOT NULL))))
"""
_ERASE_PAYLOADS = """
DELETE FROM manifold.stage_payloads p USING manifold.version_manifest m
WHERE p.tenant_id = %(tenant)s AND m.tenant_id = %(tenant)s AND p.document_id = m.document_id
  AND ((m.state = 'deleted' AND p.version <= m.version) OR (m.purged_at IS NOT NULL AND p.version = m.version))
"""
_ERASE_BLOBS = """
DELETE FROM manifold.staging_blobs b
WHERE b.tenant_id = %(tenant)s
  AND b.sha256 IN (SELECT content_sha256 FROM manifold.version_manifest WHERE tenant_id = %(tenant)s
                   AND (state = 'deleted' OR purged_at IS NOT NULL) AND content_sha256 IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM manifold.version_manifest m WHERE m.tenant_id = %(tenant)s
                  AND m.content_sha256 = b.sha256 AND m.state <> 'deleted' AND m.purged_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM manifold.upstream_versions u WHERE u.tenant_id = %(tenant)s
                  AND u.content_sha256 = b.sha256 AND NOT u.deleted)
"""


def _verified(content: bytes, sha256: str, what: str) -> bytes:
    if hashlib.sha256(content).hexdigest() != sha256:
        raise BadInput(f"staged {what} does not match its sha256 (corrupt)")
    return content


def _check_payload_key(key: str, stage: str) -> None:
    if not 1 <= len(key) <= 1024 or not 1 <= len(stage) <= 64:
        raise BadInput("payload key must be 1-1024 characters and stage 1-64")
