"""Access-control state in PostgreSQL: the ACL applier's writes and the query side's resolution.

Tables (migration 12): `document_acls` (one full ACL per document) and `principal_groups` (one
flattened group list per user), both tenant tables under `tenant_isolation` with FORCE.

Guarantees:
- `apply_acl` / `apply_groups` are idempotent and order-proof: a row is written only when the
  event's `seq` is higher than the stored one (`INSERT ... ON CONFLICT ... WHERE seq <`), so a
  duplicate, a re-delivery or an older event arriving late changes nothing. They return whether
  the event changed the state.
- Only the ACL applier calls the `apply_*` methods (it connects as `manifold_ingest`); nothing
  else writes these tables.
- `resolve_scope` reads the membership state and the tenant's ACLs in ONE transaction (a
  consistent snapshot) and returns the smaller exact description of what the principal may read
  (`access.ReadScope`): an allow list under default `none`, a deny list under default `tenant`.
- Parameters only; the tenant is set per transaction (`TenantConnections`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from manifold.shared.access import DEFAULTS, ReadScope
from manifold.shared.acl_events import DocumentAclSet, GroupsSet
from manifold.shared.stores.pg_connections import TenantConnections

__all__ = ["AclRow", "PostgresAclStore", "resolve_scope"]

_APPLY_ACL = """
INSERT INTO manifold.document_acls AS a (tenant_id, document_id, seq, public, users, groups, producer, event_id)
VALUES (%(tenant)s, %(doc)s, %(seq)s, %(public)s, %(users)s, %(groups)s, %(producer)s, %(event_id)s)
ON CONFLICT (tenant_id, document_id) DO UPDATE
    SET seq = EXCLUDED.seq, public = EXCLUDED.public, users = EXCLUDED.users, groups = EXCLUDED.groups,
        producer = EXCLUDED.producer, event_id = EXCLUDED.event_id, applied_at = now()
    WHERE a.seq < EXCLUDED.seq
RETURNING 1
"""
_APPLY_GROUPS = """
INSERT INTO manifold.principal_groups AS g (tenant_id, user_id, seq, groups, producer, event_id)
VALUES (%(tenant)s, %(user)s, %(seq)s, %(groups)s, %(producer)s, %(event_id)s)
ON CONFLICT (tenant_id, user_id) DO UPDATE
    SET seq = EXCLUDED.seq, groups = EXCLUDED.groups, producer = EXCLUDED.producer,
        event_id = EXCLUDED.event_id, applied_at = now()
    WHERE g.seq < EXCLUDED.seq
RETURNING 1
"""
_GROUPS_OF = "SELECT groups FROM manifold.principal_groups WHERE tenant_id = %s AND user_id = %s"
_ACL_OF = ("SELECT document_id, seq, public, users, groups, applied_at FROM manifold.document_acls "
           "WHERE tenant_id = %s AND document_id = ANY(%s)")
_VERDICTS = """
SELECT a.document_id,
       (a.public OR %(principal)s = ANY (a.users) OR a.groups && %(groups)s::text[]) AS granted
FROM manifold.document_acls a WHERE a.tenant_id = %(tenant)s
"""


@dataclass(frozen=True)
class AclRow:
    """A document's applied ACL."""

    document_id: str
    seq: int
    public: bool
    users: tuple[str, ...]
    groups: tuple[str, ...]
    applied_at: datetime


def resolve_scope(db: TenantConnections, tenant_id: str, principal: str, default: str) -> ReadScope:
    """What `principal` may read in `tenant_id` now (see the module docstring). An unknown
    `default` is treated as `none` (fail closed); an empty principal reads nothing."""
    mode = default if default in DEFAULTS else "none"
    if not principal:
        return ReadScope(tenant_id, principal, "none", allow=True)
    with db.transaction(tenant_id, snapshot=True) as conn:
        row = conn.execute(_GROUPS_OF, (tenant_id, principal)).fetchone()
        groups = list(row[0]) if row else []
        verdicts = conn.execute(_VERDICTS, {"tenant": tenant_id, "principal": principal, "groups": groups}).fetchall()
    if mode == "tenant":
        hidden = frozenset(doc for doc, granted in verdicts if not granted)
        return ReadScope(tenant_id, principal, "tenant", allow=False, documents=hidden, groups=tuple(groups))
    granted = frozenset(doc for doc, ok in verdicts if ok)
    return ReadScope(tenant_id, principal, "none", allow=True, documents=granted, groups=tuple(groups))


class PostgresAclStore:
    """The ACL applier's PostgreSQL port (`manifold_ingest`), plus read-backs for the CLI."""

    def __init__(self, db: TenantConnections) -> None:
        self._db = db

    def apply_acl(self, event: DocumentAclSet) -> bool:
        with self._db.transaction(event.tenant_id) as conn:
            row = conn.execute(_APPLY_ACL, {
                "tenant": event.tenant_id, "doc": event.document_id, "seq": event.seq, "public": event.public,
                "users": list(event.users), "groups": list(event.groups), "producer": event.producer,
                "event_id": event.event_id}).fetchone()
        return row is not None

    def apply_groups(self, event: GroupsSet) -> bool:
        with self._db.transaction(event.tenant_id) as conn:
            row = conn.execute(_APPLY_GROUPS, {
                "tenant": event.tenant_id, "user": event.user_id, "seq": event.seq, "groups": list(event.groups),
                "producer": event.producer, "event_id": event.event_id}).fetchone()
        return row is not None

    def acls(self, tenant_id: str, document_ids: list[str]) -> dict[str, AclRow]:
        """The applied ACL of each of `document_ids` that has one."""
        with self._db.transaction(tenant_id) as conn:
            rows: list[Any] = conn.execute(_ACL_OF, (tenant_id, list(document_ids))).fetchall()
        return {r[0]: AclRow(r[0], int(r[1]), bool(r[2]), tuple(r[3]), tuple(r[4]), r[5]) for r in rows}

    def keys(self, tenant_id: str) -> tuple[list[str], list[str]]:
        """Every document id with an ACL and every user id with memberships in the tenant."""
        with self._db.transaction(tenant_id) as conn:
            docs = [r[0] for r in conn.execute(
                "SELECT document_id FROM manifold.document_acls WHERE tenant_id = %s ORDER BY 1", (tenant_id,))]
            users = [r[0] for r in conn.execute(
                "SELECT user_id FROM manifold.principal_groups WHERE tenant_id = %s ORDER BY 1", (tenant_id,))]
        return docs, users

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        """The user's applied groups; None when no membership event was applied."""
        with self._db.transaction(tenant_id) as conn:
            row = conn.execute(_GROUPS_OF, (tenant_id, user_id)).fetchone()
        return tuple(row[0]) if row else None

    @classmethod
    def from_settings(cls, settings: Any, *, password: str | None = None) -> PostgresAclStore:
        """As `manifold_ingest` (the applier's role)."""
        from manifold.shared.stores.pg_connections import ingest_conninfo

        return cls(TenantConnections(ingest_conninfo(settings, password)))
