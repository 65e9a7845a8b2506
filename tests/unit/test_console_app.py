"""The console's server-side rules against fakes: sign-in, roles, CSRF, tenant, redirects, audit.

The real console in a real browser over real stores is tests/e2e/test_console_browser.py.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from manifold.deploy.console import charts
from manifold.deploy.console.auth import COOKIE, Csrf, Role, role_of
from manifold.deploy.console.data import DocRow
from manifold.deploy.console.routes import _local, install
from manifold.deploy.serve.app import create_app
from manifold.query.auth import TokenVerifier, mint_token, signing_key
from manifold.query.types import Principal
from manifold.shared.config import ManifoldSettings, QuerySettings, ServerSettings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.unit


@dataclass
class FakeDryRun:
    valid: list[Any]
    refused: list[tuple[str, str]]
    digest: str = "d1"
    left_out: int = 0


@dataclass
class FakeReplay:
    replayed: list[str]
    failed: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


class FakeDlq:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def browse(self, filters: Any, *, tenant: str, include_closed: bool = False) -> list[Any]:
        self.calls.append(("browse", tenant))
        return []

    def dry_run(self, *, ids: Any, filters: Any, tenant: str, cap: int) -> FakeDryRun:
        self.calls.append(("dry_run", (tenant, list(ids))))
        return FakeDryRun(valid=[], refused=[(i, "superseded by version 3") for i in ids])

    def replay(self, digest: str, *, ids: Any, filters: Any, tenant: str, cap: int, rate: float) -> FakeReplay:
        self.calls.append(("replay", (tenant, digest, list(ids))))
        return FakeReplay(replayed=list(ids))


class FakeAudit:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def record(self, tenant_id: str, **row: Any) -> None:
        self.rows.append({"tenant": tenant_id, **row})

    def recent(self, tenant_id: str) -> list[Any]:
        return []


class FakeData:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.audit_log = FakeAudit()

    def overview(self, tenant_id: str) -> dict[str, Any]:
        self.calls.append(("overview", tenant_id))
        return {"in_flight": {"parsed": 2}, "failed_recently": {}, "letters_by_kind": {}, "states": {"active": 3},
                "lag": {"parse": 0}, "drift": {"missing": 0}, "latency": {}, "history": []}

    def documents(self, tenant_id: str, **filters: Any) -> tuple[list[DocRow], int]:
        self.calls.append(("documents", tenant_id))
        self.calls.append(("offset", filters.get("offset")))
        row = DocRow(f"{tenant_id}-doc.pdf", "failed", None, 1, "queued",
                     error={"stage": "parse", "kind": "bad_input", "reason": "cannot parse PDF <script>",
                            "failed_at": datetime.now(UTC)})
        return [row], 250

    def dlq(self, actor: str) -> FakeDlq:
        return FakeDlq(self.calls)

    def audit(self) -> FakeAudit:
        return self.audit_log

    def nudge(self) -> None:
        self.calls.append(("nudge", None))


def _settings() -> ManifoldSettings:
    return ManifoldSettings(server=ServerSettings(rate_per_minute=0, console=False),
                            query=QuerySettings(allow_dev_key=True))


def _token(s: ManifoldSettings, *scopes: str, tenant: str = "acme") -> str:
    q = s.query
    return mint_token(signing_key(s)[1], tenant_id=tenant, subject="ann", scopes=scopes,
                      issuer=q.token_issuer, audience=q.token_audience, ttl_s=600)


@pytest.fixture
def console() -> Iterator[tuple[TestClient, FakeData, ManifoldSettings]]:
    s = _settings()
    verifier = TokenVerifier.from_settings(s)
    app = create_app(s, object(), verifier)  # type: ignore[arg-type]  # the console alone needs no backend here
    data = FakeData()
    install(app, s, object(), verifier.verify, data=data)  # type: ignore[arg-type]
    with TestClient(app, base_url="http://testserver") as client:
        yield client, data, s


def _sign_in(client: TestClient, token: str) -> str:
    """Sign in; returns the CSRF token the overview page carries."""
    response = client.post("/console/login", data={"token": token, "next": "/console"}, follow_redirects=False)
    assert response.status_code == 303, response.text
    page = client.get("/console")
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert match, "a signed-in page carries the CSRF token in its forms"
    return match.group(1)


def test_an_anonymous_visitor_is_sent_to_sign_in(console) -> None:
    client, data, _ = console
    response = client.get("/console/documents", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login?next=/console/documents"
    assert data.calls == []


def test_signing_in_sets_a_strict_http_only_cookie_and_security_headers(console) -> None:
    client, _, s = console
    response = client.post("/console/login", data={"token": _token(s, "console:read")}, follow_redirects=False)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/console" in cookie
    page = client.get("/console")
    assert page.status_code == 200 and "ann · viewer · tenant acme" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_a_token_without_a_console_scope_or_a_forged_one_cannot_sign_in(console) -> None:
    client, _, s = console
    plain = client.post("/console/login", data={"token": _token(s, "query:read")})
    assert plain.status_code == 403 and "grants no console role" in plain.text
    forged = client.post("/console/login", data={"token": _token(s, "console:admin")[:-4] + "AAAA"})
    assert forged.status_code == 401 and "refused" in forged.text
    assert COOKIE not in client.cookies


def test_the_tenant_is_the_tokens_and_rendered_text_is_escaped(console) -> None:
    client, data, s = console
    _sign_in(client, _token(s, "console:read", tenant="beta"))
    page = client.get("/console/documents?tenant=acme")
    assert ("documents", "beta") in data.calls and ("documents", "acme") not in data.calls
    assert "beta-doc.pdf" in page.text
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text


def test_a_viewer_cannot_replay_even_by_posting_the_form(console) -> None:
    client, data, s = console
    csrf = _sign_in(client, _token(s, "console:read"))
    response = client.post("/console/dlq/dry-run", data={"csrf": csrf, "ids": "3:0"})
    assert response.status_code == 403 and "operator role" in response.text
    assert not [c for c in data.calls if c[0] in ("dry_run", "replay")]


def test_a_cookie_session_needs_the_csrf_token_and_a_bearer_header_does_not(console) -> None:
    client, data, s = console
    token = _token(s, "console:operate")
    _sign_in(client, token)
    assert client.post("/console/dlq/dry-run", data={"ids": "3:0"}).status_code == 403
    assert client.post("/console/dlq/dry-run", data={"ids": "3:0", "csrf": "0" * 64}).status_code == 403
    assert not [c for c in data.calls if c[0] == "dry_run"]
    client.cookies.clear()
    ok = client.post("/console/dlq/dry-run", data={"ids": "3:0"}, headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and "superseded by version 3" in ok.text
    assert ("dry_run", ("acme", ["3:0"])) in data.calls
    assert data.audit_log.rows[-1]["action"] == "replay dry run"


def test_a_replay_needs_the_typed_count_and_is_audited(console) -> None:
    client, data, s = console
    csrf = _sign_in(client, _token(s, "console:operate"))
    wrong = client.post("/console/dlq/replay", data={"csrf": csrf, "ids": "3:0", "count": "1", "confirm": "2",
                                                     "digest": "d1"})
    assert wrong.status_code == 400 and not [c for c in data.calls if c[0] == "replay"]
    done = client.post("/console/dlq/replay", data={"csrf": csrf, "ids": "3:0", "count": "1", "confirm": "1",
                                                    "digest": "d1"})
    assert done.status_code == 200 and "replayed 1" in done.text
    assert ("replay", ("acme", "d1", ["3:0"])) in data.calls and ("nudge", None) in data.calls
    row = data.audit_log.rows[-1]
    assert (row["action"], row["actor"], row["role"], row["counts"]["replayed"]) == ("replay", "ann", "operator", 1)


def test_purge_is_for_admins_only(console) -> None:
    client, _, s = console
    csrf = _sign_in(client, _token(s, "console:operate"))
    assert client.post("/console/dlq/purge", data={"csrf": csrf, "ids": "3:0"}).status_code == 403


def test_roles_order_and_scopes() -> None:
    def p(*scopes: str) -> Principal:
        return Principal(tenant_id="t", subject="u", scopes=scopes)

    assert role_of(p("query:read")) is None
    assert role_of(p("console:read")) is Role.viewer
    assert role_of(p("console:read", "console:admin")) is Role.admin
    assert Role.admin > Role.operator > Role.viewer


def test_csrf_tokens_bind_to_the_session_token() -> None:
    csrf = Csrf(b"k" * 32)
    assert csrf.valid("tok-a", csrf.token_for("tok-a"))
    assert not csrf.valid("tok-b", csrf.token_for("tok-a"))
    assert not csrf.valid("tok-a", None) and not csrf.valid("tok-a", "")


@pytest.mark.parametrize("path,expected", [("/console/dlq", "/console/dlq"), ("https://evil.example/", "/console"),
                                           ("//evil.example", "/console"), ("/console//evil", "/console"),
                                           ("/console\\evil", "/console")])
def test_sign_in_only_returns_inside_the_console(path: str, expected: str) -> None:
    assert _local(path) == expected


def test_charts_escape_labels_and_scale_bars() -> None:
    svg = str(charts.bars({"<b>": 4, "two": 2, "down": -1}))
    assert "&lt;b&gt;" in svg and "<b>" not in svg and "unknown" in svg
    widths = [int(w) for w in re.findall(r'<rect [^>]*width="(\d+)"', svg)]
    assert widths[0] == 2 * widths[1] and widths[2] == 0
    assert "polyline" in str(charts.sparkline([1, 2, 3]))


def test_the_documents_list_paginates_and_keeps_its_filters(console) -> None:
    client, data, s = console
    _sign_in(client, _token(s, "console:read"))
    page = client.get("/console/documents?state=failed&page=2")
    assert ("offset", 100) in data.calls
    assert "page 2 of 3 (250)" in page.text
    assert 'href="/console/documents?state=failed&amp;page=3"' in page.text
    assert 'href="/console/documents?state=failed&amp;page=1"' in page.text


def test_a_post_from_another_origin_or_a_non_bearer_header_gets_no_csrf_exemption(console) -> None:
    client, data, s = console
    token = _token(s, "console:operate")
    csrf = _sign_in(client, token)
    foreign = client.post("/console/dlq/dry-run", data={"ids": "3:0", "csrf": csrf},
                          headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "another site" in foreign.text
    basic = client.post("/console/dlq/dry-run", data={"ids": "3:0"}, headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert basic.status_code == 403 and "CSRF" in basic.text
    assert not [c for c in data.calls if c[0] == "dry_run"]
    login = client.post("/console/login", data={"token": token}, headers={"Origin": "https://evil.example"})
    assert login.status_code == 403
    same = client.post("/console/dlq/dry-run", data={"ids": "3:0", "csrf": csrf}, headers={"Origin": "http://testserver"})
    assert same.status_code == 200
