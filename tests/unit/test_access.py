"""Per-document access (issue 29) without services: the read scope, the access events and their
signatures, the applier's decode/verify/apply path, and how the scope follows a request."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from manifold.ingest.access_client import AccessClient
from manifold.ingest.acl_applier import access_specs
from manifold.shared import access
from manifold.shared.access import AccessUnresolved, ReadScope, reading_as
from manifold.shared.acl_events import DocumentAclSet, GroupsSet, parse_acl, sign_access, signing_payload
from manifold.shared.envelope_auth import ProducerGrant, ProducerRegistry, Signer, Unauthorized
from manifold.shared.errors import BadInput
from manifold.shared.stores.serving import cypher_serving, es_serving_filter, serving_params

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ProducerRegistry({"hr": ProducerGrant("k" * 32, frozenset({"acme"})),
                             "any": ProducerGrant("z" * 32, frozenset({"*"}))})


def test_a_deny_list_scope_reads_everything_but_its_documents() -> None:
    scope = ReadScope("acme", "bob", "tenant", allow=False, documents=frozenset({"hr/pay.csv"}))
    assert scope.readable("plan.md") and not scope.readable("hr/pay.csv") and not scope.readable(None)
    assert scope.es_clause() == {"bool": {"must_not": [{"terms": {"document_id": ["hr/pay.csv"]}}]}}
    assert scope.cypher_params() == {"acl_docs": ["hr/pay.csv"], "acl_allow": False}
    assert ReadScope("acme", "bob", "tenant", allow=False).es_clause() is None


def test_an_allow_list_scope_reads_only_its_documents_and_an_empty_one_nothing() -> None:
    scope = ReadScope("acme", "bob", "none", allow=True, documents=frozenset({"a", "b"}))
    assert scope.readable("a") and not scope.readable("c")
    assert scope.es_clause() == {"terms": {"document_id": ["a", "b"]}}
    assert ReadScope("acme", "bob", "none", allow=True).es_clause() == {"terms": {"document_id": []}}
    assert scope.pg_settings() == {"manifold.principal": "bob", "manifold.acl_default": "none"}


def test_a_read_without_a_scope_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access, "_tool_reads", False)
    with pytest.raises(AccessUnresolved):
        access.current("acme")
    with pytest.raises(AccessUnresolved):
        es_serving_filter("acme")
    with pytest.raises(AccessUnresolved):
        serving_params("acme")
    assert access.for_tenant("acme") is None
    with reading_as(ReadScope("other", "bob", "tenant", allow=False)):
        with pytest.raises(AccessUnresolved):  # a scope of another tenant is no scope
            access.current("acme")
        assert access.for_tenant("acme") is None


def test_the_serving_filters_carry_the_scope() -> None:
    scope = ReadScope("acme", "bob", "none", allow=True, documents=frozenset({"a"}))
    with reading_as(scope):
        assert es_serving_filter("acme")[-1] == {"terms": {"document_id": ["a"]}}
        assert serving_params("acme") == {"acl_docs": ["a"], "acl_allow": True}
    assert "r.document_id IN $acl_docs" in cypher_serving("r") and "r.active = true" in cypher_serving("r")
    with pytest.raises(ValueError):
        access.cypher_readable("r) OR true OR (r")


def test_no_product_entry_point_opts_in_to_tool_reads() -> None:
    callers = []
    for package in ("query", "ingest", "deploy", "shared", "dlq_tools", "client"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "access.py" and re.search(r"allow_tool_reads\(", path.read_text()):
                callers.append(str(path.relative_to(ROOT)))
    assert callers == []


def test_the_engine_runs_every_step_under_the_request_scope() -> None:
    from manifold.query.breaker import Breakers
    from manifold.query.engine import Engine
    from manifold.query.plan import validate_plan
    from manifold.query.types import StepResult

    seen: list[ReadScope] = []

    class Probe:
        source = "postgres"

        def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult:
            seen.append(access.current(tenant_id))
            return StepResult()

    engine = Engine({"bm25_search": Probe()}, Breakers(failures=3, reset_s=1.0))
    plan = validate_plan({"steps": [{"id": "s", "operator": "bm25_search", "params": {"query": "pay"}}]})
    scope = ReadScope("acme", "bob", "none", allow=True, documents=frozenset({"a"}))
    try:
        with reading_as(scope):
            engine.execute(plan, tenant_id="acme", deadline=10**9)
    finally:
        engine.close()
    assert seen == [scope]


def _acl(**kw: Any) -> DocumentAclSet:
    return DocumentAclSet(**{"tenant_id": "acme", "document_id": "hr/pay.csv", "seq": 5, **kw})


def test_acl_events_are_normalised_bounded_and_signed_over_every_field() -> None:
    event = _acl(users=["bob", "alice", "bob"], groups=["hr"])
    assert event.users == ["alice", "bob"]
    signed = sign_access(event, "hr", "k" * 32)
    REGISTRY.check(signed.producer, signed.signature, signed.tenant_id, lambda p: signing_payload(signed, p))
    for change in ({"public": True}, {"users": ["alice", "bob", "mallory"]}, {"seq": 6},
                   {"document_id": "hr/other.csv"}, {"groups": []}):
        tampered = signed.model_copy(update=change)
        with pytest.raises(Unauthorized):
            _decode("acl")(tampered.model_dump_json().encode())
    with pytest.raises(ValueError):
        _acl(users=["bad\nname"])
    with pytest.raises(ValueError):
        _acl(seq=0)
    with pytest.raises(BadInput):
        parse_acl(b"{not json")


def _decode(role: str) -> Any:
    return access_specs(_State(), REGISTRY)[role].decode


class _State:
    def __init__(self) -> None:
        self.acls: list[DocumentAclSet] = []
        self.groups: list[GroupsSet] = []

    def apply_acl(self, event: DocumentAclSet) -> bool:
        self.acls.append(event)
        return True

    def apply_groups(self, event: GroupsSet) -> bool:
        self.groups.append(event)
        return True


def test_the_applier_applies_signed_events_and_refuses_the_rest() -> None:
    state = _State()
    specs = access_specs(state, REGISTRY)
    good = sign_access(_acl(groups=["hr"]), "hr", "k" * 32)
    specs["acl"].step(specs["acl"].decode(good.model_dump_json().encode()))
    assert [e.groups for e in state.acls] == [["hr"]]
    membership = sign_access(GroupsSet(tenant_id="acme", user_id="bob", groups=["hr"], seq=1), "any", "z" * 32)
    specs["groups"].step(specs["groups"].decode(membership.model_dump_json().encode()))
    assert [e.user_id for e in state.groups] == ["bob"]
    refused = [
        _acl().model_dump_json().encode(),  # unsigned
        sign_access(_acl(), "hr", "x" * 32).model_dump_json().encode(),  # wrong key
        sign_access(_acl(tenant_id="globex"), "hr", "k" * 32).model_dump_json().encode(),  # tenant not granted
        sign_access(_acl(), "nobody", "k" * 32).model_dump_json().encode(),  # unknown producer
    ]
    for raw in refused:
        with pytest.raises(Unauthorized) as err:
            specs["acl"].decode(raw)
        assert err.value.error_kind == "unauthorized"
    with pytest.raises(BadInput):  # a membership event on the ACL topic
        specs["acl"].decode(membership.model_dump_json().encode())


def test_the_access_client_validates_before_it_publishes() -> None:
    sent: list[tuple[str, bytes]] = []

    class Producer:
        def produce(self, topic: str, *, key: bytes | None = None, value: bytes | None = None,
                    headers: Any = None, on_delivery: Any = None) -> None:
            sent.append((topic, value or b""))
            if on_delivery is not None:
                on_delivery(None, None)

        def poll(self, timeout: float = 0) -> int:
            return 0

        def flush(self, timeout: float = -1) -> int:
            return 0

    client = AccessClient(Producer(), Signer("hr", "k" * 32))  # type: ignore[arg-type]  # a fake bus
    with pytest.raises(ValueError, match="document_id"):
        client.set_acl("acme", "", users=["bob"])
    with pytest.raises(ValueError):
        client.set_groups("Not A Tenant", "bob", ["hr"])
    assert sent == []
    event = client.set_acl("acme", "hr/pay.csv", groups=["hr"])
    assert sent[0][0] == "manifold.acl" and event.signature and event.seq > 1_600_000_000_000_000
    assert _decode("acl")(sent[0][1]).groups == ["hr"]  # the applier's registry verifies what it signed


def test_vector_search_narrows_its_document_filter_to_an_allow_list_only() -> None:
    from manifold.query.executors.vector import _within_scope

    allow = ReadScope("acme", "ann", "none", allow=True, documents=frozenset({"a.md", "b.md"}))
    deny = ReadScope("acme", "bob", "tenant", allow=False, documents=frozenset({"a.md"}))
    with reading_as(allow):
        assert _within_scope("acme", None) == ["a.md", "b.md"]
        assert _within_scope("acme", ["b.md", "c.md"]) == ["b.md"]
        assert _within_scope("other", ["c.md"]) == ["c.md"]  # not this scope's tenant: unchanged
    with reading_as(deny):  # a deny-list is left to the policies (the filter stays as asked)
        assert _within_scope("acme", None) is None
        assert _within_scope("acme", ["a.md", "c.md"]) == ["a.md", "c.md"]
