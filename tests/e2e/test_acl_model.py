"""Per-document access control, model-based: a Hypothesis state machine on the real distributed stack.

One module-scoped world: a fresh tenant with the sample world's northstar documents published
through Kafka and every worker role, no ACL at first. Each example starts from an empty ACL and
membership state for that tenant (reset by the superuser) and its own users and groups; then:

- rules issue ACL events (users, groups, public, nobody) and membership events, each with the
  next sequence number of its subject, exactly as a producer would: groups nest (a member of a
  child group belongs to its parents) and the producer FLATTENS memberships before publishing,
  so nesting a group re-issues the membership of every user it affects;
- issued events are buffered, then delivered SHUFFLED, DUPLICATED and DELAYED (an older event
  re-delivered after newer ones) as signed bytes through the applier's real decode+verify and
  apply (`access_specs(...)[role].decode` then `.step`); some go end to end through Kafka
  (published with the access client, applied by `workers.run(settings, ["acl", "groups"])`);
  forged ones (unsigned, tampered, another tenant's producer) must be refused and change nothing;
- the reference model keeps, per document and per user, the delivered event with the highest
  sequence number; the applied state in PostgreSQL must equal it after every step;
- `ask` asks a question of every route (exact lookup, BM25, vector, hybrid, metric/SQL, graph,
  clarify and its continuation) as a random principal under default `tenant` or `none` through
  the real `QueryService`, and checks the reply against the model: no evidence item or id of a
  hidden document; no identifier or name that only hidden documents hold; every metric total is
  a sum of readable record lines; the final check dropped nothing (stores that filter by the
  reader leave it nothing to drop, and a dropped count would tell the reader hidden documents
  exist); an exact lookup of a readable invoice still finds it;
- the same checks on replies over HTTP (`/v1/ask`), MCP (`ask` over streamable HTTP) and Kafka
  request/reply, with a token minted for the principal;
- invariant: every store (Elasticsearch, Neo4j, PostgreSQL), read under its own ACL predicate
  for a principal's scope, returns only documents the model lets it read.

Bounded for CI: 15 examples of up to 12 steps (about a minute of machine time; the world, two
answerers and the HTTP app take the rest); no shrinking (each step hits the real stack; the
falsifying example is printed as generated). Under CI=true a missing service fails.

Checked against mutants of the query side: without the Neo4j predicate (`cypher_readable` true)
both the store-level invariant and, with that disabled, the reply-level checks fail (a hidden
document's supplier reaches a clarification); without the Elasticsearch clause (`es_clause`
None) the store-level invariant fails at once while the replies stay clean (the executors read
chunks back through PostgreSQL's policies before the final check): why the invariant exists.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
import pytest
from acl_support import AS_OF, Acl, answerer_with_default, ask, grants, publish_world, reply_leaks, store_documents
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pipeline_support import SCOPED_PRODUCER, migrate, running_workers, test_settings, wait_for

from manifold.shared.config import ManifoldSettings

pytestmark = pytest.mark.timeout(900)

N_USERS = 5
N_GROUPS = 3
AS_OF_TS = AS_OF.isoformat()
QUESTIONS = {  # route -> questions
    "exact": ("Find invoice INV-2026-0148", "Show me invoice INV-2026-0211"),
    "bm25": ('Which documents contain the term "sensing element"?',
             'Which documents mention "certified calibration bench"?'),
    "vector": ("Can we send back damaged goods, and how long do we have?",),
    "hybrid": ("What does the contract with Supplier Beta say about delivery?",),
    "metric": ("What was our total spend with Supplier Beta in Q1 2026?",
               "Total spend with Supplier Beta in February 2026",
               "Which delayed orders are affected by the supplier delay notice, and what is the revenue at risk?"),
    "graph": ("Which suppliers supply PRD-482?",),
}
ALL_QUESTIONS = tuple(q for qs in QUESTIONS.values() for q in qs)
CLARIFY = "What was the unit price of the sensor on 2026-03-01?"
EXACT_TARGETS = {"Find invoice INV-2026-0148": ("invoices/inv-2026-0148.csv", "invoices/replica/inv-2026-0148.csv"),
                 "Show me invoice INV-2026-0211": ("invoices/inv-2026-0211.csv",)}
FINAL_CHECK = re.compile(r"final check: \d+ evidence kept, (\d+) dropped")
IDENTIFIER = re.compile(r"\b[A-Z]{2,4}-\d{3,4}(?:-\d{4})?\b")
NAMES = ("Supplier Beta", "Supplier Gamma", "Acme Sensors Ltd", "differential pressure sensor", "vibration monitor",
         "control module", "humidity sensor", "temperature sensor")
TRANSPORTS = ("http", "mcp", "kafka")
ACL_KINDS = st.sampled_from(["users", "groups", "both", "public", "nobody"])


# -- the world ----------------------------------------------------------------------------------
@dataclass
class ModelWorld:
    settings: ManifoldSettings
    tenant: str
    documents: list[str]
    texts: dict[str, str]
    """document id -> its raw text (the reference for names, identifiers and amounts)."""
    lines: dict[str, list[tuple[str, Decimal]]]
    """document id -> its record lines as (currency, signed amount)."""
    answerers: dict[str, Any]
    """acl default -> the real `QueryService`."""
    specs: dict[str, Any]
    """role -> the ACL applier's real `StageSpec` (decode+verify, apply)."""
    access: Any
    """the distributed `AccessClient` (Kafka)."""
    signer: Any
    query_settings: ManifoldSettings
    url: str
    """the HTTP app (`/v1/ask`, `/mcp`) in front of a query worker over Kafka."""
    kafka_errors: list[BaseException]
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n


def _record_lines(doc: str, text: str) -> list[tuple[str, Decimal]]:
    if doc.endswith(".csv"):
        rows = list(csv.DictReader(io.StringIO(text)))
        sign = -1 if "/cn-" in f"/{doc}" else 1
        return [(r["Currency"], sign * Decimal(r["Amount"])) for r in rows]
    if doc.endswith(".json"):
        return [(r["currency"], Decimal(r["amount"])) for r in json.loads(text)]
    return []


@pytest.fixture(scope="module")
def model_world(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client: Any,
                neo4j_driver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelWorld]:
    from manifold.deploy.compose.distributed import access_client
    from manifold.deploy.serve.backend import GatewayBackend
    from manifold.deploy.serve.run import build, in_thread
    from manifold.ingest.acl_applier import access_specs
    from manifold.query.worker import serve
    from manifold.shared.config import ServerSettings
    from manifold.shared.envelope_auth import ProducerRegistry, signer_from_settings
    from manifold.shared.stores.acl_pg import PostgresAclStore

    s = test_settings(settings)
    migrate(s)
    tenant = f"m{uuid.uuid4().hex[:8]}-aclmodel"
    root = tmp_path_factory.mktemp("aclmodel")
    documents = publish_world(s, tenant, root)
    texts = {doc: (root / "northstar" / doc).read_text() for doc in documents}
    lines = {doc: _record_lines(doc, text) for doc, text in texts.items()}
    answerers = {default: answerer_with_default(s, default) for default in ("tenant", "none")}
    specs = access_specs(PostgresAclStore.from_settings(s), ProducerRegistry.from_settings(s))
    run = uuid.uuid4().hex[:10]
    query = s.query.model_copy(update={"request_topic": f"e2e.aclmodel.requests.{run}",
                                       "reply_topic": f"e2e.aclmodel.replies.{run}", "metrics_port": 0})
    qs = s.model_copy(update={"query": query, "server": ServerSettings(rate_per_minute=6000, rate_burst=1000)})
    stop = threading.Event()
    worker = threading.Thread(target=serve, args=(qs, stop, answerers["tenant"]), kwargs={"threads": 2}, daemon=True)
    worker.start()
    app, backend = build(qs, GatewayBackend(qs))
    try:
        with running_workers(s, ("acl", "groups")) as kafka_errors, in_thread(app) as url:
            world = ModelWorld(s, tenant, documents, texts, lines, answerers, specs, access_client(s),
                               signer_from_settings(s), qs, url, kafka_errors)
            yield world
            print(f"\nacl model stats: {json.dumps(world.stats, sort_keys=True)}")
    finally:
        backend.close()
        stop.set()
        worker.join(60)
        for answerer in answerers.values():
            answerer.close()


# -- events -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Issued:
    """One signed event as a producer issued it, with what the model applies when it arrives."""

    role: str  # "acl" | "groups"
    subject: str  # document id or user id
    seq: int
    raw: bytes
    acl: Acl | None = None
    groups: frozenset[str] = frozenset()


def _reset(s: ManifoldSettings, tenant: str) -> None:
    import psycopg

    with psycopg.connect(s.postgres.conninfo()) as conn:  # superuser: a clean state for each example
        conn.execute("DELETE FROM manifold.document_acls WHERE tenant_id = %s", (tenant,))
        conn.execute("DELETE FROM manifold.principal_groups WHERE tenant_id = %s", (tenant,))


WORLD: ModelWorld | None = None  # set by the test before the machine runs


class AclMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert WORLD is not None
        self.w = WORLD
        prefix = f"x{next(self.w.counter)}-{uuid.uuid4().hex[:4]}"
        self.users = [f"{prefix}-u{i}" for i in range(N_USERS)]
        self.group_names = [f"{prefix}-g{i}" for i in range(N_GROUPS)]
        self.parents: dict[str, set[str]] = {g: set() for g in self.group_names}
        self.direct: dict[str, set[str]] = {u: set() for u in self.users}
        self.issued_groups: dict[str, frozenset[str]] = {}
        self.seqs: dict[tuple[str, str], int] = {}
        self.pending: list[Issued] = []
        self.delivered: list[Issued] = []
        self.acls: dict[str, tuple[int, Acl]] = {}
        self.memberships: dict[str, tuple[int, frozenset[str]]] = {}
        self.transport_asked = False
        self.kafka_rounds = 0
        self.steps = 0
        _reset(self.w.settings, self.w.tenant)

    # -- the reference model -------------------------------------------------------------------
    def groups_of(self, user: str) -> frozenset[str]:
        return self.memberships.get(user, (0, frozenset()))[1]

    def can_read(self, user: str, doc: str, default: str) -> bool:
        acl = self.acls.get(doc)
        return grants(acl[1] if acl else None, user, self.groups_of(user), default)

    def apply_model(self, ev: Issued) -> None:
        if ev.role == "acl":
            current = self.acls.get(ev.subject)
            if current is None or current[0] < ev.seq:
                assert ev.acl is not None
                self.acls[ev.subject] = (ev.seq, ev.acl)
        else:
            held = self.memberships.get(ev.subject)
            if held is None or held[0] < ev.seq:
                self.memberships[ev.subject] = (ev.seq, ev.groups)

    def flattened(self, user: str) -> frozenset[str]:
        out: set[str] = set()
        todo = list(self.direct[user])
        while todo:
            g = todo.pop()
            if g not in out:
                out.add(g)
                todo.extend(self.parents[g])
        return frozenset(out)

    # -- issuing (the producer) ----------------------------------------------------------------
    def _next_seq(self, role: str, subject: str) -> int:
        seq = self.seqs.get((role, subject), 0) + 1 + len(self.seqs) % 3  # gaps are allowed
        self.seqs[(role, subject)] = seq
        return seq

    def _issue(self, event: Any, role: str, subject: str, acl: Acl | None = None,
               groups: frozenset[str] = frozenset()) -> None:
        from manifold.shared.acl_events import sign_access

        signed = sign_access(event, self.w.signer.producer, self.w.signer.key)
        self.pending.append(Issued(role, subject, event.seq, signed.model_dump_json().encode(), acl, groups))

    def issue_acl(self, doc: str, acl: Acl) -> None:
        from manifold.shared.acl_events import DocumentAclSet

        seq = self._next_seq("acl", doc)
        event = DocumentAclSet(tenant_id=self.w.tenant, document_id=doc, users=list(acl.users),
                               groups=list(acl.groups), public=acl.public, seq=seq)
        self._issue(event, "acl", doc, acl=acl)

    def issue_groups(self, user: str) -> None:
        from manifold.shared.acl_events import GroupsSet

        groups = self.flattened(user)
        seq = self._next_seq("groups", user)
        self.issued_groups[user] = groups
        self._issue(GroupsSet(tenant_id=self.w.tenant, user_id=user, groups=sorted(groups), seq=seq),
                    "groups", user, groups=groups)

    # -- delivery (the bus) --------------------------------------------------------------------
    def deliver_one(self, ev: Issued) -> None:
        spec = self.w.specs[ev.role]
        spec.step(spec.decode(ev.raw))
        self.apply_model(ev)
        self.delivered.append(ev)
        self.w.count(f"delivered {ev.role}")

    # -- rules ---------------------------------------------------------------------------------
    @initialize(data=st.data())
    def some_access(self, data: st.DataObject) -> None:
        """A start with some ACLs and memberships already in place (delivered in order)."""
        for _ in range(data.draw(st.integers(0, 3), label="initial acls")):
            self.set_acl(data.draw(st.integers(0, 63)), data.draw(ACL_KINDS),
                         data.draw(st.frozensets(st.integers(0, N_USERS - 1))),
                         data.draw(st.frozensets(st.integers(0, N_GROUPS - 1))))
        for user in data.draw(st.sets(st.sampled_from(self.users), max_size=3), label="initial members"):
            self.direct[user] = set(data.draw(st.sets(st.sampled_from(self.group_names), max_size=2)))
            self.issue_groups(user)
        for ev in list(self.pending):
            self.deliver_one(ev)
        self.pending.clear()

    @rule(doc=st.integers(0, 63), kind=ACL_KINDS, users=st.frozensets(st.integers(0, N_USERS - 1)),
          groups=st.frozensets(st.integers(0, N_GROUPS - 1)))
    def set_acl(self, doc: int, kind: str, users: frozenset[int], groups: frozenset[int]) -> None:
        """Issue a full replacement ACL for a document (not delivered yet)."""
        names = tuple(sorted(self.users[i] for i in users))
        gnames = tuple(sorted(self.group_names[i] for i in groups))
        acl = {"users": Acl(users=names), "groups": Acl(groups=gnames), "both": Acl(users=names, groups=gnames),
               "public": Acl(public=True), "nobody": Acl()}[kind]
        self.issue_acl(self.w.documents[doc % len(self.w.documents)], acl)

    @rule(user=st.integers(0, N_USERS - 1), groups=st.sets(st.integers(0, N_GROUPS - 1), max_size=N_GROUPS))
    def set_membership(self, user: int, groups: set[int]) -> None:
        """A user's direct groups change; the producer publishes the flattened list."""
        name = self.users[user]
        self.direct[name] = {self.group_names[g] for g in groups}
        self.issue_groups(name)

    @rule(child=st.integers(0, N_GROUPS - 1), parent=st.integers(0, N_GROUPS - 1))
    def nest(self, child: int, parent: int) -> None:
        """Group `child` goes inside `parent` (no cycles): every affected user is re-issued."""
        c, p = self.group_names[child], self.group_names[parent]
        ancestors_of_p: set[str] = set()
        todo = [p]
        while todo:
            g = todo.pop()
            if g not in ancestors_of_p:
                ancestors_of_p.add(g)
                todo.extend(self.parents[g])
        if c in ancestors_of_p:
            return  # a cycle (or itself)
        self.parents[c].add(p)
        for user in self.users:
            if user in self.issued_groups and self.flattened(user) != self.issued_groups[user]:
                self.issue_groups(user)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        """Some pending events, shuffled, some twice; the rest stay delayed."""
        chosen = data.draw(st.lists(st.sampled_from(range(len(self.pending))), min_size=1, unique=True),
                           label="which pending")
        batch = [self.pending[i] for i in chosen]
        dups = data.draw(st.lists(st.sampled_from(batch), max_size=2), label="duplicates")
        order = data.draw(st.permutations(batch + dups), label="order")
        for ev in order:
            self.deliver_one(ev)
        self.pending = [ev for i, ev in enumerate(self.pending) if i not in set(chosen)]

    @precondition(lambda self: bool(self.delivered))
    @rule(data=st.data())
    def redeliver_old(self, data: st.DataObject) -> None:
        """An event delivered before arrives again, after newer ones (a replay, a late duplicate)."""
        ev = data.draw(st.sampled_from(self.delivered[: max(1, len(self.delivered) - 1)]), label="old event")
        self.deliver_one(ev)
        self.w.count("redelivered")

    @rule(doc=st.integers(0, 1000), how=st.sampled_from(["unsigned", "tampered", "other-tenant", "unknown-producer"]))
    def deliver_forged(self, doc: int, how: str) -> None:
        """A forged ACL granting everyone, at a sequence number above anything: refused, no change."""
        from manifold.shared.acl_events import DocumentAclSet, sign_access
        from manifold.shared.envelope_auth import Unauthorized

        document = self.w.documents[doc % len(self.w.documents)]
        forged: Any = DocumentAclSet(tenant_id=self.w.tenant, document_id=document, public=True, seq=2**61)
        if how == "tampered":
            forged = sign_access(forged.model_copy(update={"public": False}), self.w.signer.producer,
                                 self.w.signer.key).model_copy(update={"public": True})
        elif how == "other-tenant":
            forged = sign_access(forged, *SCOPED_PRODUCER)
        elif how == "unknown-producer":
            forged = sign_access(forged, "mallory", "mallory-s-own-key-0123456789abcdef0123")
        spec = self.w.specs["acl"]
        with pytest.raises(Unauthorized):
            spec.step(spec.decode(forged.model_dump_json().encode()))
        self.w.count("forged refused")

    @precondition(lambda self: bool(self.pending) and self.kafka_rounds < 1)
    @rule(data=st.data())
    def deliver_over_kafka(self, data: st.DataObject) -> None:
        """Up to three pending events end to end: the access client publishes them on Kafka, the
        `acl` and `groups` worker roles apply them."""
        from manifold.shared.stores.acl_pg import PostgresAclStore

        self.kafka_rounds += 1
        chosen = data.draw(st.lists(st.sampled_from(range(len(self.pending))), min_size=1, max_size=3, unique=True),
                           label="over kafka")
        batch = [self.pending[i] for i in chosen]
        for ev in batch:
            if ev.role == "acl":
                assert ev.acl is not None
                self.w.access.set_acl(self.w.tenant, ev.subject, users=ev.acl.users, groups=ev.acl.groups,
                                      public=ev.acl.public, seq=ev.seq)
            else:
                self.w.access.set_groups(self.w.tenant, ev.subject, sorted(ev.groups), seq=ev.seq)
        marks = _end_offsets(self.w.settings)
        store = PostgresAclStore.from_settings(self.w.settings)

        def arrived() -> bool:
            for ev in batch:
                if ev.role == "acl":
                    row = store.acls(self.w.tenant, [ev.subject]).get(ev.subject)
                    if row is None or row.seq < ev.seq:
                        return False
                elif store.groups_of(self.w.tenant, ev.subject) is None or self._stored_group_seq(ev.subject) < ev.seq:
                    return False
            return True

        started = time.monotonic()
        wait_for("the ACL events over Kafka to be applied", arrived, self.w.kafka_errors, timeout=120)
        # ... and committed: a batch re-delivered after a rebalance would re-apply an event of this
        # example after the next example's reset (its rows are gone, so any seq would apply)
        wait_for("the ACL events over Kafka to be committed", lambda: _committed(self.w.settings, marks),
                 self.w.kafka_errors, timeout=120)
        self.w.count("kafka round trips")
        self.w.count("kafka seconds", round(time.monotonic() - started))
        for ev in batch:
            self.apply_model(ev)
            self.delivered.append(ev)
        self.pending = [ev for i, ev in enumerate(self.pending) if i not in set(chosen)]

    def _stored_group_seq(self, user: str) -> int:
        import psycopg

        with psycopg.connect(self.w.settings.postgres.conninfo()) as conn:
            row = conn.execute("SELECT seq FROM manifold.principal_groups WHERE tenant_id = %s AND user_id = %s",
                               (self.w.tenant, user)).fetchone()
        return int(row[0]) if row else 0

    @rule(question=st.sampled_from(ALL_QUESTIONS), user=st.integers(0, N_USERS),
          default=st.sampled_from(["tenant", "none"]))
    def ask_question(self, question: str, user: int, default: str) -> None:
        """A question of some route as a principal (index N_USERS: one never named anywhere)."""
        name = self.users[user] if user < N_USERS else f"stranger-{uuid.uuid4().hex[:6]}"
        reply = ask(self.w.answerers[default], self.w.tenant, name, question)
        assert reply.status != "error", (question, reply.error)
        self.check(reply.model_dump(mode="json"), name, default, question)
        self.w.count(f"asked {reply.status}")
        self.w.count("questions")
        self.w.count("evidence seen", len(reply.evidence))
        if question in EXACT_TARGETS and any(self.can_read(name, d, default) for d in EXACT_TARGETS[question]):
            cited = {e.document_id for e in reply.evidence}
            assert cited & set(EXACT_TARGETS[question]), (name, question, reply.status, reply.answer)

    @rule(data=st.data())
    def ask_every_route(self, data: st.DataObject) -> None:
        """One question of each route, each as a random principal under a random default."""
        for route, questions in QUESTIONS.items():
            self.ask_question(data.draw(st.sampled_from(questions), label=route),
                              data.draw(st.integers(0, N_USERS)), data.draw(st.sampled_from(["tenant", "none"])))
            self.w.count(f"route {route}")

    @rule(user=st.integers(0, N_USERS - 1), default=st.sampled_from(["tenant", "none"]), pick=st.integers(0, 10))
    def ask_clarify_and_continue(self, user: int, default: str, pick: int) -> None:
        """An ambiguous question (clarify: its candidates must come from readable documents), then
        the continuation with one of the offered candidates."""
        name = self.users[user]
        session = f"s-{uuid.uuid4().hex[:8]}"
        answerer = self.w.answerers[default]
        first = ask(answerer, self.w.tenant, name, CLARIFY, session_id=session)
        assert first.status != "error", first.error
        self.check(first.model_dump(mode="json"), name, default, CLARIFY)
        self.w.count(f"clarify {first.status}")
        if first.status != "clarify" or first.clarification is None or not first.clarification.candidates:
            return
        candidates = first.clarification.candidates
        choice = candidates[pick % len(candidates)].key
        follow = ask(answerer, self.w.tenant, name, None, session_id=session,
                     continuation=first.clarification.continuation, choice=choice)
        assert follow.status != "error", follow.error
        self.check(follow.model_dump(mode="json"), name, default, f"{CLARIFY} {choice}")
        self.w.count(f"continuation {follow.status}")

    @precondition(lambda self: not self.transport_asked)
    @rule(question=st.sampled_from(ALL_QUESTIONS), user=st.integers(0, N_USERS - 1))
    def ask_over_a_transport(self, question: str, user: int) -> None:
        """A question over HTTP, MCP or Kafka request/reply in turn (default `tenant`), with a
        token minted for the principal (at most once per example: each costs a round trip)."""
        self.transport_asked = True
        transport = TRANSPORTS[sum(self.w.stats.get(f"{t} asks", 0) for t in TRANSPORTS) % len(TRANSPORTS)]
        name = self.users[user]
        body = TRANSPORT_ASK[transport](self.w, name, question)
        assert body["status"] != "error", (transport, question, body.get("error"))
        self.check(body, name, "tenant", question)
        self.w.count(f"{transport} asks")

    # -- the checks ----------------------------------------------------------------------------
    def check(self, body: dict[str, Any], user: str, default: str, question: str) -> None:
        def can_read(doc: str) -> bool:
            return self.can_read(user, doc, default)

        problems = reply_leaks(body, self.w.documents, can_read)
        problems += content_leaks(self.w, body, can_read, question)
        problems += number_leaks(self.w, body, can_read)
        problems += [f"the final check dropped {n} evidence items: a store returned something unreadable "
                     "(and the count tells the reader hidden documents exist)" for n in dropped(body) if n]
        assert not problems, (user, default, question, self.describe(user), problems)

    def describe(self, user: str) -> dict[str, Any]:
        return {"groups": sorted(self.groups_of(user)),
                "acls": {d: (seq, a.users, a.groups, a.public) for d, (seq, a) in sorted(self.acls.items())}}

    @invariant()
    def applied_state_is_the_model(self) -> None:
        """PostgreSQL holds exactly the highest-seq delivered ACL of every document and
        membership of every user (duplicates and late older events changed nothing)."""
        from manifold.shared.stores.acl_pg import PostgresAclStore

        store = PostgresAclStore.from_settings(self.w.settings)
        rows = store.acls(self.w.tenant, self.w.documents)
        assert set(rows) == set(self.acls), (sorted(rows), sorted(self.acls))
        for doc, (seq, acl) in self.acls.items():
            row = rows[doc]
            assert (row.seq, row.public, tuple(sorted(row.users)), tuple(sorted(row.groups))) == \
                (seq, acl.public, tuple(sorted(acl.users)), tuple(sorted(acl.groups))), doc
        for user in self.users:
            held = self.memberships.get(user)
            assert store.groups_of(self.w.tenant, user) == (tuple(sorted(held[1])) if held else None), user

    @invariant()
    def each_store_returns_only_readable_documents(self) -> None:
        self.steps += 1
        user = self.users[self.steps % N_USERS]
        default = ("tenant", "none")[self.steps % 2]
        seen = store_documents(self.w.settings, self.w.tenant, user, ES, NEO4J, default=default)
        found = {store: sorted(d for d in docs if not self.can_read(user, d, default)) for store, docs in seen.items()}
        assert not any(found.values()), (user, default, found, self.describe(user))
        self.w.count("store checks")


def _end_offsets(s: ManifoldSettings) -> dict[tuple[str, int], int]:
    """(topic, partition) -> end offset of the ACL and membership topics, now."""
    from confluent_kafka import Consumer, TopicPartition

    from manifold.shared import topics

    consumer = Consumer({"bootstrap.servers": s.kafka.bootstrap_servers, "group.id": f"e2e-{uuid.uuid4()}"})
    try:
        marks = {}
        for topic in (topics.ACL, topics.PRINCIPALS):
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                marks[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        return marks
    finally:
        consumer.close()


def _committed(s: ManifoldSettings, marks: dict[tuple[str, int], int]) -> bool:
    """Whether the applier's groups committed every partition of `marks` up to its offset."""
    from confluent_kafka import Consumer, TopicPartition

    from manifold.shared import topics

    for role, topic in (("acl", topics.ACL), ("groups", topics.PRINCIPALS)):
        consumer = Consumer({"bootstrap.servers": s.kafka.bootstrap_servers, "group.id": topics.STAGES[role].group,
                             "enable.auto.commit": False})
        try:  # never subscribes: reads the group's committed offsets without joining it
            parts = [TopicPartition(t, p) for (t, p), end in marks.items() if t == topic and end > 0]
            for tp in consumer.committed(parts, timeout=10):
                if tp.offset < marks[(tp.topic, tp.partition)]:
                    return False
        finally:
            consumer.close()
    return True


# -- reply checks beyond document ids ------------------------------------------------------------
def content_leaks(world: ModelWorld, body: dict[str, Any], can_read: Any, question: str) -> list[str]:
    """An identifier (INV-…, PRD-…, PO-…, CTR-…) or a name (supplier, product) in the reply that
    neither the question nor any readable document holds: something only a hidden document says
    (a snippet, a candidate, a graph fact, a gap) reached the reader."""
    text = json.dumps(body, ensure_ascii=False)
    readable_text = "\n".join(t for d, t in world.texts.items() if can_read(d))
    q = question.lower()
    found = []
    for token in sorted(set(IDENTIFIER.findall(text)) | {n for n in NAMES if n in text}):
        if token.lower() in q or token in readable_text:
            continue
        if any(token in t for t in world.texts.values()):  # held by some (hidden) document only
            found.append(f"{token!r} (only in hidden documents) in the reply")
    return found


def dropped(body: dict[str, Any]) -> list[int]:
    """The final check's dropped counts in the reply's trace (nothing changes content or ACLs
    while a question is answered here, so a store that filtered by the reader leaves 0)."""
    policy = (body.get("trace") or {}).get("policy") or ()
    return [int(m.group(1)) for line in policy if (m := FINAL_CHECK.search(line))]


def number_leaks(world: ModelWorld, body: dict[str, Any], can_read: Any) -> list[str]:
    """Every metric total must be a sum of some readable record lines (signed: credit notes
    count negative) in its currency: a hidden line in a total would not be (bar coincidence)."""
    lines = [line for d, ls in world.lines.items() if can_read(d) for line in ls]
    found = []
    for ev in body.get("evidence") or ():
        if ev.get("kind") != "metric":
            continue
        for currency, total in (ev.get("claims", {}).get("totals") or {}).items():
            amounts = [a for c, a in lines if c == currency]
            sums = {sum(combo, Decimal(0)) for r in range(len(amounts) + 1)
                    for combo in itertools.combinations(amounts, r)}
            if Decimal(str(total)) not in sums:
                found.append(f"metric total {total} {currency} is no sum of readable lines {amounts}")
    return found


# -- transports ---------------------------------------------------------------------------------
def _token(world: ModelWorld, user: str) -> str:
    from manifold.query.auth import mint_token, signing_key

    q = world.query_settings.query
    algorithm, key = signing_key(world.query_settings)
    return mint_token(key, tenant_id=world.tenant, subject=user, scopes=["query:read"], issuer=q.token_issuer,
                      audience=q.token_audience, ttl_s=600, algorithm=algorithm)


def _over_http(world: ModelWorld, user: str, question: str) -> dict[str, Any]:
    r = httpx.post(f"{world.url}/v1/ask", json={"question": question, "as_of": AS_OF_TS, "deadline_ms": 60_000},
                   headers={"Authorization": f"Bearer {_token(world, user)}"}, timeout=120)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _over_mcp(world: ModelWorld, user: str, question: str) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def call() -> dict[str, Any]:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {_token(world, user)}"}, timeout=120) as http, \
                streamable_http_client(f"{world.url}/mcp", http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("ask", {"question": question, "deadline_ms": 60_000})
            assert not result.isError, result.content
            content: dict[str, Any] = result.structuredContent or {}
            return content

    return anyio.run(call)


def _over_kafka(world: ModelWorld, user: str, question: str) -> dict[str, Any]:
    from manifold.query.request_client import QueryClient

    with QueryClient(world.query_settings, token=_token(world, user)) as client:
        reply = client.ask(question, deadline_ms=60_000, as_of=AS_OF)
    body: dict[str, Any] = reply.model_dump(mode="json")
    return body


TRANSPORT_ASK = {"http": _over_http, "mcp": _over_mcp, "kafka": _over_kafka}
ES: Any = None
NEO4J: Any = None


def test_acl_model(model_world: ModelWorld, es_client: Any, neo4j_driver: Any) -> None:
    global WORLD, ES, NEO4J
    WORLD, ES, NEO4J = model_world, es_client, neo4j_driver
    started = time.monotonic()
    try:
        run_state_machine_as_test(AclMachine, settings=settings(
            max_examples=15, stateful_step_count=12, deadline=None, database=None,
            phases=(Phase.explicit, Phase.reuse, Phase.generate), suppress_health_check=list(HealthCheck)))
    finally:
        WORLD = ES = NEO4J = None
        model_world.count("machine seconds", round(time.monotonic() - started))
    stats = model_world.stats
    assert stats.get("evidence seen", 0) > 0, stats  # the questions did find what readers may read
    assert stats.get("delivered acl", 0) > 0 and stats.get("delivered groups", 0) > 0, stats
    assert all(stats.get(f"{t} asks", 0) > 0 for t in TRANSPORTS), stats  # each transport was checked once



def test_the_document_list_shows_a_reader_the_documents_it_may_read(model_world: ModelWorld) -> None:
    """`GET /v1/documents` as a principal lists the documents it may read and no other.

    A KNOWN BUG when written: the listing (`deploy/serve/backend.py` `ManifestReader.documents`,
    called by `app.py` `GET /v1/documents`, `GET /v1/documents/{id}` and MCP `document_status`)
    reads the manifest without entering the caller's read scope. In a server it then carries no
    principal and lists nothing at all (fail closed, but every reader's list is empty); in a
    process that allows tool reads (tests, benchmarks) it lists as the tool principal: documents
    without an ACL, whoever asks, and not the ones granted to the caller."""
    from manifold.shared.acl_events import DocumentAclSet, sign_access

    w = model_world
    _reset(w.settings, w.tenant)
    reader = f"lister-{uuid.uuid4().hex[:6]}"
    granted, hidden = w.documents[0], w.documents[1]
    for doc, users in ((granted, [reader]), (hidden, [])):
        event = sign_access(DocumentAclSet(tenant_id=w.tenant, document_id=doc, users=users, seq=1),
                            w.signer.producer, w.signer.key)
        spec = w.specs["acl"]
        spec.step(spec.decode(event.model_dump_json().encode()))
    r = httpx.get(f"{w.url}/v1/documents", headers={"Authorization": f"Bearer {_token(w, reader)}"}, timeout=60)
    assert r.status_code == 200, r.text
    listed = {d["document_id"] for d in r.json()["documents"]}
    assert hidden not in listed
    assert listed == set(w.documents) - {hidden}, sorted(listed)
