"""The HTTP access routes against a fake backend: `PUT/GET /v1/documents/{id}/acl` and
`PUT/GET /v1/principals/{user}/groups` need their scopes, take the tenant from the token only,
turn bad input into 400/422 problems and outages into 503, and do not shadow the document route."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from manifold.deploy.serve.app import create_app
from manifold.deploy.serve.models import DocumentStatus
from manifold.query.auth import TokenVerifier, mint_token, signing_key
from manifold.query.types import Principal
from manifold.shared.acl_events import DocumentAclSet, GroupsSet
from manifold.shared.config import ManifoldSettings, QuerySettings, ServerSettings
from manifold.shared.errors import Transient
from manifold.shared.stores.acl_pg import AclRow

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.unit
ALL = ("query:read", "documents:write", "acl:write", "acl:read")


class FakeBackend:
    profile = "fake"

    def __init__(self) -> None:
        self.acls: dict[tuple[str, str], AclRow] = {}
        self.groups: dict[tuple[str, str], tuple[str, ...]] = {}
        self.sent: list[Any] = []
        self.fail: Exception | None = None

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        return [DocumentStatus(document_id="dir/acl", active_version=1, state="active", versions={1: "active"})]

    def set_acl(self, tenant_id: str, document_id: str, *, users: list[str], groups: list[str], public: bool,
                seq: int | None) -> DocumentAclSet:
        if self.fail is not None:
            raise self.fail
        event = DocumentAclSet(tenant_id=tenant_id, document_id=document_id, users=users, groups=groups,
                               public=public, seq=seq or 99)
        self.sent.append(event)
        return event

    def set_groups(self, tenant_id: str, user_id: str, groups: list[str], *, seq: int | None) -> GroupsSet:
        if self.fail is not None:
            raise self.fail
        event = GroupsSet(tenant_id=tenant_id, user_id=user_id, groups=groups, seq=seq or 98)
        self.sent.append(event)
        return event

    def acl(self, tenant_id: str, document_id: str) -> AclRow | None:
        if self.fail is not None:
            raise self.fail
        return self.acls.get((tenant_id, document_id))

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        return self.groups.get((tenant_id, user_id))

    def readiness(self) -> dict[str, str]:
        return {"fake": "ok"}

    def close(self) -> None:
        pass


@pytest.fixture
def app() -> Iterator[tuple[TestClient, FakeBackend, ManifoldSettings]]:
    s = ManifoldSettings(server=ServerSettings(rate_per_minute=0),  # type: ignore[call-arg]
                         query=QuerySettings(allow_dev_key=True, acl_tenant_defaults={"fenced": "none"}))  # type: ignore[call-arg]
    backend = FakeBackend()
    with TestClient(create_app(s, backend, TokenVerifier.from_settings(s))) as client:  # type: ignore[arg-type]
        yield client, backend, s


def _auth(s: ManifoldSettings, tenant: str = "acme", scopes: tuple[str, ...] = ALL) -> dict[str, str]:
    q = s.query
    token = mint_token(signing_key(s)[1], tenant_id=tenant, subject="operator", scopes=scopes,
                       issuer=q.token_issuer, audience=q.token_audience, ttl_s=600)
    return {"Authorization": f"Bearer {token}"}


def test_put_acl_publishes_for_the_tokens_tenant(app) -> None:
    client, backend, s = app
    r = client.put("/v1/documents/dir/a.txt/acl", json={"users": ["bob", "alice"], "groups": ["hr"], "seq": 5},
                   headers=_auth(s))
    assert r.status_code == 202, r.text
    assert r.json() == {"document_id": "dir/a.txt", "seq": 5, "public": False, "users": ["alice", "bob"],
                        "groups": ["hr"], "outcome": "published"}
    assert backend.sent[-1].tenant_id == "acme"
    r = client.put("/v1/documents/x/acl", json={}, headers=_auth(s))  # no readers: nobody
    assert r.status_code == 202 and r.json()["users"] == [] and r.json()["public"] is False


@pytest.mark.parametrize(("method", "path", "scope"), [
    ("put", "/v1/documents/a.txt/acl", "acl:write"), ("get", "/v1/documents/a.txt/acl", "acl:read"),
    ("put", "/v1/principals/alice/groups", "acl:write"), ("get", "/v1/principals/alice/groups", "acl:read")])
def test_each_route_needs_its_scope(app, method: str, path: str, scope: str) -> None:
    client, backend, s = app
    others = tuple(x for x in ALL if x != scope)
    body = {"json": {"groups": []}} if method == "put" else {}
    r = getattr(client, method)(path, headers=_auth(s, scopes=others), **body)
    assert r.status_code == 403 and scope in r.json()["detail"]
    assert r.headers["content-type"].startswith("application/problem+json")
    assert getattr(client, method)(path, **body).status_code == 401
    assert backend.sent == []


@pytest.mark.parametrize("body", [{"users": ["a"], "tenant_id": "other"}, {"groups": ["g"], "tenant": "x"}])
def test_a_body_naming_a_tenant_is_400(app, body: dict[str, Any]) -> None:
    client, backend, s = app
    path = "/v1/documents/a.txt/acl" if "users" in body else "/v1/principals/alice/groups"
    r = client.put(path, json=body, headers=_auth(s))
    assert r.status_code == 400 and r.json()["type"].endswith("tenant-in-request")
    assert client.get("/v1/documents/a.txt/acl?tenant=other", headers=_auth(s)).status_code == 400
    assert backend.sent == []


@pytest.mark.parametrize("body", [{"users": ["a\x00"]}, {"users": [""]}, {"groups": ["g" * 257]}, {"seq": 0},
                                  {"users": "alice"}, {"readers": ["a"]}])
def test_bad_readers_are_422(app, body: dict[str, Any]) -> None:
    client, backend, s = app
    r = client.put("/v1/documents/a.txt/acl", json=body, headers=_auth(s))
    assert r.status_code == 422 and r.json()["type"].endswith("invalid-request")
    assert backend.sent == []


def test_backend_failures_are_problems(app) -> None:
    client, backend, s = app
    backend.fail = ValueError("document_id: too long")
    assert client.put("/v1/documents/a.txt/acl", json={"public": True}, headers=_auth(s)).status_code == 422
    backend.fail = Transient("kafka down")
    r = client.put("/v1/principals/alice/groups", json={"groups": ["g"]}, headers=_auth(s))
    assert r.status_code == 503 and "Retry-After" in r.headers
    assert client.get("/v1/documents/a.txt/acl", headers=_auth(s)).status_code == 503


def test_get_acl_shows_the_applied_acl_or_the_tenant_default(app) -> None:
    client, backend, s = app
    at = datetime(2026, 1, 2, tzinfo=UTC)
    backend.acls[("acme", "dir/a.txt")] = AclRow("dir/a.txt", 7, True, ("alice",), ("hr",), at)
    body = client.get("/v1/documents/dir/a.txt/acl", headers=_auth(s)).json()
    assert (body["acl"], body["seq"], body["public"], body["users"], body["groups"]) == ("set", 7, True, ["alice"],
                                                                                        ["hr"])
    body = client.get("/v1/documents/other.txt/acl", headers=_auth(s)).json()
    assert (body["acl"], body["default"], body["users"]) == ("default", "tenant", None)
    assert client.get("/v1/documents/dir/a.txt/acl", headers=_auth(s, "fenced")).json()["default"] == "none"


def test_groups_routes(app) -> None:
    client, backend, s = app
    r = client.put("/v1/principals/alice/groups", json={"groups": []}, headers=_auth(s))
    assert r.status_code == 202 and r.json() == {"user_id": "alice", "seq": 98, "groups": [], "outcome": "published"}
    assert client.put("/v1/principals/alice/groups", json={}, headers=_auth(s)).status_code == 422
    assert client.get("/v1/principals/alice/groups", headers=_auth(s)).json() == {
        "user_id": "alice", "groups": [], "recorded": False}
    backend.groups[("acme", "alice")] = ("eng", "hr")
    assert client.get("/v1/principals/alice/groups", headers=_auth(s)).json()["groups"] == ["eng", "hr"]


def test_the_acl_route_wins_over_the_document_route(app) -> None:
    """Documented limitation (docs/access-control.md): `GET /v1/documents/dir/acl` is the ACL of
    document `dir`; a document whose id ends in `/acl` is listed by `GET /v1/documents`."""
    client, _, s = app
    r = client.get("/v1/documents/dir/acl", headers=_auth(s))
    assert r.status_code == 200 and r.json()["document_id"] == "dir" and r.json()["acl"] == "default"
    r = client.get("/v1/documents/dir/acl/acl", headers=_auth(s))  # the ACL of document 'dir/acl'
    assert r.status_code == 200 and r.json()["document_id"] == "dir/acl"
    assert client.get("/v1/documents/a.txt", headers=_auth(s)).status_code == 404  # documents still routed
    assert "dir/acl" in {d["document_id"] for d in client.get("/v1/documents", headers=_auth(s)).json()["documents"]}


def test_openapi_lists_the_access_routes(app) -> None:
    client, _, _ = app
    paths = client.get("/openapi.json").json()["paths"]
    assert {"put", "get"} <= set(paths["/v1/documents/{document_id}/acl"])
    assert {"put", "get"} <= set(paths["/v1/principals/{user_id}/groups"])


def test_a_missing_producer_key_or_an_unreachable_broker_is_503(app) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from manifold.shared.envelope_auth import NoProducerKey

    client, backend, s = app
    backend.fail = NoProducerKey("no producer key")
    r = client.put("/v1/documents/a.txt/acl", json={"public": True}, headers=_auth(s))
    assert r.status_code == 503 and r.json()["type"].endswith("no-producer-key")
    backend.fail = KafkaException(KafkaError(KafkaError._TRANSPORT))
    assert client.put("/v1/documents/a.txt/acl", json={"public": True}, headers=_auth(s)).status_code == 503
