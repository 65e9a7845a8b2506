"""Per-document access control on the EMBEDDED profile (issue 29): everything in PostgreSQL.

The text index (`text_chunks`, `text_terms`), the graph (`graph_edges`, `graph_mentions`) and the
bus are PostgreSQL tables here, so this is where the row-level-security policies alone carry the
guarantee. A fresh tenant (the dev stack's PostgreSQL, an embedded data directory of its own)
gets signed ACL and membership events on the embedded bus BEFORE its content (the sample world's
northstar documents), then the in-process pipeline (`drive`: every stage, the publisher and the
ACL applier's `acl` and `groups` roles) runs until nothing is pending. Principals then ask
questions of every class through the real embedded `QueryService`, and:

- leaks: no evidence item of a document the principal may not read and no hidden document id
  anywhere in the reply, under default `tenant` and `none`;
- store level: read as the query role under the principal, `text_chunks`, `text_terms`,
  `graph_edges`, `graph_mentions`, `chunks`, `chunk_vectors` and the `serving_*` views return
  only readable documents (and dropping one policy is noticed: the checker is not vacuous);
- the readable still answers; fail closed (default `none`, an unknown principal, an unsigned ACL
  event dead-lettered on the embedded bus and changing nothing);
- a revoke through the bus holds at once and creates no content version;
- non-interference: documents a reader may not read, published later (ACL first) and closer to
  the questions, change nothing that reader sees, while their reader's replies do change.

Under CI=true a missing PostgreSQL fails (tests/conftest.py).
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from acl_support import (
    GROUPS,
    USERS,
    Acl,
    AclWorld,
    answerer_with_default,
    applied,
    ask,
    assign,
    leaks,
    normalised,
    readable,
)

from manifold.ingest import sample_world
from manifold.shared.config import ManifoldSettings

pytestmark = pytest.mark.timeout(900)

QUESTIONS = (
    "Find invoice INV-2026-0148",
    "Show me invoice INV-2026-0211",
    "What was our total spend with Supplier Beta in Q1 2026?",
    "Total spend with Supplier Beta in February 2026",
    "Which suppliers supply PRD-482?",
    "Can we send back damaged goods, and how long do we have?",
    'Which documents mention "certified calibration bench"?',
    'Which documents contain the term "sensing element"?',
    "Which delayed orders are affected by the supplier delay notice, and what is the revenue at risk?",
    "What does the contract with Supplier Beta say about delivery?",
)
STORE_TABLES = ("text_chunks", "text_terms", "graph_edges", "graph_mentions", "chunks", "chunk_vectors",
                "version_manifest", "serving_chunks", "serving_records", "serving_record_lines",
                "serving_sections", "serving_document_versions")


def _drive(s: ManifoldSettings, publish: Any) -> Any:
    """`publish(bus)`, then the in-process pipeline until nothing is pending; the drain report."""
    from manifold.deploy.compose.embedded import drive, open_bus

    bus = open_bus(s)
    try:
        expected = publish(bus) or 0
        return drive(s, bus, quiet=True, expected=expected)
    finally:
        bus.close()


def _publish_acls(s: ManifoldSettings, tenant: str, acls: dict[str, Acl | None],
                  groups: dict[str, list[str]] | None = None) -> Any:
    from manifold.deploy.compose.embedded import access_client

    def publish(bus: Any) -> int:
        client = access_client(s, bus)
        for user, names in (groups or {}).items():
            client.set_groups(tenant, user, names)
        sent = 0
        for doc, acl in acls.items():
            if acl is not None:
                client.set_acl(tenant, doc, users=acl.users, groups=acl.groups, public=acl.public)
                sent += 1
        return sent + len(groups or {})

    return _drive(s, publish)


def _publish_folder(s: ManifoldSettings, tenant: str, folder: Path) -> Any:
    from manifold.deploy.compose.embedded import upstream_client

    def publish(bus: Any) -> int:
        report = upstream_client(s, bus).publish_paths(tenant, [folder])
        assert not report.rejected, report.rejected
        return len(report.published)

    return _drive(s, publish)


def _mine(drained: Any, tenant: str) -> list[Any]:
    """The dead letters of `tenant` in a drain report (the dev stack's embedded bus is shared:
    another process's drain may run first, and a report lists every letter of its drain)."""
    return [d for d in drained.dead_letters if d.tenant_id == tenant]


def _active(s: ManifoldSettings, tenant: str) -> dict[str, int]:
    from manifold.deploy.compose.embedded import lifecycle_ports

    return {e.document_id: e.version for e in lifecycle_ports(s).manifest.entries(tenant) if e.state == "active"}


@pytest.fixture(scope="module")
def embedded_world(settings: ManifoldSettings, pg_conninfo: str,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclWorld]:
    """Like `folder_support.ingest_folder`, with the ACLs and memberships published (and applied)
    before the content, so no moment exists where a document is open."""
    from manifold.deploy.compose.embedded import prepare
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    root = tmp_path_factory.mktemp("acl-embedded")
    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=root / "data"),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    prepare(s, quiet=True)
    written = sample_world.write_world(root / "world")
    folder = root / "world" / "northstar"
    documents = sorted(str(p.relative_to(folder)) for p in written["northstar"])
    acls = assign(documents)
    tenant = f"u{uuid.uuid4().hex[:8]}-acl-embedded"
    assert not _mine(_publish_acls(s, tenant, acls, GROUPS), tenant)
    assert applied(s, tenant, acls)  # by this drain (or another process's: the embedded bus is shared)
    assert not _mine(_publish_folder(s, tenant, folder), tenant)
    assert set(_active(s, tenant)) == set(documents)
    yield AclWorld(s, tenant, documents, acls, root)


@pytest.fixture(scope="module")
def answerers(embedded_world: AclWorld) -> Iterator[dict[str, Any]]:
    built = {default: answerer_with_default(embedded_world.settings, default) for default in ("tenant", "none")}
    yield built
    for answerer in built.values():
        answerer.close()


@pytest.mark.parametrize("default", ["tenant", "none"])
def test_no_reply_shows_a_document_its_reader_may_not_read(embedded_world: AclWorld, answerers: dict[str, Any],
                                                           default: str) -> None:
    problems, evidence_seen = [], 0
    for user in USERS:
        for question in QUESTIONS:
            reply = ask(answerers[default], embedded_world.tenant, user, question)
            assert reply.status != "error", (user, question, reply.error)
            assert {ev.store for ev in reply.evidence} <= {"postgres"}
            evidence_seen += len(reply.evidence)
            problems += [f"{user} / {question}: {p}" for p in leaks(reply, embedded_world, user, default)]
    assert not problems, "\n".join(problems)
    assert evidence_seen > 0  # the questions did find what the readers may read


def store_documents(world: AclWorld, user: str, default: str, *, without: str | None = None) -> dict[str, set[str]]:
    """Per table or view, the documents the query role reads under `user`'s principal (straight
    SQL, no final check behind it). `without` drops one table's ACL policy and the manifest's
    (rolled back; with the manifest's alone in place, `query_active_only` still hides the rows)."""
    import psycopg

    s = world.settings
    seen: dict[str, set[str]] = {}
    with psycopg.connect(s.postgres.conninfo()) as conn:  # superuser: only to switch role / drop a policy
        with conn.transaction(force_rollback=True):
            if without is not None:  # the table's policy AND the manifest's: `query_active_only` reads the
                conn.execute(f"DROP POLICY acl_readable ON manifold.{without}")  # manifest under its own
                conn.execute("DROP POLICY acl_readable ON manifold.version_manifest")  # policy
            conn.execute("SET LOCAL ROLE manifold_query")
            for key, value in {"manifold.tenant_id": world.tenant, "manifold.principal": user,
                               "manifold.acl_default": default}.items():
                conn.execute("SELECT set_config(%s, %s, true)", (key, value))
            for table in STORE_TABLES:
                rows = conn.execute(f"SELECT DISTINCT document_id FROM manifold.{table}").fetchall()
                seen[table] = {r[0] for r in rows if r[0] is not None}
    return seen


@pytest.mark.parametrize("default", ["tenant", "none"])
def test_every_postgresql_store_returns_only_readable_documents(embedded_world: AclWorld, default: str) -> None:
    for user in (*USERS, "finance"):
        seen = store_documents(embedded_world, user, default)
        found = {table: {d for d in docs if not readable(embedded_world.acls, user, d, default)}
                 for table, docs in seen.items()}
        assert not any(found.values()), (user, found)
        if user == "alice":
            assert seen["text_chunks"] and seen["graph_edges"] and seen["serving_records"], seen  # not vacuous


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan, depth first."""
    return [node, *(n for child in node.get("Plans", []) for n in _nodes(child))]


@pytest.mark.parametrize("default", ["tenant", "none"])
def test_bm25_reads_the_collection_statistics_once_per_question_under_the_policies(embedded_world: AclWorld,
                                                                                  default: str) -> None:
    """The BM25 statement's whole-tenant statistics run once, not once per posting: inlined under
    the ACL and active-version policies, the planner once put that aggregate inside the posting
    loop (every embedded BM25 step timed out on a real corpus). Structural, not a timing."""
    import json

    import psycopg

    from manifold.query.executors import pg_lexical
    from manifold.shared import analysis

    terms = analysis.terms("calibration supplier delivery invoice pressure")
    args = pg_lexical.bm25_arguments(embedded_world.tenant, Counter(terms), limit=20,
                                     settings=embedded_world.settings.query)
    with psycopg.connect(embedded_world.settings.postgres.conninfo()) as conn, \
            conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL ROLE manifold_query")
        for key, value in {"manifold.tenant_id": embedded_world.tenant, "manifold.principal": "alice",
                           "manifold.acl_default": default}.items():
            conn.execute("SELECT set_config(%s, %s, true)", (key, value))
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + pg_lexical.BM25_SQL, args).fetchone()
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = _nodes(plan[0]["Plan"])
    assert any(n.get("Relation Name") == "text_terms" for n in nodes)  # the statement did read postings
    # the statistics are their own subplans (run once), never inlined into the posting joins, whatever
    # plan this small world would get: on a real corpus the inlined form ran once per posting
    ctes = {n.get("Subplan Name") for n in nodes if n.get("Parent Relationship") == "InitPlan"}
    assert {"CTE stats", "CTE df"} <= ctes, ctes
    repeated = [(n["Node Type"], n.get("Actual Loops")) for n in nodes if n.get("Relation Name") == "text_chunks"
                and n["Node Type"] == "Seq Scan" and n.get("Actual Loops", 0) > 1]
    assert not repeated, f"a whole-tenant scan of text_chunks ran per row: {repeated}"


@pytest.mark.parametrize("table", ["text_chunks", "graph_edges", "chunks"])
def test_the_checker_catches_a_table_without_its_acl_policy(embedded_world: AclWorld, table: str) -> None:
    found = set()
    for user in ("bob", "carol", "nobody-known"):
        seen = store_documents(embedded_world, user, "tenant", without=table)[table]
        found |= {d for d in seen if not readable(embedded_world.acls, user, d, "tenant")}
    assert found, f"dropping the {table} policy went unnoticed"


def test_a_reader_still_finds_what_it_may_read_and_not_what_it_may_not(embedded_world: AclWorld,
                                                                       answerers: dict[str, Any]) -> None:
    doc = "invoices/inv-2026-0211.csv"
    for user in USERS:
        reply = ask(answerers["tenant"], embedded_world.tenant, user, "Show me invoice INV-2026-0211")
        cited = {e.document_id for e in reply.evidence}
        if readable(embedded_world.acls, user, doc, "tenant"):
            assert doc in cited, (user, reply.status, reply.answer)
        else:
            assert doc not in cited, (user, reply.status)


def test_default_none_and_an_unknown_principal_fail_closed(embedded_world: AclWorld,
                                                           answerers: dict[str, Any]) -> None:
    unrestricted = [d for d, a in embedded_world.acls.items() if a is None]
    assert unrestricted
    for question in QUESTIONS:
        reply = ask(answerers["none"], embedded_world.tenant, f"stranger-{uuid.uuid4().hex[:6]}", question)
        for ev in reply.evidence:
            if ev.document_id is None:  # a metric's summary: its lines are items of their own
                continue
            acl = embedded_world.acls.get(ev.document_id)
            assert acl is not None and acl.public, (question, ev.document_id)


def test_an_unsigned_acl_event_is_dead_lettered_and_changes_nothing(embedded_world: AclWorld) -> None:
    from manifold.shared import topics
    from manifold.shared.acl_events import DocumentAclSet
    from manifold.shared.stores.acl_pg import PostgresAclStore

    s, tenant = embedded_world.settings, embedded_world.tenant
    doc = next(d for d, a in embedded_world.acls.items() if a is not None and a.users == ("alice",))
    forged = DocumentAclSet(tenant_id=tenant, document_id=doc, public=True, seq=2**61)

    def publish(bus: Any) -> int:
        from manifold.shared.log_bus import BusProducer

        producer = BusProducer(bus)
        producer.produce(topics.ACL, key=forged.key, value=forged.model_dump_json().encode())
        producer.flush(30)
        return 1

    _drive(s, publish)
    from manifold.deploy.compose.embedded import open_bus
    from manifold.shared.dlq import DeadLetter
    from manifold.shared.log_bus import read_all

    bus = open_bus(s)
    try:
        letters = [DeadLetter.model_validate_json(m.value()) for m in read_all(bus, topics.DLQ)]
    finally:
        bus.close()
    assert any(d.stage == "acl" and d.error_kind == "unauthorized" and d.key_b64 is not None
               and base64.b64decode(d.key_b64) == forged.key for d in letters)
    assert PostgresAclStore.from_settings(s).acls(tenant, [doc])[doc].public is False


def test_a_revoke_through_the_bus_holds_at_once_and_creates_no_version(embedded_world: AclWorld,
                                                                       answerers: dict[str, Any]) -> None:
    """A revoke of an invoice alice may read: applied by the embedded ACL applier, it hides the
    document from her next question and from every table, and the content version is unchanged."""
    s, tenant = embedded_world.settings, embedded_world.tenant
    doc = "invoices/inv-2026-0211.csv"
    question = "Show me invoice INV-2026-0211"
    original = embedded_world.acls[doc]
    assert original is not None and readable(embedded_world.acls, "alice", doc, "tenant")
    assert doc in {e.document_id for e in ask(answerers["tenant"], tenant, "alice", question).evidence}
    before = _active(s, tenant)
    revoked = AclWorld(s, tenant, embedded_world.documents, {**embedded_world.acls, doc: Acl(users=("carol",))},
                       embedded_world.root)
    assert not _mine(_publish_acls(s, tenant, {doc: Acl(users=("carol",))}), tenant)
    try:
        reply = ask(answerers["tenant"], tenant, "alice", question)
        assert doc not in {e.document_id for e in reply.evidence}, reply.answer
        assert not leaks(reply, revoked, "alice", "tenant")
        assert not any(doc in docs for docs in store_documents(revoked, "alice", "tenant").values())
        assert doc in {e.document_id for e in ask(answerers["tenant"], tenant, "carol", question).evidence}
        assert _active(s, tenant) == before  # no content version created
    finally:
        assert not _mine(_publish_acls(s, tenant, {doc: original}), tenant)  # a later seq restores it


NON_INTERFERENCE = (
    "Find invoice INV-2026-0148",
    "What was our total spend with Supplier Beta in Q1 2026?",
    "Which suppliers supply PRD-482?",
    "Can we send back damaged goods, and how long do we have?",
    'Which documents contain the term "sensing element"?',
)
HIDDEN_EXTRA = {  # closer to the questions than anything the reader may read
    "hidden/inv-2026-0148-copy.csv": (
        "invoice_number,issue_date,supplier,status,currency,line_no,product,description,quantity,unit_price\n"
        "INV-2026-0148,2026-02-10,Supplier Beta,posted,EUR,1,PRD-482,differential pressure sensor,99,999.00\n"),
    "hidden/returns-secret.md": (
        "# Returns of damaged goods\n\nDamaged goods can be sent back within 90 days; the sensing element "
        "is replaced free of charge. Supplier Beta supplies PRD-482.\n"),
}


def test_documents_a_reader_cannot_read_change_nothing_it_sees(embedded_world: AclWorld,
                                                               answerers: dict[str, Any]) -> None:
    """Ask as alice; publish documents only mallory may read (their ACL first), closer to the
    questions; alice's evidence, answers, numbers and gaps are unchanged, mallory's do change."""
    s, tenant = embedded_world.settings, embedded_world.tenant
    answerer = answerers["tenant"]
    before = {q: normalised(ask(answerer, tenant, "alice", q)) for q in NON_INTERFERENCE}
    mallory_before = {q: normalised(ask(answerer, tenant, "mallory", q)) for q in NON_INTERFERENCE}
    extra = {doc: Acl(users=("mallory",)) for doc in HIDDEN_EXTRA}
    assert not _mine(_publish_acls(s, tenant, dict(extra)), tenant)
    folder = embedded_world.root / "extra"
    for rel, text in HIDDEN_EXTRA.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    assert not _mine(_publish_folder(s, tenant, folder), tenant)
    assert set(HIDDEN_EXTRA) <= set(_active(s, tenant))
    after = {q: normalised(ask(answerer, tenant, "alice", q)) for q in NON_INTERFERENCE}
    mallory_after = {q: normalised(ask(answerer, tenant, "mallory", q)) for q in NON_INTERFERENCE}
    for q in NON_INTERFERENCE:
        assert after[q] == before[q], q
    assert mallory_after != mallory_before  # the extra documents are relevant: the test can see a change
    world = replace(embedded_world, documents=[*embedded_world.documents, *HIDDEN_EXTRA],
                    acls={**embedded_world.acls, **extra})
    for q in NON_INTERFERENCE:
        assert not leaks(ask(answerer, tenant, "alice", q), world, "alice", "tenant"), q
