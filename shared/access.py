"""Who is reading: the per-request read scope every store read is confined to (issue 29).

A query worker resolves a `ReadScope` once per request from PostgreSQL's ACL state (the
principal's groups from the membership table, never from a token claim; the documents whose ACL
grants or denies the principal) and enters it with `reading_as(scope)`. Every store read in that
request is confined by it in the store's own query language:

- PostgreSQL: `pg_settings()` are set per transaction (`manifold.principal`,
  `manifold.acl_default`) and the RESTRICTIVE row-level-security policies of migration 12
  evaluate the ACL themselves from the same tables; the scope's document lists are not trusted
  there.
- Elasticsearch: `es_clause()` goes into the query's bool `filter` and into the kNN `filter`
  (never a post-filter).
- Neo4j: `cypher_readable(var)` is a predicate on a relationship's `document_id`, with
  `cypher_params()` as its parameters.

Guarantees:
- A scope is either an allow list (default `none`: exactly the documents whose ACL grants the
  principal) or a deny list (default `tenant`: every document except those whose ACL does not
  grant the principal). Either way a document absent from the ACL state follows the default.
- `current(tenant_id)` raises `AccessUnresolved` when no scope was entered in this context or
  it belongs to another tenant: a store read without a reader fails closed, never open.
- The scope is a `contextvars` value, so it follows the request into the engine's step threads
  only where the engine copies the context (it does: `engine.Engine.execute`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from manifold.shared.errors import ManifoldError

Default = Literal["tenant", "none"]
DEFAULTS: tuple[str, ...] = ("tenant", "none")


class AccessUnresolved(ManifoldError):
    """A store read ran without a read scope for its tenant (a bug; refused, fail closed)."""


@dataclass(frozen=True)
class ReadScope:
    """What one principal may read in one tenant, resolved at the start of a request."""

    tenant_id: str
    principal: str
    default: Default
    allow: bool
    """True: readable = exactly `documents`; False: readable = every document but `documents`."""
    documents: frozenset[str] = field(default_factory=frozenset)
    groups: tuple[str, ...] = ()

    def readable(self, document_id: str | None) -> bool:
        if document_id is None:
            return False
        return (document_id in self.documents) == self.allow

    def pg_settings(self) -> dict[str, str]:
        """The transaction-local settings the PostgreSQL policies read."""
        return {"manifold.principal": self.principal, "manifold.acl_default": self.default}

    def es_clause(self) -> dict[str, Any] | None:
        """The Elasticsearch filter clause on `document_id` (None: nothing to exclude)."""
        docs = sorted(self.documents)
        if self.allow:
            return {"terms": {"document_id": docs}}
        if not docs:
            return None
        return {"bool": {"must_not": [{"terms": {"document_id": docs}}]}}

    def cypher_params(self) -> dict[str, Any]:
        return {"acl_docs": sorted(self.documents), "acl_allow": self.allow}


def cypher_readable(var: str) -> str:
    """A Cypher predicate: the relationship `var`'s source document is readable by the scope
    whose `cypher_params()` are bound (a relationship without a document is not)."""
    if not var.isidentifier():
        raise ValueError("variable names must be identifiers")
    return f"(({var}.document_id IN $acl_docs) = $acl_allow AND {var}.document_id IS NOT NULL)"


_CURRENT: contextvars.ContextVar[ReadScope | None] = contextvars.ContextVar("manifold_read_scope", default=None)


@contextlib.contextmanager
def reading_as(scope: ReadScope) -> Iterator[ReadScope]:
    """Enter `scope` for the reads made in this context (and contexts copied from it)."""
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


TOOL_PRINCIPAL = "manifold-tool"
_tool_reads = False


def allow_tool_reads() -> None:
    """Opt-in for benchmark scripts and tests that call executors directly, without a query
    turn: a read with no scope entered then reads as `TOOL_PRINCIPAL` under default `tenant`
    (documents without an ACL, as before per-document ACLs). No process entry point of the
    product calls this (`tests/unit/test_access.py` checks)."""
    global _tool_reads
    _tool_reads = True


def _tool_scope(tenant_id: str) -> ReadScope | None:
    return ReadScope(tenant_id, TOOL_PRINCIPAL, "tenant", allow=False) if _tool_reads else None


def current(tenant_id: str) -> ReadScope:
    """The scope entered for `tenant_id`; `AccessUnresolved` if there is none (fail closed)."""
    scope = _CURRENT.get()
    if scope is None:
        scope = _tool_scope(tenant_id)
    if scope is None or scope.tenant_id != tenant_id:
        raise AccessUnresolved(f"no read scope for tenant {tenant_id!r}: reads are refused")
    return scope


def for_tenant(tenant_id: str) -> ReadScope | None:
    """The scope entered for `tenant_id`, if any (for adapters that set per-transaction state;
    None means the transaction carries no principal, so the query role reads nothing)."""
    scope = _CURRENT.get()
    if scope is None:
        scope = _tool_scope(tenant_id)
    return scope if scope is not None and scope.tenant_id == tenant_id else None
