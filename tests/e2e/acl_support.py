"""Helpers shared by the per-document access-control e2e tests (issue 29).

Used by `test_document_acl.py` (deterministic, distributed), `test_acl_model.py` (Hypothesis
stateful, distributed) and `test_document_acl_embedded.py` (embedded profile):

- the reference model of who may read what (`Acl`, `grants`, `readable`);
- asking the real `QueryService` as one principal (`ask`, `answerer_with_default`);
- reply-level leak checks (`reply_leaks` on a `QueryReply` or its JSON; `leaks` for an
  `AclWorld`) and store-level ones (`store_documents`: what each store returns to a principal's
  scope under its own ACL predicate, with an option to remove one store's predicate);
- the sample world's northstar documents published for a fresh tenant through Kafka and every
  worker role (`publish_world`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline_support import running_workers, wait_for

from manifold.ingest import lifecycle, sample_world
from manifold.shared.config import ManifoldSettings

AS_OF = datetime(2026, 4, 15, tzinfo=UTC)
USERS = ("alice", "bob", "carol", "nobody-known")
GROUPS = {"alice": [], "bob": ["finance"], "carol": ["ops", "finance-readonly"]}


@dataclass(frozen=True)
class Acl:
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    public: bool = False


def grants(acl: Acl | None, user: str, groups: Iterable[str], default: str) -> bool:
    """The reference rule: a document without an ACL follows the default; otherwise public, a
    named user, or a shared group grants."""
    if acl is None:
        return default == "tenant"
    return acl.public or user in acl.users or bool(set(acl.groups) & set(groups))


def assign(documents: list[str]) -> dict[str, Acl | None]:
    """A deterministic mix: alice only, the finance group, public, carol and ops, no ACL."""
    pattern: list[Acl | None] = [Acl(users=("alice",)), Acl(groups=("finance",)), Acl(public=True),
                                 Acl(users=("carol",), groups=("ops",)), None]
    return {doc: pattern[i % len(pattern)] for i, doc in enumerate(sorted(documents))}


def readable(acls: Mapping[str, Acl | None], user: str, doc: str, default: str,
             groups: Mapping[str, Iterable[str]] | None = None) -> bool:
    memberships = GROUPS if groups is None else groups
    return grants(acls.get(doc), user, memberships.get(user, []), default)


@dataclass
class AclWorld:
    settings: ManifoldSettings
    tenant: str
    documents: list[str]
    acls: dict[str, Acl | None]
    root: Path


def ask(answerer: Any, tenant: str, user: str, question: str | None, *, session_id: str | None = None,
        continuation: str | None = None, choice: str | None = None, as_of: datetime = AS_OF) -> Any:
    """One question to `answerer` (a `QueryService`) as `user` of `tenant`."""
    from manifold.query.types import Principal, QueryRequest

    request = QueryRequest(request_id=f"acl-{uuid.uuid4().hex[:12]}", reply_topic="manifold.query.replies",
                           deadline=datetime.now(UTC) + timedelta(seconds=30), question=question, as_of=as_of,
                           session_id=session_id, continuation=continuation, choice=choice)
    return answerer.answer(request, Principal(tenant_id=tenant, subject=user))


def answerer_with_default(settings: ManifoldSettings, default: str) -> Any:
    """The real `QueryService` for `settings` (either profile) with `query.acl_default`."""
    from manifold.query.composition import build_answerer

    q = settings.query.model_copy(update={"acl_default": default})
    return build_answerer(settings.model_copy(update={"query": q}))


def reply_leaks(reply: Any, documents: Iterable[str], can_read: Callable[[str], bool]) -> list[str]:
    """Every way `reply` (a `QueryReply`, or its JSON as a dict) shows something of a document
    `can_read` says no to: an evidence item of it, or its id anywhere in the serialised reply
    (answer, result, plan, trace, gaps, clarification)."""
    body = reply if isinstance(reply, dict) else reply.model_dump(mode="json")
    found = []
    for ev in body.get("evidence") or ():
        doc = ev.get("document_id")
        if doc is not None and not can_read(doc):
            found.append(f"evidence {ev.get('evidence_id')} of hidden {doc}")
    text = json.dumps(body)
    for doc in documents:
        if not can_read(doc) and json.dumps(doc)[1:-1] in text:
            found.append(f"hidden document id {doc} in the reply")
    return found


def leaks(reply: Any, world: AclWorld, user: str, default: str) -> list[str]:
    """Every way `reply` shows `user` something of a document it may not read (`world.acls`)."""
    return reply_leaks(reply, world.documents, lambda doc: readable(world.acls, user, doc, default))


def normalised(reply: Any) -> dict[str, Any]:
    """What a reader sees in `reply` (status, answer, numbers, evidence, gaps), without the
    moment a metric was read (`snapshot_at`): for comparing replies asked at different times."""
    return {"status": reply.status, "answer": reply.answer, "result": _without_clock(reply.result),
            "evidence": [(e.document_id, e.version, e.chunk_id, e.record_id, e.edge_id, e.kind,
                          _without_clock(e.claims)) for e in reply.evidence],
            "gaps": [(g.step, g.kind, g.detail) for g in reply.gaps]}


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k != "snapshot_at"}
    if isinstance(value, list | tuple):
        return [_without_clock(v) for v in value]
    return value


def publish_access(s: ManifoldSettings, tenant: str, acls: Mapping[str, Acl | None]) -> None:
    from manifold.deploy.compose.distributed import access_client

    client = access_client(s)
    for user, groups in GROUPS.items():
        client.set_groups(tenant, user, groups)
    for doc, acl in acls.items():
        if acl is not None:
            client.set_acl(tenant, doc, users=acl.users, groups=acl.groups, public=acl.public)


def applied(s: ManifoldSettings, tenant: str, acls: Mapping[str, Acl | None]) -> bool:
    from manifold.shared.stores.acl_pg import PostgresAclStore

    store = PostgresAclStore.from_settings(s)
    want = {d for d, a in acls.items() if a is not None}
    have = store.acls(tenant, sorted(want))
    return set(have) == want and all(store.groups_of(tenant, u) == tuple(sorted(g)) for u, g in GROUPS.items())


def publish_world(s: ManifoldSettings, tenant: str, root: Path,
                  before_content: Callable[[list[BaseException]], None] = lambda _errors: None) -> list[str]:
    """Write the sample world under `root`, run every worker role, call `before_content` (e.g.
    to publish and wait for ACLs, so no moment exists where a document is open), publish the
    northstar documents for `tenant` and wait until each is active. Returns their ids."""
    from manifold.deploy.compose.distributed import upstream_client

    written = sample_world.write_world(root)
    documents = sorted(str(p.relative_to(root / "northstar")) for p in written["northstar"])
    ports = lifecycle.build_ports(s)
    with running_workers(s) as errors:
        before_content(errors)
        report = upstream_client(s).publish_paths(tenant, [root / "northstar"])
        assert not report.rejected, report.rejected

        def all_active() -> bool:
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            return set(documents) <= active

        wait_for("the documents to be published", all_active, errors, timeout=600)
    return documents


def store_documents(s: ManifoldSettings, tenant: str, user: str, es_client: Any, neo4j_driver: Any, *,
                    default: str = "tenant", without: str | None = None) -> dict[str, set[str]]:
    """Per store, the documents it returns to `user`'s scope, read straight from the store under
    its own ACL predicate (no final check behind it). `without` removes one store's predicate,
    to show a check built on this would notice."""
    import psycopg

    from manifold.shared import access
    from manifold.shared.stores.acl_pg import resolve_scope
    from manifold.shared.stores.es_mapping import ES_ALIAS
    from manifold.shared.stores.pg_connections import TenantConnections
    from manifold.shared.stores.serving import cypher_serving, es_serving_filter, serving_params

    scope = resolve_scope(TenantConnections(s.postgres.query_conninfo()), tenant, user, default)
    seen: dict[str, set[str]] = {}
    with access.reading_as(scope):
        filters = es_serving_filter(tenant)
        if without == "elasticsearch":
            filters = [f for f in filters if "document_id" not in json.dumps(f)]
        res = es_client.search(index=ES_ALIAS, query={"bool": {"filter": filters}}, size=1000,
                               source=["document_id"])
        seen["elasticsearch"] = {h["_source"]["document_id"] for h in res["hits"]["hits"]}
        predicate = cypher_serving("r") if without != "neo4j" else "(r.tenant_id = $tenant AND r.active = true)"
        with neo4j_driver.session() as session:
            rows = session.run(f"MATCH ()-[r]->() WHERE {predicate} RETURN DISTINCT r.document_id AS d",
                               tenant=tenant, **serving_params(tenant))
            seen["neo4j"] = {r["d"] for r in rows if r["d"] is not None}
    with psycopg.connect(s.postgres.conninfo()) as conn:  # superuser: only to drop a policy in a rolled-back test
        with conn.transaction(force_rollback=True):
            if without == "postgres":
                conn.execute("DROP POLICY acl_readable ON manifold.chunks")
                conn.execute("DROP POLICY acl_readable ON manifold.version_manifest")
            conn.execute("SET LOCAL ROLE manifold_query")
            for key, value in {"manifold.tenant_id": tenant, **scope.pg_settings()}.items():
                conn.execute("SELECT set_config(%s, %s, true)", (key, value))
            seen["postgres"] = {r[0] for r in conn.execute("SELECT DISTINCT document_id FROM manifold.chunks")}
    return seen


def store_leaks(world: AclWorld, user: str, es_client: Any, neo4j_driver: Any, *,
                without: str | None = None) -> dict[str, set[str]]:
    """Per store, the documents it returns to `user`'s scope (default `tenant`) that `user` may
    not read under `world.acls` (see `store_documents`)."""
    seen = store_documents(world.settings, world.tenant, user, es_client, neo4j_driver, without=without)
    return {store: {d for d in docs if not readable(world.acls, user, d, "tenant")} for store, docs in seen.items()}
