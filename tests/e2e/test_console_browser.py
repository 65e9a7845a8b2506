"""The operator console (`/console` on `manifold serve`) in a real browser: Debian's Chromium driven
by Playwright against a real uvicorn serving the embedded profile on the stack's PostgreSQL.

One server, one browser and two fresh tenants (`con-<run>`, `con2-<run>`) per module. Documents
are published through the HTTP API and run through the in-process pipeline; the dead letter that
is replayed is written to the embedded bus's `manifold.dlq` exactly as the stage runner writes one
after a transient failure (a signed upstream event as its original). Every assertion is on what
the page shows, or on the server's answer to a request the page's own session makes.

Under CI=true a missing browser or service fails (tests/conftest.py).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlparse

import httpx
import pytest
from console_support import (
    Console,
    api_state,
    append_dead_letter,
    chromium,
    console_lists_failed,
    console_server,
    csrf_of,
    dead_letter_of,
    embedded_settings,
    row_texts,
    signed_in,
    signed_upsert,
    upload,
    wait_active,
    wait_until,
)
from serve_support import token

from manifold.shared.config import ManifoldSettings

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

GOOD = "notes/forklift-charging.md"
GOOD_TEXT = (b"# Forklift charging\n\nForklift batteries are charged in bay 7 by the night shift every Tuesday. "
             b"The charging bay has its own eyewash station.\n")
BROKEN = "scans/broken-delivery-note.pdf"
REPLAYED = "notes/dock-schedule.md"
REPLAYED_TEXT = b"# Dock schedule\n\nDock door 3 receives refrigerated deliveries between 05:00 and 07:00.\n"


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def console(settings: ManifoldSettings, pg_conninfo: str, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[Console]:
    run = uuid.uuid4().hex[:6]
    s = embedded_settings(settings, tmp_path_factory.mktemp("console-embedded"))
    with console_server(s, f"con-{run}", f"con2-{run}") as served:
        yield served


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def seeded(console: Console) -> Console:
    """A good Markdown document (active) and a corrupt PDF (dead-lettered at parse), both published
    through `POST /v1/documents`."""
    assert upload(console, GOOD, GOOD_TEXT)["outcome"] == "published"
    assert upload(console, BROKEN, b"%PDF-1.4 garbage", media_type="application/pdf")["outcome"] == "published"
    wait_active(console, GOOD, timeout_s=300)
    wait_until(f"{BROKEN} to be listed as failed", lambda: console_lists_failed(console, BROKEN), timeout_s=180)
    return console


def _letter_id(page: Any, document_id: str) -> str:
    """The DLQ entry id of the open letter of `document_id` on the dead letters page."""
    page.goto("/console/dlq")
    row = page.locator(f'tr.letter[data-doc="{document_id}"]')
    assert row.count() == 1, row_texts(page, "tr.letter")
    return str(row.get_attribute("data-id"))


# -- 1. sign in, session cookie, sign out -----------------------------------------------------------------
def test_sign_in_shows_the_overview_and_the_session_cookie_is_httponly_and_strict(browser: Any,
                                                                                   console: Console) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(base_url=console.url)
    try:
        page = context.new_page()
        # Script errors and CSP violations (Chromium logs them as console errors), and failed responses
        # other than the refused sign-ins below ("Failed to load resource" lines are the responses again,
        # plus the browser's own /favicon.ico request, which is no page's).
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("response", lambda r: problems.append(f"HTTP {r.status} {r.request.method} {r.url}")
                if r.status >= 400 and not (r.request.method == "POST" and r.url.endswith("/console/login"))
                else None)
        page.goto("/console")
        assert urlparse(page.url).path == "/console/login", page.url
        assert "next=/console" in page.url
        expect(page.locator("h1")).to_have_text("Sign in")
        assert page.locator("#sign-out").count() == 0

        page.fill("#token", console.tokens["no-console"])  # query:read only: no console role
        page.click("#sign-in")
        expect(page.locator("#login-error")).to_contain_text("grants no console role")
        assert urlparse(page.url).path == "/console/login"
        assert not [c for c in context.cookies() if c["name"] == "manifold_console"]

        page.fill("#token", "not.a-token")
        page.click("#sign-in")
        expect(page.locator("#login-error")).to_contain_text("That token was refused")

        page.fill("#token", console.tokens["operator"])
        page.click("#sign-in")
        page.wait_for_url(f"{console.url}/console")
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator("#who")).to_contain_text(
            f"{console.subjects['operator']} · operator · tenant {console.tenant}")
        expect(page.locator("#overview-error")).to_have_count(0)
        cards = set(page.locator("#overview .card h2").all_inner_texts())
        assert {"In flight by stage", "Failed in the last hour", "Open dead letters by kind", "Consumer lag",
                "Versions by state", "Drift", "Publish latency", "Trend"} <= cards, cards
        expect(page.locator("#nav-audit")).to_be_visible()  # an operator may read the audit log

        [cookie] = [c for c in context.cookies() if c["name"] == "manifold_console"]
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict", cookie
        assert cookie["path"] == "/console" and cookie["value"] == console.tokens["operator"]
        assert "manifold_console" not in page.evaluate("document.cookie")  # HttpOnly: no script reads it

        with page.expect_response(lambda r: r.url.endswith("/console/overview/panel"), timeout=15_000) as panel:
            pass  # the overview refreshes itself (htmx, every 5 s) with the session cookie
        assert panel.value.status == 200
        expect(page.locator("#overview .card")).to_have_count(len(cards))
        expect(page.locator("#overview-error")).to_have_count(0)

        assert not problems, problems

        page.click("#sign-out")
        page.wait_for_url(re.compile(r".*/console/login$"))
        assert not [c for c in context.cookies() if c["name"] == "manifold_console"]
        page.goto("/console")
        assert urlparse(page.url).path == "/console/login", page.url
        expect(page.locator("#who")).to_have_count(0)
    finally:
        context.close()


# -- 2. a document that failed parsing -------------------------------------------------------------------
def test_a_document_that_failed_parsing_is_listed_with_its_stage_and_reason(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "operator") as page:
        page.click("#nav-documents")
        page.select_option("#filter-state", "failed")
        page.click("#filter-apply")
        page.wait_for_url(re.compile(r".*state=failed.*"))
        for reloaded in (False, True):
            if reloaded:
                page.reload()
            row = page.locator(f'tr.doc[data-doc="{BROKEN}"]')
            expect(row).to_have_count(1)
            expect(row.locator(".state")).to_have_text("failed")
            reason = row.locator("td.reason")
            expect(reason.locator(".kind")).to_have_text("bad_input")
            expect(reason).to_contain_text("at parse:")
            expect(reason).to_contain_text("PDF")
            expect(row.locator('.chip.bad[title="parsed"]')).to_have_count(1)  # the step parse did not reach
            expect(page.locator(f'tr.doc[data-doc="{GOOD}"]')).to_have_count(0)  # filtered out: not failed
            expect(page.locator("#filter-state")).to_have_value("failed")

        page.select_option("#filter-state", "active")
        page.click("#filter-apply")
        page.wait_for_url(re.compile(r".*state=active.*"))
        good = page.locator(f'tr.doc[data-doc="{GOOD}"]')
        expect(good.locator(".state")).to_have_text("active")
        expect(good.locator("td.num")).to_have_text("1")
        expect(page.locator(f'tr.doc[data-doc="{BROKEN}"]')).to_have_count(0)

        page.select_option("#filter-state", "")
        page.click("#filter-apply")
        expect(page.locator(f'tr.doc[data-doc="{BROKEN}"] .state')).to_have_text("failed")
        expect(page.locator(f'tr.doc[data-doc="{GOOD}"] .state')).to_have_text("active")


# -- 3. replay a dead letter ----------------------------------------------------------------------------
def _dry_run(page: Any, entry_ids: list[str]) -> None:
    page.goto("/console/dlq")
    for entry in entry_ids:
        page.locator(f'tr.letter[data-id="{entry}"] input.pick').check()
    page.click("#dry-run")
    page.wait_for_url(re.compile(r".*/console/dlq/dry-run$"))


def test_replay_a_dead_letter_through_dry_run_and_confirmation(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    s = seeded.settings
    event = signed_upsert(s, seeded.tenant, REPLAYED, REPLAYED_TEXT, "text/markdown")
    entry = append_dead_letter(s, dead_letter_of(s, event))  # parse gave up after a transient failure

    with signed_in(browser, seeded, "operator") as page:
        page.goto(f"/console/documents?q={REPLAYED}")  # published upstream, dead-lettered at parse
        before = page.locator(f'tr.doc[data-doc="{REPLAYED}"]')
        expect(before.locator(".state")).to_have_text("failed")
        expect(before.locator("td.reason")).to_contain_text("exhausted at parse")

        page.click("#nav-dlq")
        row = page.locator(f'tr.letter[data-id="{entry}"]')
        expect(row).to_have_count(1)
        assert _norm(row.inner_text()).count(REPLAYED) == 1
        expect(row).to_contain_text("exhausted")
        expect(row.locator("td.reason")).to_contain_text("staging store unavailable")
        assert row.locator("td").nth(4).inner_text().strip() == "parse"
        assert row.locator("td").last.inner_text().strip() == "open"

        _dry_run(page, [entry])
        assert _norm(page.locator("#dry-run-summary").inner_text()).startswith("1 valid, 0 refused")
        expect(page.locator("#dry-run-summary")).to_contain_text("Nothing has been sent")
        expect(page.locator("#refused")).to_have_count(0)
        valid = page.locator("#valid tr")
        expect(valid).to_have_count(1)
        expect(valid).to_contain_text(entry)
        expect(valid).to_contain_text(f"{REPLAYED} v{event.version}")
        expect(valid).to_contain_text("manifold.documents")

        page.fill("#confirm-count", "2")  # not the count the dry run showed: refused, nothing sent
        page.click("#confirm-replay")
        expect(page.locator("#denied")).to_contain_text("type the number of messages (1)")
        page.goto("/console/dlq")
        assert page.locator(f'tr.letter[data-id="{entry}"] td').last.inner_text().strip() == "open"

        _dry_run(page, [entry])
        assert _norm(page.locator("#dry-run-summary").inner_text()).startswith("1 valid, 0 refused")
        page.fill("#confirm-count", "1")
        page.click("#confirm-replay")
        result = page.locator("#replay-result")
        expect(result).to_contain_text("replayed 1")
        expect(result).to_contain_text("confirmed 1")
        expect(result).to_contain_text("failed 0")

        deadline = time.monotonic() + 60
        state = None
        while time.monotonic() < deadline:
            page.goto(f"/console/documents?q={REPLAYED}")
            cell = page.locator(f'tr.doc[data-doc="{REPLAYED}"] .state')
            state = cell.inner_text() if cell.count() else None
            if state == "active":
                break
            page.wait_for_timeout(2_000)
        assert state == "active", f"{REPLAYED} is {state!r} 60 s after the replay"
        assert api_state(seeded, REPLAYED) == "active"

        page.goto("/console/dlq")
        expect(page.locator(f'tr.letter[data-id="{entry}"]')).to_have_count(0)  # no longer open
        page.goto("/console/dlq?closed=1")
        assert page.locator(f'tr.letter[data-id="{entry}"] td').last.inner_text().strip() == "replayed"

        page.click("#nav-audit")
        rows = row_texts(page, "#audit tr.audit-row")
        replays = [r for r in rows if " replay ids " in f" {r} " and entry in r]
        assert any("replayed 1" in r and "confirmed 1" in r and seeded.subjects["operator"] in r
                   and "operator" in r and r.endswith(" ok") for r in replays), rows
        assert any("replay dry run" in r and entry in r and "valid 1" in r for r in rows), rows


def test_a_dry_run_refuses_letters_whose_original_is_unsigned_or_tampered(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    s, tenant = seeded.settings, seeded.tenant
    unsigned = signed_upsert(s, tenant, "forged/unsigned.md", b"# Unsigned\n\nNo producer signed this.\n",
                             "text/markdown", reserve=False, signer=lambda e: e)
    signed = signed_upsert(s, tenant, "forged/tampered.md", b"# Tampered\n\nSigned, then changed.\n",
                           "text/markdown", reserve=False)
    tampered = signed.model_copy(update={"metadata": {"source_path": "somewhere/else.md"}})
    ids = [append_dead_letter(s, dead_letter_of(s, unsigned, kind="unauthorized",
                                                error=f"unsigned event for tenant {tenant!r}", attempts=1)),
           append_dead_letter(s, dead_letter_of(s, tampered))]

    with signed_in(browser, seeded, "operator") as page:
        _dry_run(page, ids)
        assert _norm(page.locator("#dry-run-summary").inner_text()).startswith("0 valid, 2 refused")
        refused = {r.split(" ", 1)[0]: r for r in row_texts(page, "#refused tr")}
        assert set(refused) == set(ids), refused
        assert "unsigned event" in refused[ids[0]] and "does not verify" in refused[ids[0]], refused
        assert "bad signature" in refused[ids[1]] and "does not verify" in refused[ids[1]], refused
        expect(page.locator("#nothing-valid")).to_be_visible()
        expect(page.locator("#confirm-replay")).to_have_count(0)
        expect(page.locator("#valid")).to_have_count(0)


# -- 4. ask -------------------------------------------------------------------------------------------------
def test_ask_shows_the_answer_evidence_trace_and_plan(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "operator") as page:
        page.click("#nav-ask")
        page.fill("#question", "Where are the forklift batteries charged?")
        page.click("#ask")
        expect(page.locator("#reply-status")).to_be_visible(timeout=120_000)
        expect(page.locator("#ask-error")).to_have_count(0)
        status = page.locator("#reply-status").inner_text()
        assert status == "answered", page.locator("#reply").inner_text()
        assert page.locator("#answer").inner_text().strip()
        evidence = page.locator("#evidence li.evidence")
        assert evidence.count() >= 1
        cited = page.locator(f"#evidence li.evidence a:has-text('{GOOD} v1')")
        assert cited.count() >= 1, row_texts(page, "#evidence li.evidence")
        assert "bay 7" in _norm(cited.first.locator("xpath=..").inner_text())
        expect(page.locator("#question")).to_have_value("Where are the forklift batteries charged?")

        trace = page.locator("#trace")
        expect(trace).to_be_hidden()  # closed until opened
        page.click("#trace-box > summary")
        expect(trace).to_be_visible()
        assert re.fullmatch(r"Trace \(\d+ ms\)", page.locator("#trace-box > summary").inner_text().strip())
        steps = trace.locator("tr:has(td)")
        assert steps.count() >= 1
        for i in range(steps.count()):
            cells = steps.nth(i).locator("td").all_inner_texts()
            assert cells[0].strip() and cells[1].strip(), cells  # step id, operator
            assert re.fullmatch(r"\d+\.\d", cells[3].strip()), cells  # per-step milliseconds
        expect(page.locator("#trace-box")).to_contain_text(f"tenant {seeded.tenant}")

        page.click("#plan-box > summary")
        plan = page.locator("#plan")
        expect(plan).to_be_visible()
        expect(plan).to_contain_text('"steps"')
        expect(plan).to_contain_text('"operator"')


# -- 5. roles, CSRF and tenants, enforced on the server -----------------------------------------------------
def test_a_viewer_cannot_replay_not_even_by_posting_the_form(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "viewer") as page:
        expect(page.locator("#who")).to_contain_text("· viewer ·")
        expect(page.locator("#nav-audit")).to_have_count(0)
        entry = _letter_id(page, BROKEN)
        expect(page.locator("tr.letter")).not_to_have_count(0)
        expect(page.locator("#dry-run")).to_have_count(0)
        expect(page.locator("#purge")).to_have_count(0)
        page.goto(f"/console/dlq/{entry}")
        expect(page.locator("#dry-run-one")).to_have_count(0)
        expect(page.locator("#payload-masked")).to_be_visible()

        csrf = csrf_of(page)
        dry = page.request.post("/console/dlq/dry-run", form={"csrf": csrf, "ids": entry}, max_redirects=0)
        assert dry.status == 403, dry.text()
        assert "needs the operator role" in dry.text() and "signed in as a viewer" in dry.text()
        replay = page.request.post("/console/dlq/replay", max_redirects=0, form={
            "csrf": csrf, "ids": entry, "digest": "0" * 64, "count": "1", "confirm": "1"})
        assert replay.status == 403, replay.text()
        purge = page.request.post("/console/dlq/purge", form={"csrf": csrf, "ids": entry}, max_redirects=0)
        assert purge.status == 403, purge.text()
        response = page.goto("/console/audit")
        assert response is not None and response.status == 403
        expect(page.locator("#denied")).to_contain_text("needs the operator role")

        page.goto("/console/dlq")  # nothing was replayed or purged
        expect(page.locator(f'tr.letter[data-id="{entry}"] td').last).to_have_text("open")


def test_an_operator_s_post_needs_the_csrf_token(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "operator") as page:
        entry = _letter_id(page, BROKEN)
        csrf = csrf_of(page)
        for form in ({"ids": entry}, {"csrf": "0" * 64, "ids": entry}, {"csrf": csrf[::-1], "ids": entry}):
            for path in ("/console/dlq/dry-run", "/console/dlq/replay", "/console/logout"):
                r = page.request.post(path, form=form, max_redirects=0)
                assert r.status == 403, (path, form, r.status, r.text()[:300])
                assert "CSRF token is missing or wrong" in r.text()
        good = page.request.post("/console/dlq/dry-run", form={"csrf": csrf, "ids": entry}, max_redirects=0)
        assert good.status == 200, good.text()  # the same request with the page's token is accepted
        shown = _norm(re.sub(r"<[^>]+>", " ", good.text()))
        assert "Replay: dry run" in shown and f"selection: ids {entry}." in shown, shown
        page.goto("/console")  # the session survived the refused sign-out
        expect(page.locator("#who")).to_contain_text("· operator ·")


def test_payloads_are_shown_to_admins_only(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "operator") as page:
        entry = _letter_id(page, BROKEN)
        page.goto(f"/console/dlq/{entry}")
        expect(page.locator("#payload-masked")).to_have_text("masked (admins only)")
        expect(page.locator("#payload")).to_have_count(0)
        expect(page.locator("#letter-error")).to_contain_text("PDF")
        expect(page.locator("#dry-run-one")).to_be_visible()
        assert BROKEN in page.locator("#letter").inner_text()
    with signed_in(browser, seeded, "admin") as page:
        expect(page.locator("#who")).to_contain_text("· admin ·")
        page.goto(f"/console/dlq/{entry}")
        expect(page.locator("#payload-masked")).to_have_count(0)
        payload = page.locator("#payload")
        expect(payload).to_be_visible()
        expect(payload).to_contain_text(f'"document_id":"{BROKEN}"')
        expect(payload).to_contain_text(f'"tenant_id":"{seeded.tenant}"')
        page.goto("/console/dlq")
        expect(page.locator("#purge")).to_be_visible()  # an admin may purge; nobody clicks it here


def test_another_tenant_s_operator_sees_nothing_of_this_tenant(browser: Any, seeded: Console) -> None:
    from playwright.sync_api import expect

    with signed_in(browser, seeded, "operator") as page:
        entry = _letter_id(page, BROKEN)
        all_entries = {str(a) for a in page.locator("tr.letter").evaluate_all("rows => rows.map(r => r.dataset.id)")}
    with signed_in(browser, seeded, "other") as page:
        expect(page.locator("#who")).to_contain_text(f"tenant {seeded.other}")
        page.goto("/console/documents")
        expect(page.locator(f'tr.doc[data-doc="{GOOD}"]')).to_have_count(0)
        expect(page.locator(f'tr.doc[data-doc="{BROKEN}"]')).to_have_count(0)
        expect(page.locator("tr.doc")).to_have_count(0)
        page.goto("/console/documents?state=failed")
        expect(page.locator("tr.doc")).to_have_count(0)
        page.goto("/console/dlq")
        csrf = csrf_of(page)
        shown = {str(a) for a in page.locator("tr.letter").evaluate_all("rows => rows.map(r => r.dataset.id)")}
        assert not shown & all_entries, shown & all_entries
        expect(page.locator(f'tr.letter[data-doc="{BROKEN}"]')).to_have_count(0)
        page.goto("/console/dlq?closed=1")
        assert not {str(a) for a in page.locator("tr.letter").evaluate_all(
            "rows => rows.map(r => r.dataset.id)")} & all_entries
        response = page.goto(f"/console/dlq/{entry}")
        assert response is not None and response.status == 404
        expect(page.locator("#denied")).to_contain_text(f"no dead letter '{entry}' in this tenant")
        response = page.goto(f"/console/documents/{GOOD}/version")
        assert response is not None and response.status == 404
        expect(page.locator("#denied")).to_contain_text("in this tenant")
        dry = page.request.post("/console/dlq/dry-run", form={"csrf": csrf, "ids": entry}, max_redirects=0)
        assert dry.status == 200  # the id names nothing in this tenant: nothing to replay
        text = _norm(re.sub(r"<[^>]+>", " ", dry.text()))
        assert "0 valid, 0 refused" in text and BROKEN not in text, text
    r = httpx.get(f"{seeded.url}/console/dlq/{entry}", headers=seeded.bearer("other"), timeout=30)
    assert r.status_code == 404  # with the bearer header too


# -- every page, rendered and photographed ---------------------------------------------------------------
def test_every_page_renders_without_errors_and_is_photographed(browser: Any, seeded: Console,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each page as an admin: HTTP 200, no script or CSP error, its main element present. The
    screenshots go to $CONSOLE_SCREENSHOTS (`make console-screenshots` sets docs/console/) or a
    temporary directory."""
    import os
    from pathlib import Path

    out = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-shots"))
    out.mkdir(parents=True, exist_ok=True)
    with signed_in(browser, seeded, "admin") as page:
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "favicon" not in m.text else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_viewport_size({"width": 1280, "height": 900})
        entry = _letter_id(page, BROKEN)
        visits = [("overview", "/console", "#overview"), ("documents", "/console/documents", "#documents"),
                  ("documents-failed", "/console/documents?state=failed", "#documents"),
                  ("version", f"/console/documents/{GOOD}/version", "#timeline"),
                  ("dead-letters", "/console/dlq", "#letters"), ("dead-letter", f"/console/dlq/{entry}", "#letter"),
                  ("audit", "/console/audit", "#audit")]
        for name, path, main in visits:
            response = page.goto(path)
            assert response is not None and response.status == 200, (path, response and response.status)
            assert page.locator(main).count() == 1, (path, main)
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
        page.goto("/console/dlq")
        page.locator(f'tr.letter[data-id="{entry}"] input.pick').check()
        page.click("#dry-run")
        assert page.locator("#dry-run-summary").count() == 1
        page.screenshot(path=str(out / "replay-dry-run.png"), full_page=True)
        page.goto("/console/ask")
        page.fill("#question", "Where are forklift batteries charged?")
        page.click("#ask")
        page.locator("#reply-status").wait_for()
        page.click("#trace-box summary")
        page.screenshot(path=str(out / "ask.png"), full_page=True)
        assert errors == [], errors
    for name in ("overview", "documents", "version", "dead-letters", "replay-dry-run", "ask", "audit"):
        assert (out / f"{name}.png").stat().st_size > 5_000, name


# -- hostile input: names, chunk text and error messages are text, never markup ------------------------
XSS = '<img src=x onerror="window.__xss=1">'


def test_markup_in_names_text_and_errors_is_shown_as_text(browser: Any, seeded: Console) -> None:
    hostile = f"notes/{XSS}.txt"  # plain text keeps the markup in the chunk (Markdown would drop the HTML)
    assert upload(seeded, hostile, f"The pallet wrapper {XSS} is serviced monthly.\n".encode())[
        "outcome"] == "published"
    wait_active(seeded, hostile, timeout_s=300)
    broken = f"scans/{XSS}.pdf"
    assert upload(seeded, broken, b"%PDF-1.4 " + XSS.encode(), media_type="application/pdf")["outcome"] == "published"
    wait_until(f"{broken} to be listed as failed", lambda: console_lists_failed(seeded, broken), timeout_s=180)
    with signed_in(browser, seeded, "admin") as page:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        for path in ("/console/documents", "/console/documents?state=failed", "/console/dlq",
                     f"/console/documents/{quote(hostile)}/version"):
            page.goto(path)
            assert page.evaluate("window.__xss") is None, path
            assert page.locator("img[src=x]").count() == 0, path
        assert XSS in page.locator("#chunks").inner_text()  # the chunk text, shown literally
        page.goto("/console/documents")
        assert any(XSS in t for t in row_texts(page, "tr.doc")), row_texts(page, "tr.doc")
        assert dialogs == []


# -- 9. per-document ACLs hold in the console ---------------------------------------------------------------
SECRET = "hr/salary-bands.md"
SECRET_FACT = "The grade 9 salary band tops out at 91,400 euros a year."


def _acl_applied(console: Console, document_id: str, headers: dict[str, str]) -> bool:
    r = httpx.get(f"{console.url}/v1/documents/{quote(document_id, safe='')}/acl", headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return bool(r.json()["acl"] == "set")


def test_a_document_its_acl_hides_shows_no_content_to_the_console_visitor_it_hides_it_from(
        browser: Any, seeded: Console) -> None:
    """The version page reads chunks through PostgreSQL's ACL policies as the visitor: a viewer
    the ACL leaves out sees none of the document's text there or on the ask page; the operator it
    names sees it."""
    from playwright.sync_api import expect

    assert upload(seeded, SECRET, f"# Salary bands\n\n{SECRET_FACT}\n".encode())["outcome"] == "published"
    wait_active(seeded, SECRET, timeout_s=300)
    acl_admin = {"Authorization": "Bearer " + token(seeded.settings, seeded.tenant, scopes=("acl:write", "acl:read"),
                                                    ttl_s=600, subject="acl-admin")}
    r = httpx.put(f"{seeded.url}/v1/documents/{quote(SECRET, safe='')}/acl", headers=acl_admin,
                  json={"users": [seeded.subjects["operator"]]}, timeout=30)
    assert r.status_code == 202, r.text
    wait_until(f"the ACL of {SECRET} to be applied", lambda: _acl_applied(seeded, SECRET, acl_admin), timeout_s=180)
    version_page = f"/console/documents/{quote(SECRET)}/version"

    with signed_in(browser, seeded, "viewer") as page:
        page.goto(version_page)
        shown = _norm(page.locator("body").inner_text())
        assert "91,400" not in shown and "salary band tops out" not in shown, shown
        page.goto("/console/ask")
        page.fill("#question", "What does the grade 9 salary band top out at?")
        page.click("#ask")
        expect(page.locator("#reply-status")).to_be_visible(timeout=120_000)
        reply = _norm(page.locator("#reply").inner_text())
        assert "91,400" not in reply and SECRET not in reply, reply

    with signed_in(browser, seeded, "operator") as page:
        page.goto(version_page)
        assert "91,400 euros" in _norm(page.locator("#chunks").inner_text())
