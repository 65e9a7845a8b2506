"""`manifold acl` and `manifold groups` without services: argument checks (one line, exit 2, nothing
connects), what `set` publishes and prints, `--wait` verdicts, `show` (applied ACL or the tenant
default) and the access section of `manifold status`. The same commands against the real stack:
tests/integration/test_acl_cli.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from manifold.deploy.cli import access, main
from manifold.shared.acl_events import DocumentAclSet, GroupsSet
from manifold.shared.stores.acl_pg import AclRow

pytestmark = pytest.mark.unit


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture(autouse=True)
def _nothing_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANIFOLD_PROFILE", "distributed")
    monkeypatch.setenv("MANIFOLD_KAFKA__PORT", "1")
    monkeypatch.setenv("MANIFOLD_POSTGRES__PORT", "1")


@pytest.mark.parametrize(("argv", "says"), [
    (("acl", "set", "d.txt", "--tenant", "acme"), "say who may read the document"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--nobody", "--public"), "cannot be combined"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--nobody", "--users", "a"), "cannot be combined"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--users", "a,,b"), "--users has an empty name"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--users", ""), "--users needs at least one name"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--groups", " "), "--groups needs at least one name"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--users", "a", "--seq", "0"), "seq:"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--users", "x" * 257), "users.0:"),
    (("acl", "set", "d.txt", "--tenant", "acme", "--users", "a\x01b"), "users.0:"),
    (("acl", "set", "x" * 513, "--tenant", "acme", "--public"), "document_id"),
    (("acl", "show", "x" * 513, "--tenant", "acme"), "document_id must be 1-512 characters"),
    (("groups", "set", "alice", "--tenant", "acme", "--groups", "hr,"), "--groups has an empty name"),
    (("groups", "set", "u" * 257, "--tenant", "acme", "--groups", "hr"), "user_id:"),
    (("groups", "show", "a\nb", "--tenant", "acme"), "is not a user id"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                          says: str) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err and err.startswith(f"manifold {argv[0]} {argv[1]}:")


@pytest.mark.parametrize("argv", [("acl", "set", "d", "--tenant", "Bad", "--public"),
                                  ("acl", "show", "d", "--tenant", "../x"),
                                  ("groups", "set", "u", "--tenant", "A B", "--groups", "")])
def test_a_bad_tenant_is_refused_before_anything(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2 and "is not a tenant slug" in err and err.count("\n") == 1


def test_a_subcommand_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["acl"])
    assert exit_.value.code == 2
    assert "required" in capsys.readouterr().err


def test_without_a_producer_key_nothing_is_published(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANIFOLD_QUERY__ALLOW_DEV_KEY", "false")
    for argv in (("acl", "set", "d.txt", "--tenant", "acme", "--public"),
                 ("groups", "set", "alice", "--tenant", "acme", "--groups", "hr")):
        code, _, err = _run(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "no producer key" in err


def test_split_names_strips_and_deduplicates() -> None:
    assert access.split_names(" b, a ,b", "--users") == ["b", "a"]
    assert access.split_names(None, "--users") == []
    assert access.split_names("", "--groups", allow_empty=True) == []
    with pytest.raises(access.UsageError):
        access.split_names("", "--users")


def test_readers_text() -> None:
    assert access.readers_text(True, ["a", "b"], ["g"]) == "users a, b; groups g; public"
    assert access.readers_text(False, [], []) == "nobody"


# -- publishing, with a fake client and a fake store ------------------------------------------------
@dataclass
class FakeClient:
    sent: list[Any] = field(default_factory=list)

    def set_acl(self, tenant_id: str, document_id: str, *, users: Any = (), groups: Any = (), public: bool = False,
                seq: int | None = None) -> DocumentAclSet:
        event = DocumentAclSet(tenant_id=tenant_id, document_id=document_id, users=list(users), groups=list(groups),
                               public=public, seq=seq or 42, producer="dev")
        self.sent.append(event)
        return event

    def set_groups(self, tenant_id: str, user_id: str, groups: Any, *, seq: int | None = None) -> GroupsSet:
        event = GroupsSet(tenant_id=tenant_id, user_id=user_id, groups=list(groups), seq=seq or 43, producer="dev")
        self.sent.append(event)
        return event


@dataclass
class FakeStore:
    rows: dict[tuple[str, str], AclRow] = field(default_factory=dict)
    groups: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    def acls(self, tenant_id: str, document_ids: list[str]) -> dict[str, AclRow]:
        return {d: self.rows[(tenant_id, d)] for d in document_ids if (tenant_id, d) in self.rows}

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        return self.groups.get((tenant_id, user_id))


def _row(doc: str, seq: int, **kw: Any) -> AclRow:
    return AclRow(doc, seq, kw.get("public", False), tuple(kw.get("users", ())), tuple(kw.get("groups", ())),
                  datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeClient, FakeStore]:
    from manifold.deploy.compose import distributed

    client, store = FakeClient(), FakeStore()
    monkeypatch.setattr(distributed, "access_client", lambda _settings: client)
    monkeypatch.setattr(access, "acl_store", lambda _settings: store)
    return client, store


def test_set_publishes_the_combined_readers_and_says_who_applies_it(fakes, capsys) -> None:
    client, _ = fakes
    code, out, err = _run(capsys, "acl", "set", "dir/d.txt", "--tenant", "acme", "--users", "bob,alice",
                          "--groups", "hr", "--public", "--seq", "7")
    assert code == 0
    event = client.sent[-1]
    assert (event.tenant_id, event.document_id, event.seq, event.public) == ("acme", "dir/d.txt", 7, True)
    assert (event.users, event.groups) == (["alice", "bob"], ["hr"])
    assert out == "published ACL of acme/dir/d.txt seq 7: users alice, bob; groups hr; public\n"
    assert "`acl` worker role applies it" in err


def test_nobody_publishes_an_empty_acl(fakes, capsys) -> None:
    client, _ = fakes
    code, out, _ = _run(capsys, "acl", "set", "d.txt", "--tenant", "acme", "--nobody")
    assert code == 0 and out.endswith(": nobody\n")
    assert (client.sent[-1].users, client.sent[-1].groups, client.sent[-1].public) == ([], [], False)


@pytest.mark.parametrize(("stored", "code", "says"), [
    (7, 0, "applied"),
    (9, 1, "ignored: a newer ACL (seq 9) is already applied"),
    (None, 1, "not applied after 0.3 s"),
])
def test_wait_reports_whether_the_acl_is_in_effect(fakes, capsys, stored: int | None, code: int, says: str) -> None:
    _, store = fakes
    if stored is not None:
        store.rows[("acme", "d.txt")] = _row("d.txt", stored, users=["a"])
    got, out, err = _run(capsys, "acl", "set", "d.txt", "--tenant", "acme", "--users", "a", "--seq", "7",
                         "--wait", "0.3")
    assert got == code and says in out + err


def test_groups_set_with_an_empty_list_removes_every_membership(fakes, capsys) -> None:
    client, store = fakes
    store.groups[("acme", "alice")] = ()
    code, out, _ = _run(capsys, "groups", "set", "alice", "--tenant", "acme", "--groups", "", "--wait", "1")
    assert code == 0 and client.sent[-1].groups == []
    assert out.splitlines() == ["published groups of acme/alice seq 43: none (every membership removed)", "applied"]


def test_show_prints_the_applied_acl_or_the_default(fakes, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    _, store = fakes
    store.rows[("acme", "d.txt")] = _row("d.txt", 5, users=["alice"], groups=["hr", "ops"])
    code, out, _ = _run(capsys, "acl", "show", "d.txt", "--tenant", "acme")
    assert code == 0
    assert out.splitlines() == ["acme/d.txt: seq 5, applied 2026-01-02T03:04:05+00:00",
                                "  readers: users alice; groups hr, ops"]
    code, out, _ = _run(capsys, "acl", "show", "other.txt", "--tenant", "acme")
    assert out == "acme/other.txt: no ACL: the tenant default applies (tenant)\n"
    monkeypatch.setenv("MANIFOLD_QUERY__ACL_TENANT_DEFAULTS", '{"acme": "none"}')
    code, out, _ = _run(capsys, "acl", "show", "other.txt", "--tenant", "acme", "--json")
    assert json.loads(out) == {"tenant_id": "acme", "document_id": "other.txt", "acl": None, "default": "none"}
    code, out, _ = _run(capsys, "acl", "show", "d.txt", "--tenant", "acme", "--json")
    assert json.loads(out)["acl"] == {"seq": 5, "public": False, "users": ["alice"], "groups": ["hr", "ops"],
                                      "applied_at": "2026-01-02T03:04:05+00:00"}


def test_groups_show(fakes, capsys) -> None:
    _, store = fakes
    store.groups[("acme", "alice")] = ("eng", "hr")
    assert _run(capsys, "groups", "show", "alice", "--tenant", "acme")[1] == "acme/alice: eng, hr\n"
    assert "no membership recorded" in _run(capsys, "groups", "show", "bob", "--tenant", "acme")[1]
    assert json.loads(_run(capsys, "groups", "show", "bob", "--tenant", "acme", "--json")[1])["groups"] is None


def test_an_unreachable_store_is_one_line(capsys) -> None:
    code, _, err = _run(capsys, "acl", "show", "d.txt", "--tenant", "acme")
    assert code == 1 and err.count("\n") == 1 and err.startswith("manifold acl show: the ACL state cannot be read")


def test_status_lists_each_documents_access_state() -> None:
    from manifold.deploy.cli.ops import print_status

    docs = [{"tenant_id": "acme", "document_id": d, "active_version": 1, "state": "active", "review_items": 0,
             "counts": {"postgres": 1, "elasticsearch": 1, "neo4j": 0}, "acl": acl}
            for d, acl in (("a.txt", {"state": "default", "default": "none"}),
                           ("b.txt", {"state": "set", "seq": 9, "public": True, "users": ["x", "y"],
                                      "groups": ["g"]}),
                           ("c.txt", {"state": "set", "seq": 3, "public": False, "users": [], "groups": []}))]
    lines: list[str] = []
    print_status({"documents": docs}, out=lines.append)
    assert lines[0].split()[:2] == ["tenant", "document"] and len(lines) == 1 + 3 + 3 + 3
    assert lines[5] == "access: 2 of 3 document(s) have an ACL"
    assert lines[7].split()[:2] == ["acme", "b.txt"] and lines[7].endswith("users 2, groups 1, public; seq 9")
    assert lines[8].split()[:2] == ["acme", "c.txt"] and lines[8].endswith("nobody; seq 3")
    assert lines[9].split() == ["acme", "(1", "without", "an", "ACL)", "tenant", "default", "(none)"]
    assert sum("a.txt" in line for line in lines) == 1  # a document without an ACL is counted, not listed


def test_token_help_says_the_subject_is_the_reader(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["token", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the reader whose per-" in text and "ACLs and groups apply" in text and "acl:write acl:read" in text


def test_an_unreachable_broker_is_one_line(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from manifold.deploy.compose import distributed

    def unreachable(_settings: Any) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    monkeypatch.setattr(distributed, "access_client", unreachable)
    code, _, err = _run(capsys, "acl", "set", "d.txt", "--tenant", "acme", "--public")
    assert code == 1 and err.startswith("manifold acl set: cannot reach Kafka:") and err.count("\n") == 1


def test_a_poison_dead_letter_never_breaks_the_search_for_an_events_letter() -> None:
    import base64
    from types import SimpleNamespace

    def letter(raw: bytes) -> Any:
        return SimpleNamespace(value_b64=base64.b64encode(raw).decode())

    wanted = json.dumps({"event_id": "ev-7", "tenant_id": "acme"}).encode()
    assert access._is_event(letter(wanted), "ev-7")
    poison = [b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe not json", b"[1, 2]", b"", b'"ev-7"',
              b'{"event_id": ' + b"[" * 100_000 + b"]" * 100_000 + b', "x": "ev-7"}']
    assert not any(access._is_event(letter(raw), "ev-7") for raw in poison)
    assert not access._is_event(SimpleNamespace(value_b64=None), "ev-7")
