"""`dlq_tools.service.DlqService` and `dlq_tools.originals.envelope_verifier` against an in-memory
bus: tenant scope, every refusal reason, the cap, the digest and stale confirmations, replay
recorded only after acknowledgement, purge; and the `dlq` command on top of the service."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from manifold.dlq_tools import cli, service
from manifold.dlq_tools.dlq_bus import REPLAY_HEADER
from manifold.dlq_tools.originals import claimed_tenant, envelope_verifier
from manifold.dlq_tools.records import DlqAction, Entry, Filters, RawMessage, decode_actions
from manifold.dlq_tools.service import DlqService, StaleConfirmation, selection_digest
from manifold.shared import topics
from manifold.shared.acl_events import DocumentAclSet, GroupsSet, sign_access
from manifold.shared.artifacts import DocRef, LoadNotice, PipelineVersions
from manifold.shared.dlq import DeadLetter, b64
from manifold.shared.envelope_auth import ProducerGrant, ProducerRegistry, Signer, sign
from manifold.shared.errors import Transient
from manifold.shared.events import DocumentDeleted, upserted

pytestmark = pytest.mark.unit

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KEY = "test-producer-key"
REGISTRY = ProducerRegistry({"up": ProducerGrant(KEY, frozenset({"acme", "globex"}))})


# -- fakes --------------------------------------------------------------------------------------
class FakeProducer:
    """Appends acknowledged messages to the bus on flush; rejects messages to `bus.reject`."""

    def __init__(self, bus: FakeBus) -> None:
        self.bus = bus
        self.pending: list[tuple[str, bytes | None, bytes, Any, Any]] = []

    def produce(self, topic: str, *, key: bytes | None = None, value: bytes | None = None, headers: Any = None,
                on_delivery: Any = None) -> None:
        self.pending.append((topic, key, value or b"", headers, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        for topic, key, value, headers, callback in self.pending:
            if topic in self.bus.reject:
                callback("rejected by the broker", None)
            else:
                self.bus.append(topic, value, key, tuple(headers or ()))
                callback(None, None)
        self.pending = []
        return 0


class FakeBus:
    name = "fake"

    def __init__(self) -> None:
        self.topics: dict[str, list[RawMessage]] = {}
        self.existing = set(topics.STAGE_SOURCES.values())
        self.reject: set[str] = set()

    def append(self, topic: str, value: bytes, key: bytes | None = b"k", headers: tuple[Any, ...] = ()) -> str:
        log = self.topics.setdefault(topic, [])
        log.append(RawMessage(0, len(log), key, value, headers))
        return f"0:{len(log) - 1}"

    def read(self, topic: str) -> list[RawMessage]:
        return list(self.topics.get(topic, []))

    def existing_topics(self) -> set[str]:
        return set(self.existing)

    def ensure_actions_topic(self, topic: str) -> None:
        self.existing.add(topic)

    def producer(self) -> FakeProducer:
        return FakeProducer(self)

    def actions(self) -> list[DlqAction]:
        return decode_actions(self.read(topics.DLQ_ACTIONS))

    def sent(self, topic: str) -> list[RawMessage]:
        return self.read(topic)


def dead_letter(value: bytes, *, tenant: str | None = "acme", doc: str | None = "a.txt", version: int | None = 1,
                stage: str = "parse", age: timedelta = timedelta(hours=1)) -> DeadLetter:
    return DeadLetter(stage=stage, error_kind="bad_input", error="boom", attempts=1,
                      source_topic=topics.STAGE_SOURCES[stage], source_partition=0, source_offset=1,
                      key_b64=b64(f"{tenant}/{doc}".encode()),
                      value_b64=b64(value) or "", tenant_id=tenant, document_id=doc, version=version,
                      failed_at=NOW - age)


def event(tenant: str = "acme", doc: str = "a.txt", version: int = 1, *, signed: bool = True, key: str = KEY) -> bytes:
    ev = upserted(tenant, doc, version, b"hello", "text/plain")
    return (sign(ev, "up", key) if signed else ev).model_dump_json().encode()


def upstream(bus: FakeBus, tenant: str = "acme", doc: str = "a.txt", version: int = 1, *,
             age: timedelta = timedelta(hours=1), **kw: Any) -> str:
    """A parse-stage dead letter of a signed upstream event, on the fake DLQ; its id."""
    letter = dead_letter(event(tenant, doc, version, **kw), tenant=tenant, doc=doc, version=version, age=age)
    return bus.append(topics.DLQ, letter.model_dump_json().encode())


def make(bus: FakeBus, newest: dict[tuple[str, str], int] | None = None, **kw: Any) -> DlqService:
    ledger = newest if newest is not None else {}
    return DlqService(bus, actor="tester@host", verify=envelope_verifier(REGISTRY),
                      newest_version=lambda t, d: ledger.get((t, d)), clock=lambda: NOW, **kw)


def reasons(plan: service.DryRun) -> dict[str, str]:
    return dict(plan.refused)


# -- tenant scope ---------------------------------------------------------------------------------
def test_another_tenants_letters_never_appear() -> None:
    bus = FakeBus()
    mine = upstream(bus, "acme", "a.txt")
    theirs = upstream(bus, "globex", "g.txt")
    garbage = bus.append(topics.DLQ, b"not a dead letter")
    # A forged letter claiming acme whose original is globex's: not acme's either.
    forged = bus.append(topics.DLQ, dead_letter(event("globex", "x.txt"), tenant="acme", doc="x.txt")
                        .model_dump_json().encode())
    svc = make(bus)

    assert [r.entry.id for r in svc.browse(None, tenant="acme")] == [mine]
    assert {r.entry.id for r in svc.browse(Filters(), tenant=None)} == {mine, theirs, garbage, forged}
    assert svc.browse(Filters(tenant="globex"), tenant="acme") == []
    assert svc.find(theirs, tenant="acme") is None and svc.find(forged, tenant="acme") is None
    assert svc.find(theirs, tenant=None) is not None
    counts = svc.stats(tenant="acme")
    assert counts["total"] == 1 and counts["by_tenant"] == {"acme": 1} and counts["open_invalid"] == 0

    plan = svc.dry_run(ids=[mine, theirs, garbage], tenant="acme")
    assert [e.id for e in plan.valid] == [mine] and plan.refused == []
    assert plan.unknown_ids == [theirs, garbage]  # exactly like an id that does not exist
    assert [e.id for e in svc.dry_run(filters=Filters(), tenant="acme").valid] == [mine]
    result = svc.purge(ids=[theirs], tenant="acme")
    assert result.count == 0 and result.unknown_ids == [theirs] and bus.actions() == []


def test_claimed_tenant_reads_the_original_like_the_runner() -> None:
    assert claimed_tenant(b'{"tenant_id": "acme"}') == "acme"
    assert claimed_tenant(b'{"doc": {"tenant_id": "acme"}, "tenant_id": "x"}') == "acme"
    for junk in (b"\xff", b"[1]", b'{"tenant_id": 3}', b"[" * 100_000):
        assert claimed_tenant(junk) is None


# -- refusals ---------------------------------------------------------------------------------------
def test_every_refusal_reason_in_order() -> None:
    bus = FakeBus()
    ok = upstream(bus, "acme", "ok.txt")
    garbage = bus.append(topics.DLQ, b"garbage")
    purged = upstream(bus, "acme", "p.txt")
    forged = bus.append(topics.DLQ, dead_letter(event()).model_dump_json().replace(
        topics.DOCUMENTS, topics.PUBLISH).encode())
    unsigned = upstream(bus, "acme", "u.txt", signed=False)
    mis_signed = upstream(bus, "acme", "m.txt", key="another key")
    mismatched = bus.append(topics.DLQ, dead_letter(event("acme", "other.txt"), doc="claimed.txt")
                            .model_dump_json().encode())
    not_event = bus.append(topics.DLQ, dead_letter(b'{"tenant_id": "acme"}').model_dump_json().encode())
    old = upstream(bus, "acme", "old.txt", version=2)
    current = upstream(bus, "acme", "cur.txt", version=3)
    svc = make(bus, newest={("acme", "old.txt"): 5, ("acme", "cur.txt"): 3})
    svc.purge(ids=[purged], tenant=None)

    plan = svc.dry_run(ids=[ok, garbage, purged, forged, unsigned, mis_signed, mismatched, not_event, old, current],
                       tenant=None)
    why = reasons(plan)
    assert sorted(e.id for e in plan.valid) == sorted([ok, current])
    assert why[garbage].startswith("not a DeadLetter")
    assert why[purged] == "purged"
    assert "forged or foreign record" in why[forged] and "source_topic" in why[forged]
    assert "unsigned event" in why[unsigned]
    assert "bad signature" in why[mis_signed]
    assert "document 'other.txt'" in why[mismatched] and "'claimed.txt'" in why[mismatched]
    assert why[not_event].startswith("original is not a valid upstream document event")
    assert why[old] == "superseded by version 5"
    assert plan.targets == {topics.DOCUMENTS: 2}


def test_a_missing_source_topic_and_a_smuggled_source_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bus = FakeBus()
    bus.existing.discard(topics.DOCUMENTS)
    first = upstream(bus)
    assert reasons(make(bus).dry_run(ids=[first], tenant=None)) == {
        first: f"source topic {topics.DOCUMENTS} does not exist"}
    # `records.decode` already refuses a letter naming another stage's topic; never trust it alone.
    smuggled = dead_letter(event()).model_copy(update={"source_topic": "manifold.query.replies"})
    monkeypatch.setattr(service, "decode", lambda raw: Entry(raw, smuggled))
    why = reasons(make(bus).dry_run(ids=[first], tenant=None))[first]
    assert why.startswith("refused: source_topic 'manifold.query.replies'")


def test_tenant_grants_are_enforced() -> None:
    bus = FakeBus()
    other = upstream(bus, "initech", "i.txt")
    why = reasons(make(bus).dry_run(ids=[other], tenant=None))[other]
    assert "may not publish for tenant 'initech'" in why


def test_an_unreachable_ledger_refuses_with_a_reason_and_is_asked_once() -> None:
    bus = FakeBus()
    ids = [upstream(bus, "acme", f"{n}.txt") for n in range(3)]
    calls: list[tuple[str, str]] = []

    def down(tenant: str, doc: str) -> int | None:
        calls.append((tenant, doc))
        raise Transient("postgres unavailable: connection refused")

    svc = DlqService(bus, actor="t", verify=envelope_verifier(REGISTRY), newest_version=down, clock=lambda: NOW)
    plan = svc.dry_run(filters=Filters(), tenant="acme")
    assert plan.valid == [] and len(calls) == 1
    assert {why for _, why in plan.refused} == {
        "cannot check for a newer version: the version ledger failed (Transient: postgres unavailable: "
        "connection refused)"}
    assert sorted(i for i, _ in plan.refused) == sorted(ids)


def test_a_failing_verify_port_refuses_instead_of_crashing() -> None:
    bus = FakeBus()
    one = upstream(bus)

    def broken(entry: Entry) -> str | None:
        raise RuntimeError("boom")

    svc = DlqService(bus, actor="t", verify=broken, clock=lambda: NOW)
    assert reasons(svc.dry_run(ids=[one], tenant=None)) == {one: "original could not be verified (RuntimeError: boom)"}


# -- cap and digest -----------------------------------------------------------------------------------
def test_cap_considers_the_oldest_first_and_says_how_many_were_left_out() -> None:
    bus = FakeBus()
    ids = {hours: upstream(bus, "acme", f"{hours}.txt", age=timedelta(hours=hours)) for hours in (1, 5, 3, 4, 2)}
    plan = make(bus).dry_run(filters=Filters(), tenant="acme", cap=2)
    assert [e.id for e in plan.valid] == [ids[5], ids[4]] and plan.left_out == 3
    assert set(plan.statuses) == {ids[5], ids[4]}
    with pytest.raises(ValueError, match="cap"):
        make(bus).dry_run(filters=Filters(), tenant="acme", cap=0)


def test_the_digest_names_exactly_the_valid_letters() -> None:
    bus = FakeBus()
    a, b = upstream(bus, "acme", "a.txt"), upstream(bus, "acme", "b.txt")
    svc = make(bus)
    one = svc.dry_run(ids=[a, b], tenant=None)
    assert one.digest == svc.dry_run(ids=[b, a], tenant=None).digest == selection_digest(one.valid)
    assert one.digest != svc.dry_run(ids=[a], tenant=None).digest
    with pytest.raises(ValueError, match="ids or by filters"):
        svc.dry_run(tenant=None)
    with pytest.raises(ValueError, match="ids or by filters"):
        svc.dry_run(ids=[a], filters=Filters(), tenant=None)


def test_a_stale_confirmation_replays_nothing() -> None:
    bus = FakeBus()
    a, b = upstream(bus, "acme", "a.txt"), upstream(bus, "acme", "b.txt")
    newest: dict[tuple[str, str], int] = {}
    svc = make(bus, newest)
    plan = svc.dry_run(filters=Filters(tenant="acme"), tenant="acme")
    assert len(plan.valid) == 2
    newest[("acme", "b.txt")] = 2  # a newer version was published since the dry run
    with pytest.raises(StaleConfirmation, match="changed since the dry run") as stale:
        svc.replay(plan.digest, filters=Filters(tenant="acme"), tenant="acme")
    assert [e.id for e in stale.value.current.valid] == [a]
    assert bus.sent(topics.DOCUMENTS) == [] and bus.actions() == []
    # A new letter arriving also changes what "--all" means.
    plan = svc.dry_run(filters=Filters(), tenant="acme")
    upstream(bus, "acme", "c.txt")
    with pytest.raises(StaleConfirmation):
        svc.replay(plan.digest, filters=Filters(), tenant="acme")
    assert b not in [e.id for e in plan.valid]


# -- replay and purge ------------------------------------------------------------------------------------
def test_replay_reproduces_the_bytes_and_records_only_acknowledged_letters() -> None:
    bus = FakeBus()
    a = upstream(bus, "acme", "a.txt")
    acl = sign_access(DocumentAclSet(tenant_id="acme", document_id="a.txt", seq=1, users=["ann"]), "up", KEY)
    acl_id = bus.append(topics.DLQ, dead_letter(acl.model_dump_json().encode(), stage="acl", version=None)
                        .model_dump_json().encode())
    bus.reject.add(topics.ACL)
    svc = make(bus)
    plan = svc.dry_run(filters=Filters(), tenant="acme")
    assert {e.id for e in plan.valid} == {a, acl_id} and plan.targets == {topics.ACL: 1, topics.DOCUMENTS: 1}
    sent: list[int] = []
    report = svc.replay(plan.digest, filters=Filters(), tenant="acme", rate=1e9, on_sent=sent.append)
    assert report.replayed == [a] and report.failed == [(acl_id, "rejected by the broker")] and sum(sent) == 2
    [msg] = bus.sent(topics.DOCUMENTS)
    letter = svc.find(a, tenant="acme")
    assert letter is not None and letter.entry.letter is not None
    assert (msg.key, msg.value) == (letter.entry.letter.key, letter.entry.letter.value)
    assert dict(msg.headers)[REPLAY_HEADER] == a.encode()
    [action] = bus.actions()
    assert (action.dlq_id, action.action, action.by, action.target_topic, action.at) == (
        a, "replayed", "tester@host", topics.DOCUMENTS, NOW)
    assert letter.status.state == "replayed"
    assert [r.entry.id for r in svc.browse(None, tenant="acme")] == [acl_id]  # still open: not acknowledged


def test_purge_records_skips_and_hides() -> None:
    bus = FakeBus()
    a, b = upstream(bus, "acme", "a.txt"), upstream(bus, "acme", "b.txt")
    theirs = upstream(bus, "globex", "g.txt")
    svc = make(bus)
    assert svc.purge(ids=[a], tenant="acme").purged == [a]
    again = svc.purge(ids=[a, b], tenant="acme")
    assert again.purged == [b] and again.skipped == [(a, "already purged")]
    assert svc.browse(None, tenant="acme") == [] and svc.purge(filters=Filters(), tenant="acme").count == 0
    assert [(x.dlq_id, x.action, x.by) for x in bus.actions()] == [(a, "purged", "tester@host"),
                                                                   (b, "purged", "tester@host")]
    assert [r.entry.id for r in svc.browse(None, tenant=None)] == [theirs]
    assert reasons(svc.dry_run(ids=[a], tenant="acme")) == {a: "purged"}


# -- the verifier per topic ------------------------------------------------------------------------------
def _verify(letter: DeadLetter, keys: Any = REGISTRY) -> str | None:
    return envelope_verifier(keys)(Entry(RawMessage(0, 0, None, b""), letter))


def test_access_events_are_verified_like_documents() -> None:
    acl = DocumentAclSet(tenant_id="acme", document_id="a.txt", seq=4, public=True)
    good = dead_letter(sign_access(acl, "up", KEY).model_dump_json().encode(), stage="acl", version=None)
    assert _verify(good) is None
    assert "unsigned" in (_verify(dead_letter(acl.model_dump_json().encode(), stage="acl", version=None)) or "")
    groups = sign_access(GroupsSet(tenant_id="acme", user_id="ann", seq=1, groups=["g"]), "up", KEY)
    assert _verify(dead_letter(groups.model_dump_json().encode(), stage="groups", doc=None, version=None)) is None
    tampered = json.loads(groups.model_dump_json()) | {"groups": ["admins"]}
    assert "bad signature" in (_verify(dead_letter(json.dumps(tampered).encode(), stage="groups", doc=None,
                                                   version=None)) or "")


def test_publish_takes_a_load_notice_or_a_signed_delete_only() -> None:
    deleted = sign(DocumentDeleted(tenant_id="acme", document_id="a.txt", version=2), "up", KEY)
    assert _verify(dead_letter(deleted.model_dump_json().encode(), stage="publish", version=2)) is None
    assert "only a LoadNotice or a DocumentDeleted" in (_verify(dead_letter(event(), stage="publish")) or "")
    versions = PipelineVersions(parser="p", chunker="c", embedding_model="m", embedding_revision="r",
                                embedding_dim=4, embedding_normalized=True, extraction="e", pg_schema="1",
                                es_schema="1", graph_schema="1", chunk_max_chars=100, chunk_overlap_chars=10)
    notice = LoadNotice(doc=DocRef(tenant_id="acme", document_id="a.txt", version=1, content_sha256="0" * 64,
                                   media_type="text/plain"), versions=versions, stores=[])
    assert _verify(dead_letter(notice.model_dump_json().encode(), stage="publish")) is None
    assert "names tenant 'acme', document 'a.txt', version 1" in (
        _verify(dead_letter(notice.model_dump_json().encode(), stage="publish", version=7)) or "")
    assert "not a valid LoadNotice" in (_verify(dead_letter(b'{"doc": {}}', stage="publish")) or "")


def test_stage_notices_are_checked_for_shape_and_identity() -> None:
    notice = {"schema_version": 1, "event_id": "e", "tenant_id": "acme", "document_id": "a.txt", "version": 1,
              "stage": "parsed", "payload_key": "acme/1/f/a.txt"}
    assert _verify(dead_letter(json.dumps(notice).encode(), stage="chunk")) is None
    assert "unknown field 'extra'" in (_verify(dead_letter(json.dumps(notice | {"extra": 1}).encode(),
                                                           stage="chunk")) or "")
    assert "payload_key required" in (_verify(dead_letter(json.dumps(notice | {"payload_key": ""}).encode(),
                                                          stage="embed")) or "")
    assert "version 9" in (_verify(dead_letter(json.dumps(notice).encode(), stage="load", version=9)) or "")
    assert _verify(dead_letter(b"\x00\xff", stage="extract")) == "original is not JSON"
    assert _verify(dead_letter(b"[" * 100_000, stage="extract")) == "original could not be checked (RecursionError)"


def test_a_signer_stands_for_its_own_producer() -> None:
    letter = dead_letter(event())
    assert _verify(letter, Signer("up", KEY)) is None
    assert "unknown producer 'up'" in (_verify(letter, Signer("other", KEY)) or "")


# -- the command line on the service -------------------------------------------------------------------
@pytest.fixture
def cli_bus(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeBus, dict[tuple[str, str], int]]:
    bus = FakeBus()
    newest: dict[tuple[str, str], int] = {}
    monkeypatch.setattr(cli, "dlq_bus", lambda settings: bus)
    monkeypatch.setattr(cli, "replay_checks",
                        lambda settings: (envelope_verifier(REGISTRY), lambda t, d: newest.get((t, d))))
    return bus, newest


def test_cli_dry_run_prints_valid_refused_and_digest(cli_bus: tuple[FakeBus, dict[tuple[str, str], int]],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bus, newest = cli_bus
    good, old = upstream(bus, "acme", "a.txt"), upstream(bus, "acme", "b.txt")
    newest[("acme", "b.txt")] = 4
    assert cli.main(["replay", "--all", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert good in out and old not in out.split("\n", 1)[1]
    assert f"refused {old}: superseded by version 4" in err and "would replay 1 message(s)" in err
    digest = service.DlqService(bus, actor="x").dry_run(ids=[good], tenant=None).digest
    assert f"digest: {digest}" in err and bus.sent(topics.DOCUMENTS) == []


def test_cli_replay_enforces_refusals_and_exit_codes(cli_bus: tuple[FakeBus, dict[tuple[str, str], int]],
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bus, newest = cli_bus
    good, old = upstream(bus, "acme", "a.txt"), upstream(bus, "acme", "b.txt")
    newest[("acme", "b.txt")] = 4
    assert cli.main(["replay", old]) == 1
    assert "superseded by version 4" in capsys.readouterr().err and bus.sent(topics.DOCUMENTS) == []
    monkeypatch.setattr(cli, "_ask", lambda prompt: "n")
    third = upstream(bus, "acme", "c.txt")
    assert cli.main(["replay", "--tenant", "acme"]) == 1 and "aborted" in capsys.readouterr().err
    assert cli.main(["replay", "--tenant", "acme", "--yes"]) == 1  # replayed two, refused one
    err = capsys.readouterr().err
    assert "replayed 2 of 2" in err and f"skipping {old}" in err
    assert sorted(json.loads(m.value or b"")["document_id"] for m in bus.sent(topics.DOCUMENTS)) == ["a.txt", "c.txt"]
    assert {a.dlq_id for a in bus.actions()} == {good, third}
    assert cli.main(["replay", good]) == 0 and "replayed 1 of 1" in capsys.readouterr().err
    assert cli.main(["replay", "7:7"]) == 1 and "no DLQ entry 7:7" in capsys.readouterr().err


def test_cli_list_stats_and_purge_go_through_the_service(cli_bus: tuple[FakeBus, dict[tuple[str, str], int]],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    bus, _ = cli_bus
    a, b = upstream(bus, "acme", "a.txt"), upstream(bus, "globex", "g.txt")
    assert cli.main(["list", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [a, b]
    assert cli.main(["purge", a, "--yes"]) == 0 and "purged 1 entry" in capsys.readouterr().err
    assert cli.main(["purge", a, "--yes"]) == 1 and "already purged" in capsys.readouterr().err
    assert cli.main(["stats", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["open"], counts["purged"], counts["by_tenant"]) == (1, 1, {"globex": 1})
    assert cli.main(["show", a, "--json"]) == 0 and json.loads(capsys.readouterr().out)["status"] == "purged"
