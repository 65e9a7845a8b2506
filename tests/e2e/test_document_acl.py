"""Per-document access control on the real distributed stack (issue 29).

A fresh tenant gets the sample world's northstar documents through Kafka and every worker role
(the ACL applier's `acl` and `groups` included). ACLs and memberships are published as signed
events; then principals ask questions of every class through the real `QueryService`, and every
evidence item, and the whole serialised reply, is checked against a reference model of who may
read what.

- leaks: no evidence item of a document the principal may not read, and no hidden document id
  anywhere in the reply (answer, result, plan, trace, gaps);
- the readable still answers: a principal who may read an exact-lookup target still gets it;
- fail closed: default `none` hides documents without an ACL; an unknown principal reads only
  public (and, under default `tenant`, unrestricted) documents; an unsigned ACL event is
  dead-lettered and changes nothing; the groups a token might claim are never consulted;
- non-interference: documents the principal cannot read, published later (ACL first), change
  neither its evidence nor its numbers;
- the checker itself catches a store without its ACL predicate (Elasticsearch, Neo4j,
  PostgreSQL), so a green run means the predicates are there.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from acl_support import AS_OF, USERS, Acl, AclWorld, assign, leaks, readable, store_leaks
from acl_support import applied as _applied
from acl_support import ask as _ask
from acl_support import publish_access as _publish_access
from pipeline_support import migrate, read_topic, running_workers, test_settings, wait_for

from manifold.ingest import lifecycle, sample_world
from manifold.shared.config import ManifoldSettings

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


@pytest.fixture(scope="module")
def acl_world(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client, neo4j_driver,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclWorld]:
    from manifold.deploy.compose.distributed import upstream_client

    s = test_settings(settings)
    migrate(s)
    tenant = f"a{uuid.uuid4().hex[:8]}-acl"
    root = tmp_path_factory.mktemp("aclworld")
    written = sample_world.write_world(root)
    documents = sorted(str(p.relative_to(root / "northstar")) for p in written["northstar"])
    acls = assign(documents)
    ports = lifecycle.build_ports(s)
    with running_workers(s) as errors:
        _publish_access(s, tenant, acls)  # before the content: no moment where a document is open
        wait_for("the ACLs to be applied", lambda: _applied(s, tenant, acls), errors, timeout=120)
        report = upstream_client(s).publish_paths(tenant, [root / "northstar"])
        assert not report.rejected, report.rejected

        def all_active() -> bool:
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            return set(documents) <= active

        wait_for("the documents to be published", all_active, errors, timeout=600)
    yield AclWorld(s, tenant, documents, acls, root)  # the workers are stopped: tests start their own


def _answerer(world: AclWorld, default: str) -> Any:
    from manifold.query.composition import build_answerer

    q = world.settings.query.model_copy(update={"acl_default": default})
    return build_answerer(world.settings.model_copy(update={"query": q}))


@pytest.mark.parametrize("default", ["tenant", "none"])
def test_no_reply_shows_a_document_its_reader_may_not_read(acl_world: AclWorld, default: str) -> None:
    answerer = _answerer(acl_world, default)
    try:
        problems, evidence_seen = [], 0
        for user in USERS:
            for question in QUESTIONS:
                reply = _ask(answerer, acl_world.tenant, user, question)
                assert reply.status != "error", (user, question, reply.error)
                evidence_seen += len(reply.evidence)
                problems += [f"{user} / {question}: {p}" for p in leaks(reply, acl_world, user, default)]
        assert not problems, "\n".join(problems)
        assert evidence_seen > 0  # the questions did find what the readers may read
    finally:
        answerer.close()


def test_a_reader_still_finds_what_it_may_read_and_not_what_it_may_not(acl_world: AclWorld) -> None:
    answerer = _answerer(acl_world, "tenant")
    try:
        doc = "invoices/inv-2026-0211.csv"
        for user in USERS:
            reply = _ask(answerer, acl_world.tenant, user, "Show me invoice INV-2026-0211")
            cited = {e.document_id for e in reply.evidence}
            if readable(acl_world.acls, user, doc, "tenant"):
                assert doc in cited, (user, reply.status, reply.answer)
            else:
                assert doc not in cited and reply.status in ("no_answer", "partial", "answered"), reply.status
    finally:
        answerer.close()


def test_default_none_hides_every_document_without_an_acl(acl_world: AclWorld) -> None:
    answerer = _answerer(acl_world, "none")
    try:
        unrestricted = [d for d, a in acl_world.acls.items() if a is None]
        assert unrestricted
        for question in QUESTIONS:
            reply = _ask(answerer, acl_world.tenant, "nobody-known", question)
            for ev in reply.evidence:
                if ev.document_id is None:  # a metric's summary: its lines are items of their own
                    continue
                acl = acl_world.acls.get(ev.document_id)
                assert acl is not None and acl.public, (question, ev.document_id)
    finally:
        answerer.close()


def test_groups_come_from_the_membership_state_not_the_token(acl_world: AclWorld) -> None:
    """A `groups` claim forged into a token is never consulted (or the token is refused), and a
    principal named like a group is not a member of it."""
    import jwt

    from manifold.query.auth import TokenError, TokenVerifier, mint_token
    from manifold.query.types import QueryRequest
    from manifold.shared.config import DEV_TOKEN_KEY

    s = acl_world.settings
    token = mint_token(DEV_TOKEN_KEY, tenant_id=acl_world.tenant, subject="mallory", scopes=["query:read"],
                       issuer=s.query.token_issuer, audience=s.query.token_audience, ttl_s=300)
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = jwt.encode({**claims, "groups": ["finance", "ops"]}, DEV_TOKEN_KEY, algorithm="HS256")
    answerer = _answerer(acl_world, "tenant")
    try:
        try:
            principal = TokenVerifier.from_settings(s).verify(forged)
        except TokenError:
            principal = None  # refused outright: also closed
        if principal is not None:
            request = QueryRequest(request_id="acl-forged", reply_topic="manifold.query.replies",
                                   deadline=datetime.now(UTC) + timedelta(seconds=30),
                                   question="Total spend with Supplier Beta in February 2026", as_of=AS_OF)
            assert not leaks(answerer.answer(request, principal), acl_world, "mallory", "tenant")
        for group in ("finance", "ops"):
            reply = _ask(answerer, acl_world.tenant, group, "Total spend with Supplier Beta in February 2026")
            assert not leaks(reply, acl_world, group, "tenant")
    finally:
        answerer.close()


def test_an_unsigned_acl_event_is_dead_lettered_and_changes_nothing(acl_world: AclWorld, kafka_bootstrap: str) -> None:
    from confluent_kafka import Producer

    from manifold.shared import topics
    from manifold.shared.acl_events import DocumentAclSet
    from manifold.shared.dlq import DeadLetter
    from manifold.shared.stores.acl_pg import PostgresAclStore

    doc = next(d for d, a in acl_world.acls.items() if a is not None and a.users == ("alice",))
    forged = DocumentAclSet(tenant_id=acl_world.tenant, document_id=doc, public=True, seq=2**61)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topics.ACL, key=forged.key, value=forged.model_dump_json().encode())
    producer.flush(30)
    store = PostgresAclStore.from_settings(acl_world.settings)

    def dead_lettered() -> bool:
        letters = read_topic(kafka_bootstrap, topics.DLQ, lambda raw: DeadLetter.model_validate_json(raw))
        return any(d.stage == "acl" and d.error_kind == "unauthorized" and d.key_b64 is not None
                   and base64.b64decode(d.key_b64) == forged.key for d in letters)

    with running_workers(acl_world.settings, ("acl", "groups")) as errors:
        wait_for("the forged ACL event to be dead-lettered", dead_lettered, errors, timeout=120)
    assert store.acls(acl_world.tenant, [doc])[doc].public is False


def test_a_stopped_applier_grants_nothing_until_it_applies(acl_world: AclWorld) -> None:
    """A grant published while the applier is stopped is not in force; it is once applied."""
    from manifold.deploy.compose.distributed import access_client

    doc = "invoices/inv-2026-0211.csv"
    assert not readable(acl_world.acls, "dave", doc, "tenant")
    question = "Show me invoice INV-2026-0211"
    answerer = _answerer(acl_world, "tenant")
    try:
        acl = acl_world.acls[doc]
        assert acl is not None
        access_client(acl_world.settings).set_acl(acl_world.tenant, doc, users=(*acl.users, "dave"),
                                                  groups=acl.groups, public=acl.public)
        reply = _ask(answerer, acl_world.tenant, "dave", question)
        assert doc not in {e.document_id for e in reply.evidence}
        with running_workers(acl_world.settings, ("acl", "groups")) as errors:
            wait_for("the grant to apply", lambda: doc in {
                e.document_id for e in _ask(answerer, acl_world.tenant, "dave", question).evidence},
                errors, timeout=120)
    finally:
        answerer.close()
        acl_world.acls[doc] = Acl(users=(*acl.users, "dave"), groups=acl.groups, public=acl.public)


def _normalised(reply: Any) -> dict[str, Any]:
    return {"status": reply.status, "answer": reply.answer, "result": _without_clock(reply.result),
            "evidence": [(e.document_id, e.version, e.chunk_id, e.record_id, e.edge_id, e.kind)
                         for e in reply.evidence],
            "gaps": [(g.step, g.kind, g.detail) for g in reply.gaps]}


def _without_clock(value: Any) -> Any:
    """`value` without the `snapshot_at` read times (they differ between any two asks)."""
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k != "snapshot_at"}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


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


def test_documents_a_reader_cannot_read_change_nothing_it_sees(acl_world: AclWorld) -> None:
    """Ask as alice; publish documents only mallory may read (their ACL first), closer to the
    questions; alice's evidence, answers and numbers are unchanged, while mallory's do change."""
    from manifold.deploy.compose.distributed import access_client, upstream_client

    s, tenant = acl_world.settings, acl_world.tenant
    answerer = _answerer(acl_world, "tenant")
    try:
        before = {q: _normalised(_ask(answerer, tenant, "alice", q)) for q in NON_INTERFERENCE}
        mallory_before = {q: _normalised(_ask(answerer, tenant, "mallory", q)) for q in NON_INTERFERENCE}
        client = access_client(s)
        for doc in HIDDEN_EXTRA:
            client.set_acl(tenant, doc, users=["mallory"])
        extra = {doc: Acl(users=("mallory",)) for doc in HIDDEN_EXTRA}
        folder = acl_world.root / "extra"
        for rel, text in HIDDEN_EXTRA.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        ports = lifecycle.build_ports(s)
        with running_workers(s) as errors:
            wait_for("the extra ACLs", lambda: set(
                __import__("manifold.shared.stores.acl_pg", fromlist=["x"]).PostgresAclStore.from_settings(s)
                .acls(tenant, sorted(extra))) == set(extra), errors, timeout=120)
            report = upstream_client(s).publish_paths(tenant, [folder])
            assert not report.rejected, report.rejected
            wait_for("the extra documents", lambda: set(HIDDEN_EXTRA) <= {
                e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}, errors, timeout=300)
        after = {q: _normalised(_ask(answerer, tenant, "alice", q)) for q in NON_INTERFERENCE}
        mallory_after = {q: _normalised(_ask(answerer, tenant, "mallory", q)) for q in NON_INTERFERENCE}
    finally:
        answerer.close()
    for q in NON_INTERFERENCE:
        assert after[q] == before[q], q
    assert mallory_after != mallory_before  # the extra documents are relevant: the test can see a change


def test_each_store_returns_only_readable_documents(acl_world: AclWorld, es_client: Any, neo4j_driver: Any) -> None:
    for user in USERS:
        found = store_leaks(acl_world, user, es_client, neo4j_driver)
        assert found == {"elasticsearch": set(), "neo4j": set(), "postgres": set()}, (user, found)


@pytest.mark.parametrize("store", ["elasticsearch", "neo4j", "postgres"])
def test_the_checker_catches_a_store_without_its_acl_predicate(acl_world: AclWorld, es_client: Any,
                                                                neo4j_driver: Any, store: str) -> None:
    """Remove the ACL predicate from one store and the store-level check finds leaks: proof
    that the checks above would see a missing predicate (the reply-level final check alone
    would still hide it)."""
    found = set()
    for user in ("bob", "carol", "nobody-known"):
        found |= store_leaks(acl_world, user, es_client, neo4j_driver, without=store)[store]
    assert found, f"removing the {store} predicate went unnoticed"


def test_zz_purge_tenant_erases_the_access_state_and_tombstones_its_topic_keys(
        acl_world: AclWorld, kafka_bootstrap: str) -> None:
    """Last in the module (it erases the tenant): after `purge-tenant` no ACL or membership row
    is left, the latest message of each of the tenant's keys on the compacted access topics is a
    tombstone (compaction erases the names), and the applier skips tombstones."""
    from confluent_kafka import Consumer

    from manifold.deploy.compose.distributed import purge_ports
    from manifold.ingest import erasure
    from manifold.shared import topics
    from manifold.shared.stores.acl_pg import PostgresAclStore
    from manifold.shared.stores.tenant_purge_pg import purge_tenant

    s, tenant = acl_world.settings, acl_world.tenant
    store = PostgresAclStore.from_settings(s)
    docs, users = store.keys(tenant)
    assert docs and users
    removed = erasure.purge_tenant(purge_ports(s, lambda t: purge_tenant(s.postgres.conninfo(), t)), tenant)
    assert removed["access_topics"]["tombstones"] == len(docs) + len(users)
    assert store.keys(tenant) == ([], [])
    latest: dict[tuple[str, bytes], bytes | None] = {}
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"e2e-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topics.ACL, topics.PRINCIPALS])
    idle = 0
    try:
        while idle < 3:
            msgs = consumer.consume(500, timeout=1.0)
            idle = 0 if msgs else idle + 1
            for msg in msgs:
                if msg.error() is None and (msg.key() or b"").startswith(f"{tenant}/".encode()):
                    latest[(msg.topic(), msg.key())] = msg.value()
    finally:
        consumer.close()
    assert latest and all(value is None for value in latest.values())
    with running_workers(s, ("acl", "groups")) as errors:  # tombstones are skipped, not dead-lettered
        time.sleep(10)
        assert not errors, errors
    assert store.keys(tenant) == ([], [])
    from manifold.shared.dlq import DeadLetter

    letters = read_topic(kafka_bootstrap, topics.DLQ, lambda raw: DeadLetter.model_validate_json(raw))
    assert not [d for d in letters if d.stage in ("acl", "groups") and "tombstone" in d.error], letters[-3:]
