"""The `manifold serve` app against a fake backend: auth, tenant policy, limits, problem documents.

The real backends over the real stack are exercised in tests/e2e/test_serve_http.py.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from manifold.deploy.serve.app import create_app
from manifold.deploy.serve.models import DocumentStatus
from manifold.deploy.serve.problems import RateLimiter
from manifold.query.auth import TokenVerifier, mint_token, signing_key
from manifold.query.request_client import QueryTimeout
from manifold.query.types import Principal, QueryReply, QueryRequest, Trace
from manifold.shared.config import ManifoldSettings, QuerySettings, ServerSettings
from manifold.shared.errors import Transient

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's notice about httpx vs httpx2
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.unit
PROBLEM = "application/problem+json"


class FakeBackend:
    profile = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[QueryRequest, Principal, str]] = []
        self.published: list[tuple[str, str, bytes, str]] = []
        self.fail: Exception | None = None

    def answer(self, request: QueryRequest, principal: Principal, token: str) -> QueryReply:
        if self.fail is not None:
            raise self.fail
        self.calls.append((request, principal, token))
        return QueryReply(request_id=request.request_id, status="answered", answer=f"for {principal.tenant_id}",
                          trace=Trace(request_id=request.request_id))

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        return [DocumentStatus(document_id=f"{principal.tenant_id}/a.txt", active_version=1, state="active",
                               versions={1: "active"})]

    def publish(self, tenant_id: str, document_id: str, content: bytes, media_type: str) -> int | None:
        self.published.append((tenant_id, document_id, content, media_type))
        return 1

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        return None

    def readiness(self) -> dict[str, str]:
        return {"fake": "ok"}

    def close(self) -> None:
        pass


def _settings(**server: object) -> ManifoldSettings:
    query = QuerySettings(max_deadline_ms=5000, allow_dev_key=True)
    return ManifoldSettings(server=ServerSettings(**server), query=query)  # type: ignore[arg-type]  # object kwargs


def _token(s: ManifoldSettings, tenant: str = "acme", *, scopes: tuple[str, ...] = ("query:read", "documents:write"),
           now: float | None = None, key: str | None = None) -> str:
    q = s.query
    return mint_token(key or signing_key(s)[1], tenant_id=tenant, subject="unit", scopes=scopes,
                      issuer=q.token_issuer, audience=q.token_audience, ttl_s=600, now=now)


@pytest.fixture
def app() -> Iterator[tuple[TestClient, FakeBackend, ManifoldSettings]]:
    s = _settings(rate_per_minute=0)
    backend = FakeBackend()
    with TestClient(create_app(s, backend, TokenVerifier.from_settings(s))) as client:
        yield client, backend, s


def _auth(s: ManifoldSettings, **kw: object) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(s, **kw)}"}  # type: ignore[arg-type]


def test_the_tenant_and_token_reach_the_backend_and_the_deadline_is_capped(app) -> None:
    client, backend, s = app
    headers = _auth(s, tenant="acme")
    r = client.post("/v1/ask", json={"question": "q", "deadline_ms": 600_000}, headers=headers)
    assert r.status_code == 200 and r.json()["answer"] == "for acme"
    request, principal, token = backend.calls[-1]
    assert principal.tenant_id == "acme" and headers["Authorization"].endswith(token)
    assert request.deadline <= datetime.now(UTC) + timedelta(milliseconds=5000)


@pytest.mark.parametrize("headers, reason", [
    ({}, "send header"),
    ({"Authorization": "Bearer not.a.jwt"}, "malformed"),
    ({"Authorization": "Token abc"}, "send header"),
])
def test_without_a_valid_token_the_answer_is_a_401_problem(app, headers: dict[str, str], reason: str) -> None:
    client, backend, _ = app
    r = client.post("/v1/ask", json={"question": "q"}, headers=headers)
    assert r.status_code == 401 and r.headers["content-type"] == PROBLEM
    assert r.headers["www-authenticate"].startswith("Bearer")
    body = r.json()
    assert set(body) == {"type", "title", "status", "detail", "instance"}
    assert body["status"] == 401 and reason in body["detail"] and body["type"].startswith("urn:manifold:problem:")
    assert not backend.calls


def test_expired_and_foreign_key_tokens_are_401(app) -> None:
    client, _, s = app
    expired = client.get("/v1/documents", headers=_auth(s, now=time.time() - 3600))
    forged = client.get("/v1/documents", headers=_auth(s, key="someone-else-s-signing-key-0123456789"))
    assert (expired.status_code, forged.status_code) == (401, 401)
    assert "expired" in expired.json()["detail"] and "bad signature" in forged.json()["detail"]


def test_a_missing_scope_is_403(app) -> None:
    client, backend, s = app
    r = client.post("/v1/documents", json={"document_id": "a.txt", "content": "x"},
                    headers=_auth(s, scopes=("query:read",)))
    assert r.status_code == 403 and not backend.published


@pytest.mark.parametrize("body", [
    {"question": "q", "tenant": "other"},
    {"question": "q", "Tenant_ID": "other"},
    {"plan": {"steps": [{"id": "s", "params": {"nested": [{"org_id": "x"}]}}]}},
])
def test_naming_a_tenant_anywhere_in_the_body_is_400(app, body: dict) -> None:
    client, backend, s = app
    path = "/v1/plan" if "plan" in body else "/v1/ask"
    r = client.post(path, json=body, headers=_auth(s))
    assert r.status_code == 400 and r.json()["type"].endswith("tenant-in-request"), r.text
    assert not backend.calls


def test_a_query_string_or_a_form_naming_a_tenant_is_400(app) -> None:
    client, backend, s = app
    assert client.get("/v1/documents?tenant_id=other", headers=_auth(s)).status_code == 400
    r = client.post("/v1/documents", files={"file": ("a.txt", b"x")}, data={"tenant": "other"}, headers=_auth(s))
    assert r.status_code == 400 and not backend.published


def test_bodies_over_the_limit_are_413_whether_declared_or_streamed(app) -> None:
    client, backend, s = app
    limit = s.server.max_request_bytes
    r = client.post("/v1/ask", json={"question": "x" * limit}, headers=_auth(s))
    assert r.status_code == 413 and r.headers["content-type"] == PROBLEM

    def chunks() -> Iterator[bytes]:
        yield b'{"question": "'
        yield b"x" * limit
        yield b'"}'

    r = client.post("/v1/ask", content=chunks(), headers={**_auth(s), "content-type": "application/json"})
    assert r.status_code == 413 and not backend.calls


def test_uploads_may_be_larger_than_json_bodies(app) -> None:
    client, backend, s = app
    content = b"line of text\n" * (s.server.max_request_bytes // 10)
    r = client.post("/v1/documents", files={"file": ("big.txt", content)}, headers=_auth(s))
    assert r.status_code == 202, r.text
    assert backend.published[-1] == ("acme", "big.txt", content, "text/plain")


def test_an_upload_of_unknown_type_is_415_and_bad_json_is_a_problem(app) -> None:
    client, _, s = app
    r = client.post("/v1/documents", json={"document_id": "blob", "content_base64": "AAEC"}, headers=_auth(s))
    assert r.status_code == 415
    r = client.post("/v1/documents", content=b"{not json", headers={**_auth(s), "content-type": "application/json"})
    assert r.status_code == 400 and r.headers["content-type"] == PROBLEM
    r = client.post("/v1/documents", json={"document_id": "a.txt"}, headers=_auth(s))
    assert r.status_code == 422 and "exactly one of content" in r.json()["detail"]


def test_json_nested_past_the_recursion_limit_is_a_400_on_every_json_route(app) -> None:
    client, backend, s = app
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/v1/documents", "/v1/ask", "/v1/plan"):
        r = client.post(path, content=deep, headers={**_auth(s), "content-type": "application/json"})
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
    assert not backend.published and not backend.calls


def test_path_shaped_document_ids_are_refused_on_upload_and_delete(app) -> None:
    client, backend, s = app
    before = len(backend.published)
    for doc in ("../../etc/passwd", "/etc/passwd", "a/../../b.txt", "a//b.txt"):
        r = client.post("/v1/documents", json={"document_id": doc, "content": "x"}, headers=_auth(s))
        assert r.status_code == 422 and "path" in r.json()["detail"], (doc, r.text)
        r = client.post("/v1/documents", files={"file": (doc, b"x")}, headers=_auth(s))
        assert r.status_code == 422, (doc, r.text)
    r = client.delete("/v1/documents/a/../../b.txt", headers=_auth(s))
    assert r.status_code in (404, 422)  # the client may normalise the URL itself; never a delete of b.txt
    r = client.delete("/v1/documents/a//b.txt", headers=_auth(s))
    assert r.status_code == 422
    assert len(backend.published) == before


def test_transport_failures_are_504_and_503(app) -> None:
    client, backend, s = app
    backend.fail = QueryTimeout("q-1", 2.0)
    assert client.post("/v1/ask", json={"question": "q"}, headers=_auth(s)).status_code == 504
    backend.fail = Transient("broker down")
    r = client.post("/v1/ask", json={"question": "q"}, headers=_auth(s))
    assert r.status_code == 503 and r.headers["retry-after"]


def test_an_invalid_body_is_a_422_problem_listing_the_errors(app) -> None:
    client, _, s = app
    r = client.post("/v1/ask", json={"question": "q", "deadline_ms": 0, "colour": "red"}, headers=_auth(s))
    assert r.status_code == 422
    locs = {tuple(e["loc"]) for e in r.json()["errors"]}
    assert ("body", "deadline_ms") in locs and ("body", "colour") in locs


def test_the_openapi_document_uses_the_kafka_reply_model(app) -> None:
    client, _, _ = app
    spec = client.get("/openapi.json").json()
    ok = spec["paths"]["/v1/plan"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/QueryReply"}
    status = spec["components"]["schemas"]["QueryReply"]["properties"]["status"]
    assert set(status["enum"]) == {"answered", "partial", "clarify", "refused", "no_answer", "error"}
    upload = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    assert set(upload) == {"application/json", "multipart/form-data"}


def test_cors_is_off_unless_configured() -> None:
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    for origins, allowed in (((), False), (("https://app.example",), True)):
        s = _settings(cors_origins=origins)
        with TestClient(create_app(s, FakeBackend(), TokenVerifier.from_settings(s))) as client:
            r = client.options("/v1/ask", headers=preflight)
            assert ("access-control-allow-origin" in r.headers) is allowed


def test_the_rate_limit_answers_429_with_retry_after() -> None:
    s = _settings(rate_per_minute=60, rate_burst=2)
    with TestClient(create_app(s, FakeBackend(), TokenVerifier.from_settings(s))) as client:
        headers = _auth(s)
        codes = [client.get("/v1/documents", headers=headers).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        r = client.get("/v1/documents", headers=headers)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        other = client.get("/v1/documents", headers=_auth(s, tenant="other"))
        assert other.status_code == 200  # buckets are per principal


def test_token_buckets_refill_at_the_configured_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(60, 2, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(2)] == [0.0, 0.0]
    assert limiter.take("a") == pytest.approx(1.0)
    now[0] += 1.0
    assert limiter.take("a") == 0.0
    assert RateLimiter(0, 1).take("a") == 0.0  # disabled


def test_mcp_needs_a_valid_token_too(app) -> None:
    client, _, s = app
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert client.post("/mcp", json=call).status_code == 401
    forged = client.post("/mcp", json=call, headers=_auth(s, key="someone-else-s-signing-key-0123456789"))
    assert forged.status_code == 401 and forged.headers["content-type"] == PROBLEM


def test_health_and_readiness(app) -> None:
    client, _, _ = app
    assert client.get("/healthz").json() == {"status": "ok", "profile": "fake"}
    assert client.get("/readyz").json() == {"ready": True, "checks": {"fake": "ok"}}
    assert "manifold_http_requests_total" in client.get("/metrics").text
