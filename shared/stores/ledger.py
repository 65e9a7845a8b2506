"""PostgreSQL `VersionLedger`: atomic version assignment for the upstream publish client.

Guarantees: reservations of one (tenant, document) are serialised by a transaction advisory lock
and the row lock, so concurrent publishers never hand out the same version twice; the tenant is set per
transaction and the table (`manifold.upstream_versions`, migration 2 in `pg_schema`) is under
row-level security like every tenant table. Connect as `manifold_ingest`.

`in_flight` (read only) lists the versions the ledger handed out that the publisher has not seen
yet (no manifest row for that version or a newer one), each with the furthest pipeline stage whose
payload is staged: what `manifold status` and `reconcile` show for documents in flight, e.g.
after a worker was killed mid-pipeline. `newest_version` (read only) is the newest version handed
out for one document: what the `dlq` tools compare a dead letter's version with (superseded?).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from manifold.shared.stores.pg_connections import TenantConnections

STAGE_ORDER = ("parsed", "chunked", "embedded", "extracted")
"""Stage payloads in pipeline order (`ingest.notices.Stage`)."""


@dataclass(frozen=True)
class InFlight:
    """A version on its way through the pipeline. `stage`: `unconfirmed` (reserved, its event not
    acknowledged), `queued` (on `manifold.documents`, not parsed yet), `delete queued`, or the
    last stage whose output is staged (`parsed` ... `extracted`: waiting for the next stage)."""

    tenant_id: str
    document_id: str
    version: int
    stage: str
    since: datetime

    def to_json(self) -> dict[str, object]:
        return {"tenant_id": self.tenant_id, "document_id": self.document_id, "version": self.version,
                "stage": self.stage, "since": self.since.isoformat()}


_IN_FLIGHT_SQL = """
SELECT u.document_id, u.version, u.deleted, u.confirmed, u.updated_at,
       (SELECT array_agg(DISTINCT p.stage) FROM manifold.stage_payloads p
         WHERE p.tenant_id = u.tenant_id AND p.document_id = u.document_id AND p.version = u.version) AS stages
  FROM manifold.upstream_versions u
 WHERE u.tenant_id = %s
   AND NOT EXISTS (SELECT 1 FROM manifold.version_manifest m
                    WHERE m.tenant_id = u.tenant_id AND m.document_id = u.document_id AND m.version >= u.version)
 ORDER BY u.document_id
"""


_TIMELINE_SQL = """
WITH v AS (
  SELECT %(version)s::integer AS version
)
SELECT 'published upstream' AS event, u.updated_at AS at, 0 AS ord
  FROM manifold.upstream_versions u, v
 WHERE u.tenant_id = %(tenant)s AND u.document_id = %(doc)s AND u.version = v.version AND u.confirmed
UNION ALL
SELECT p.stage, min(p.created_at), CASE p.stage WHEN 'parsed' THEN 1 WHEN 'chunked' THEN 2
                                                WHEN 'embedded' THEN 3 WHEN 'extracted' THEN 4 ELSE 5 END
  FROM manifold.stage_payloads p, v
 WHERE p.tenant_id = %(tenant)s AND p.document_id = %(doc)s AND p.version = v.version
 GROUP BY p.stage
UNION ALL
SELECT e.event, e.at, e.ord
  FROM manifold.version_manifest m, v,
       LATERAL (VALUES ('loaded (staged)', m.staged_at, 6), ('verified', m.verified_at, 7),
                       ('activated', m.activated_at, 8), ('retired', m.retired_at, 9),
                       ('deleted', m.deleted_at, 10), ('purged', m.purged_at, 11)) AS e(event, at, ord)
 WHERE m.tenant_id = %(tenant)s AND m.document_id = %(doc)s AND m.version = v.version AND e.at IS NOT NULL
ORDER BY ord, at
"""


@dataclass(frozen=True)
class Timeline:
    """What a document version went through, in pipeline order, with when each step finished."""

    tenant_id: str
    document_id: str
    version: int
    events: tuple[tuple[str, datetime], ...]

    def to_json(self) -> dict[str, object]:
        return {"tenant_id": self.tenant_id, "document_id": self.document_id, "version": self.version,
                "events": [{"event": e, "at": at.isoformat()} for e, at in self.events]}


class PostgresVersionLedger:
    def __init__(self, conninfo: str) -> None:
        self._db = TenantConnections(conninfo)

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every `reserve` / `confirm` of `tenant_id` this thread makes inside the block shares
        one transaction (a savepoint each, one commit at the end; `TenantConnections.batch`).
        Reservations hold their documents' advisory locks until that commit."""
        return self._db.batch(tenant_id, snapshot=snapshot)

    def reserve(self, tenant_id: str, document_id: str, content_sha256: str | None) -> int | None:
        with self._db.transaction(tenant_id) as conn:
            # Serialise reservations of one document, including its very first one (no row to lock yet).
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{tenant_id}/{document_id}",))
            row = conn.execute(
                "SELECT version, content_sha256, deleted, confirmed FROM upstream_versions "
                "WHERE tenant_id = %s AND document_id = %s FOR UPDATE",
                (tenant_id, document_id),
            ).fetchone()
            deleting = content_sha256 is None
            if row is None:
                if deleting:
                    return None
                conn.execute(
                    "INSERT INTO upstream_versions (tenant_id, document_id, version, content_sha256) "
                    "VALUES (%s, %s, 1, %s)",
                    (tenant_id, document_id, content_sha256),
                )
                return 1
            version, sha, deleted, confirmed = row
            same = deleted if deleting else (not deleted and sha == content_sha256)
            if same:
                return None if confirmed else int(version)
            conn.execute(
                "UPDATE upstream_versions SET version = version + 1, content_sha256 = %s, deleted = %s, "
                "confirmed = false, updated_at = now() WHERE tenant_id = %s AND document_id = %s",
                (content_sha256, deleting, tenant_id, document_id),
            )
            return int(version) + 1

    def in_flight(self, tenant_id: str) -> list[InFlight]:
        """Versions of `tenant_id` handed out but not yet seen by the publisher (read only)."""
        with self._db.transaction(tenant_id) as conn:
            rows = conn.execute(_IN_FLIGHT_SQL, (tenant_id,)).fetchall()
        out = []
        for document_id, version, deleted, confirmed, since, stages in rows:
            done = [s for s in STAGE_ORDER if s in (stages or ())]
            stage = ("unconfirmed" if not confirmed else "delete queued" if deleted
                     else done[-1] if done else "queued")
            out.append(InFlight(tenant_id, document_id, int(version), stage, since))
        return out

    def newest_version(self, tenant_id: str, document_id: str) -> int | None:
        """The newest version the ledger handed out for the document (an upsert's or a delete's,
        confirmed or not), or None when it never handed one out. Read only: one SELECT in a
        read-only transaction of the tenant."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            row = conn.execute("SELECT version FROM upstream_versions WHERE tenant_id = %s AND document_id = %s",
                               (tenant_id, document_id)).fetchone()
        return None if row is None else int(row[0])

    def confirm(self, tenant_id: str, document_id: str, version: int) -> None:
        with self._db.transaction(tenant_id) as conn:
            conn.execute(
                "UPDATE upstream_versions SET confirmed = true, updated_at = now() "
                "WHERE tenant_id = %s AND document_id = %s AND version = %s",
                (tenant_id, document_id, version),
            )

    def live_documents(self, tenant_id: str) -> set[str]:
        """Ids of the tenant's documents whose last reserved event is an upsert (not a delete)."""
        with self._db.transaction(tenant_id) as conn:
            rows = conn.execute(
                "SELECT document_id FROM upstream_versions WHERE tenant_id = %s AND NOT deleted",
                (tenant_id,),
            ).fetchall()
        return {row[0] for row in rows}

    def timeline(self, tenant_id: str, document_id: str, version: int | None = None) -> Timeline | None:
        """The steps `version` (default: the newest the ledger handed out) went through: the
        upstream publish, each staged stage output, and the manifest's staged / verified /
        activated / retired / deleted / purged times. None when the ledger does not know the
        document. Read only."""
        with self._db.transaction(tenant_id) as conn:
            if version is None:
                row = conn.execute("SELECT version FROM upstream_versions WHERE tenant_id = %s AND document_id = %s",
                                   (tenant_id, document_id)).fetchone()
                if row is None:
                    return None
                version = int(row[0])
            rows = conn.execute(_TIMELINE_SQL, {"tenant": tenant_id, "doc": document_id, "version": version}).fetchall()
        return Timeline(tenant_id, document_id, version, tuple((str(e), at) for e, at, _ in rows))

    def publish_latency(self, tenant_id: str, last: int = 200) -> dict[str, str]:
        """Over the tenant's `last` activations: the publisher's own latency (loaded → active) and
        end to end (published upstream → active, for versions that are still the ledger's newest),
        as p50 / p95 in seconds. Empty when nothing was activated yet. Read only."""
        with self._db.transaction(tenant_id, snapshot=True) as conn:
            row = conn.execute(_LATENCY_SQL, {"tenant": tenant_id, "last": last}).fetchone()
        if row is None or row[0] == 0:
            return {}
        n, p50, p95, e50, e95 = row
        out = {"activations": str(n), "loaded → active p50": _s(p50), "loaded → active p95": _s(p95)}
        if e50 is not None:
            out |= {"upstream → active p50": _s(e50), "upstream → active p95": _s(e95)}
        return out


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.2f} s"


_LATENCY_SQL = """
WITH recent AS (
  SELECT m.document_id, m.version, m.staged_at, m.activated_at
    FROM manifold.version_manifest m
   WHERE m.tenant_id = %(tenant)s AND m.activated_at IS NOT NULL
   ORDER BY m.activated_at DESC LIMIT %(last)s
), e2e AS (
  SELECT extract(epoch FROM r.activated_at - u.updated_at) AS s
    FROM recent r JOIN manifold.upstream_versions u
      ON u.tenant_id = %(tenant)s AND u.document_id = r.document_id AND u.version = r.version AND u.confirmed
)
SELECT count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM activated_at - staged_at)),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM activated_at - staged_at)),
       (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM e2e),
       (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY s) FROM e2e)
  FROM recent
"""
