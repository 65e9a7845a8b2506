"""Helpers for the console's browser tests (test_console_browser.py): the system Chromium under
Playwright, an embedded `manifold serve` with the console, uploads through the HTTP API, and dead
letters written to the embedded bus the way the stage runner writes them.

Under CI=true a missing browser FAILS (tests/conftest.py `IN_CI`); elsewhere it skips.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import running_uvicorn, token

from manifold.shared.config import ManifoldSettings
from tests.conftest import IN_CI

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (.ci/run installs the `chromium` package); Playwright's own download is never used."""
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
ROLE_SCOPES = {
    "viewer": ("console:read", "query:read"),
    "operator": ("console:operate", "query:read"),
    "admin": ("console:admin", "query:read"),
}


def skip_or_fail(message: str) -> None:
    """A missing browser or service: skipped on a developer machine, a failure under CI=true."""
    if IN_CI:
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Any]:
    """The system Chromium, launched headless by Playwright; closed on exit."""
    if not os.access(CHROMIUM, os.X_OK):
        skip_or_fail(f"{CHROMIUM} not found (Debian package `chromium`; .ci/run installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        skip_or_fail(f"playwright is not installed ({err}; `pip install -e .[test]`)")
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        except Exception as err:  # noqa: BLE001 - a browser that does not start is reported, not raised
            skip_or_fail(f"{CHROMIUM} does not start under Playwright: {err}")
        try:
            yield browser
        finally:
            browser.close()


# -- the server -------------------------------------------------------------------------------------
@dataclass
class Console:
    """One embedded `manifold serve` with the console, and the tenants and tokens of a test module."""

    url: str
    settings: ManifoldSettings
    backend: Any
    tenant: str
    other: str
    """A second tenant, with an operator of its own."""
    tokens: dict[str, str] = field(default_factory=dict)
    """viewer / operator / admin of `tenant`, `other` (operator of `other`), `writer` (documents:write of
    `tenant`), `no-console` (query:read of `tenant` only)."""
    subjects: dict[str, str] = field(default_factory=dict)

    def bearer(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def embedded_settings(base: ManifoldSettings, root: Path) -> ManifoldSettings:
    """`base` with the embedded profile on the stack's PostgreSQL, state in `root`, the console on,
    few retries and a generous rate limit (a browser loads pages quickly)."""
    from manifold.shared.config import EmbeddedSettings, IngestSettings, ServerSettings

    return base.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=root),
                                   "ingest": IngestSettings(metrics_port=0, max_attempts=2),
                                   "server": ServerSettings(rate_per_minute=6000, rate_burst=1000, console=True)})


@contextmanager
def console_server(settings: ManifoldSettings, tenant: str, other: str) -> Iterator[Console]:
    """`manifold serve` (embedded, in-process backend) on a loopback port, with tokens minted."""
    from manifold.deploy.serve.backend import InProcessBackend
    from manifold.deploy.serve.run import build

    app, backend = build(settings, InProcessBackend.from_settings(settings))
    subjects = {"viewer": "viola-viewer", "operator": "otto-operator", "admin": "ada-admin",
                "other": "oscar-other-tenant", "writer": "wes-writer", "no-console": "nina-no-console"}
    tokens = {role: token(settings, tenant, scopes=scopes, ttl_s=3600, subject=subjects[role])
              for role, scopes in ROLE_SCOPES.items()}
    tokens["other"] = token(settings, other, scopes=ROLE_SCOPES["operator"], ttl_s=3600, subject=subjects["other"])
    tokens["writer"] = token(settings, tenant, scopes=("documents:write", "query:read"), ttl_s=3600,
                             subject=subjects["writer"])
    tokens["no-console"] = token(settings, tenant, scopes=("query:read",), ttl_s=3600, subject=subjects["no-console"])
    try:
        with running_uvicorn(app) as url:
            yield Console(url, settings, backend, tenant, other, tokens, subjects)
    finally:
        backend.close()


# -- documents through the HTTP API ------------------------------------------------------------------
def upload(console: Console, document_id: str, content: bytes, who: str = "writer",
           media_type: str | None = None) -> dict[str, Any]:
    """`POST /v1/documents` (multipart) as `who`; the 202 body."""
    data = {"document_id": document_id} | ({"media_type": media_type} if media_type else {})
    r = httpx.post(f"{console.url}/v1/documents", headers=console.bearer(who), data=data,
                   files={"file": (document_id.rsplit("/", 1)[-1], content)}, timeout=60)
    assert r.status_code == 202, r.text
    return r.json()  # type: ignore[no-any-return]


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = 180, every_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def api_state(console: Console, document_id: str, who: str = "writer") -> str | None:
    """The document's state from `GET /v1/documents` (None: not listed)."""
    r = httpx.get(f"{console.url}/v1/documents", headers=console.bearer(who), timeout=30)
    assert r.status_code == 200, r.text
    return next((d["state"] for d in r.json()["documents"] if d["document_id"] == document_id), None)


def wait_active(console: Console, document_id: str, timeout_s: float = 180) -> None:
    wait_until(f"{document_id} to be active", lambda: api_state(console, document_id) == "active", timeout_s)


def console_lists_failed(console: Console, document_id: str) -> bool:
    """The console's documents page (bearer header, no browser) lists `document_id` as failed."""
    r = httpx.get(f"{console.url}/console/documents", params={"state": "failed"}, headers=console.bearer("operator"),
                  timeout=30)
    assert r.status_code == 200, r.text
    from markupsafe import escape

    return f'data-doc="{escape(document_id)}"' in r.text  # as the template writes the attribute


# -- dead letters, written the way the stage runner writes them ----------------------------------------
def signed_upsert(settings: ManifoldSettings, tenant: str, document_id: str, content: bytes, media_type: str,
                  *, reserve: bool = True, signer: Callable[[Any], Any] | None = None) -> Any:
    """A `DocumentUpserted` built and signed like `ingest.upstream.UpstreamClient` builds it: the
    version reserved and confirmed in the version ledger (unless `reserve` is false: version 1),
    signed with the producer key the embedded settings use (`signer_from_settings`)."""
    from manifold.shared.envelope_auth import signer_from_settings
    from manifold.shared.events import upserted
    from manifold.shared.stores.ledger import PostgresVersionLedger

    version = 1
    if reserve:
        ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())
        reserved = ledger.reserve(tenant, document_id, hashlib.sha256(content).hexdigest())
        assert reserved is not None, f"{tenant}/{document_id} was already published"
        ledger.confirm(tenant, document_id, reserved)
        version = reserved
    event = upserted(tenant, document_id, version, content, media_type, {"source_path": document_id})
    sign = signer if signer is not None else signer_from_settings(settings)
    return sign(event)


def dead_letter_of(settings: ManifoldSettings, event: Any, *, value: bytes | None = None, stage: str = "parse",
                   kind: str = "exhausted", error: str | None = None, attempts: int = 2) -> Any:
    """The `DeadLetter` the `stage` runner writes for `event` consumed from `manifold.documents`
    (`ingest.runner.StageRunner._dead_letter`): original key and value, where it was read, why."""
    from manifold.shared import topics
    from manifold.shared.dlq import DeadLetter, b64
    from manifold.shared.log_bus import partition_for

    raw = value if value is not None else event.model_dump_json().encode()
    partition = partition_for(event.key, settings.embedded.partitions)
    return DeadLetter(stage=stage, error_kind=kind,  # type: ignore[arg-type]  # one of ErrorKind, checked by pydantic
                      error=error or ("Transient: staging store unavailable: connection refused "
                                      f"(after {attempts} attempts)"),
                      attempts=attempts, source_topic=topics.DOCUMENTS, source_partition=partition,
                      source_offset=_end_offset(settings, topics.DOCUMENTS, partition),
                      key_b64=b64(event.key), value_b64=b64(raw) or "", tenant_id=event.tenant_id,
                      document_id=event.document_id, version=event.version)


def _end_offset(settings: ManifoldSettings, topic: str, partition: int) -> int:
    from manifold.deploy.compose.embedded import open_bus

    bus = open_bus(settings)
    try:
        return int(bus.end_offsets(topic).get(partition, 0))
    finally:
        bus.close()


def append_dead_letter(settings: ManifoldSettings, letter: Any) -> str:
    """Append `letter` to the embedded bus's `manifold.dlq` (key, value and `x-manifold-*` headers,
    as the runner sends it); its DLQ entry id (`<partition>:<offset>`)."""
    from manifold.deploy.compose.embedded import open_bus
    from manifold.shared import topics
    from manifold.shared.log_bus import Record

    bus = open_bus(settings)
    try:
        [placed] = bus.append([Record(topics.DLQ, letter.key, letter.model_dump_json().encode(), letter.headers())])
    finally:
        bus.close()
    return f"{placed.partition()}:{placed.offset()}"


# -- the browser ---------------------------------------------------------------------------------------
@contextmanager
def signed_in(browser: Any, console: Console, who: str) -> Iterator[Any]:
    """A fresh browser context signed in as `who` through the sign-in form; yields its page."""
    context = browser.new_context(base_url=console.url)
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        page.goto("/console/login")
        page.fill("#token", console.tokens[who])
        page.click("#sign-in")
        page.wait_for_url(f"{console.url}/console", timeout=30_000)
        yield page
    finally:
        context.close()


def csrf_of(page: Any) -> str:
    """The CSRF token the signed-in page carries in its forms."""
    value = page.locator("input[name=csrf]").first.get_attribute("value")
    assert value, "the page carries no CSRF token"
    return str(value)


def row_texts(page: Any, selector: str) -> list[str]:
    return [" ".join(t.split()) for t in page.locator(selector).all_inner_texts()]
