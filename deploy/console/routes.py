"""The console's pages at `/console`: server-rendered Jinja2 with htmx, on the `serve` app.

Pages: overview, documents, one document version, dead letters (browse, two-step replay,
purge), ask, audit, sign in/out. Each route states the role it needs and checks it on the server
(`_need`); a missing role is a 403 page whatever the page showed. Privileged actions (re-run,
reconcile, replay, purge) are written to the audit log with who, what, which filter, counts and
the result, whether they succeeded or not.

Guarantees (see `auth` for sessions and CSRF): the tenant of every read and action is the
visitor's token's; an anonymous visitor is redirected to `/console/login`; dead-letter payloads
are shown to admins only; a replay runs only what a server-side dry run validated, after a
confirmation that names the count, and is refused if the selection changed since the dry run.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from manifold.deploy.console import charts
from manifold.deploy.console.auth import COOKIE, CSRF_FIELD, CSRF_HEADER, Csrf, Role, Visitor, role_of
from manifold.deploy.console.data import PAGE, PIPELINE, RERUN_FROM, STORE_LABELS, STORES, ConsoleData
from manifold.query.auth import TokenError
from manifold.query.types import Principal, QueryRequest
from manifold.shared.config import ManifoldSettings

log = logging.getLogger(__name__)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
REPLAY_CAP = 500


class _Redirect(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, to: str) -> None:
        self.to = to


class _Denied(Exception):  # noqa: N818 - rendered as a 403 page
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


def install(app: FastAPI, settings: ManifoldSettings, backend: Any, verify: Callable[[str], Principal],
            data: ConsoleData | None = None) -> None:
    """Mount the console on `app` (one composition root: `deploy.serve.app.create_app`)."""
    data = data or ConsoleData(settings, backend)
    csrf = Csrf()
    env = Environment(loader=PackageLoader("manifold.deploy.console", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    env.globals.update(charts=charts, PIPELINE=PIPELINE, STORES=STORES, STORE_LABELS=STORE_LABELS,
                       RERUN_FROM=RERUN_FROM,
                       grafana=settings.server.grafana_url)
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, default=str)
    env.filters["counts"] = lambda d: " · ".join(f"{k} {v}" for k, v in sorted(dict(d or {}).items())) or "—"
    router = APIRouter(prefix="/console", include_in_schema=False)

    def render(name: str, request: Request, visitor: Visitor | None, status: int = 200, **ctx: Any) -> HTMLResponse:
        body = env.get_template(name).render(request=request, visitor=visitor, csrf_field=CSRF_FIELD,
                                             profile=settings.profile, **ctx)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def visitor_of(request: Request) -> Visitor:
        header = request.headers.get("authorization", "")
        bearer = header.lower().startswith("bearer ")
        via_cookie = not bearer  # any other Authorization scheme never exempts a cookie from CSRF
        token = header[7:].strip() if bearer else request.cookies.get(COOKIE, "")
        if not token:
            raise _Redirect(f"/console/login?next={quote(request.url.path)}")
        try:
            principal = verify(token)
        except TokenError as err:
            if via_cookie:
                raise _Redirect(f"/console/login?expired=1&next={quote(request.url.path)}") from err
            raise _Denied(401, f"invalid token: {err.reason}") from err
        role = role_of(principal)
        if role is None:
            raise _Denied(403, "this token grants no console role (scope console:read, console:operate or "
                               "console:admin)")
        return Visitor(principal, role, via_cookie, csrf.token_for(token) if via_cookie else "")

    def _need(request: Request, role: Role) -> Visitor:
        visitor = visitor_of(request)
        if not visitor.may(role):
            raise _Denied(403, f"this needs the {role.name} role; you are signed in as a {visitor.role.name}")
        return visitor

    def _same_origin(request: Request) -> None:
        """A browser's POST from another origin is refused whatever it carries (defence in depth
        beside SameSite=Strict and the CSRF token; also covers the sign-in form)."""
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.split("://", 1)[-1] != request.headers.get("host", ""):
            raise _Denied(403, "a form from another site was refused")

    async def _acting(request: Request, role: Role) -> tuple[Visitor, dict[str, str]]:
        """A state-changing request: the role, and the CSRF token when the cookie authenticated it."""
        _same_origin(request)
        visitor = _need(request, role)
        posted = await request.form()
        form = {k: str(v) for k, v in posted.items()}
        if len(posted.getlist("ids")) > 1:  # several ticked entries: one `ids` field each, keep them all
            form["ids"] = " ".join(str(v) for v in posted.getlist("ids"))
        if visitor.via_cookie:
            token = request.cookies.get(COOKIE, "")
            if not csrf.valid(token, form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)):
                raise _Denied(403, "the form's CSRF token is missing or wrong; reload the page and try again")
        return visitor, form

    def audit(visitor: Visitor, action: str, target: str, counts: dict[str, Any], result: str) -> None:
        try:
            data.audit().record(visitor.tenant_id, actor=visitor.name, role=visitor.role.name, action=action,
                                target=target, counts=counts, result=result)
        except Exception:  # noqa: BLE001 - the action happened; say so in the log, loudly
            log.exception("console audit entry not written: %s %s by %s", action, target, visitor.name)

    # -- sign in / out ----------------------------------------------------------------------------
    @router.get("/login")
    def login_page(request: Request, next: str = "/console", expired: int = 0) -> HTMLResponse:  # noqa: A002
        return render("login.html", request, None, next=_local(next), expired=bool(expired), error="")

    @router.post("/login")
    def login(request: Request, token: str = Form(""), next: str = Form("/console")) -> Response:  # noqa: A002
        _same_origin(request)
        try:
            principal = verify(token.strip())
        except TokenError as err:
            return render("login.html", request, None, status=401, next=_local(next), expired=False,
                          error=f"That token was refused: {err.reason}.")
        if role_of(principal) is None:
            return render("login.html", request, None, status=403, next=_local(next), expired=False,
                          error="That token grants no console role (console:read, console:operate or console:admin).")
        response = RedirectResponse(_local(next), status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict", path="/console",
                            secure=request.url.scheme == "https")
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        await _acting(request, Role.viewer)
        response = RedirectResponse("/console/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/console")
        return response

    # -- overview ---------------------------------------------------------------------------------
    @router.get("")
    @router.get("/")
    async def overview(request: Request) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        view = await run_in_threadpool(_safely, lambda: data.overview(visitor.tenant_id))
        return render("overview.html", request, visitor, view=view)

    @router.get("/overview/panel")
    async def overview_panel(request: Request) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        view = await run_in_threadpool(_safely, lambda: data.overview(visitor.tenant_id))
        return render("_overview_panel.html", request, visitor, view=view)

    # -- documents ----------------------------------------------------------------------------------
    @router.get("/documents")
    async def documents(request: Request, state: str = "", stage: str = "", error: str = "",
                        q: str = "", page: int = 1) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        page = max(1, page)
        rows, total = await run_in_threadpool(lambda: data.documents(visitor.tenant_id, state=state, stage=stage,
                                                                     error=error, text=q, offset=(page - 1) * PAGE))
        filters = {"state": state, "stage": stage, "error": error, "q": q}
        return render("documents.html", request, visitor, rows=rows, total=total, filters=filters,
                      pager=_pager("/console/documents", filters, page, total))

    @router.get("/documents/{document_id:path}/version")
    async def version_page(request: Request, document_id: str, v: int | None = None,
                           done: str = "") -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        view = await run_in_threadpool(data.version, visitor.principal, document_id, v)
        if view is None:
            raise _Denied(404, f"no document {document_id!r} in this tenant")
        return render("version.html", request, visitor, view=view, done=done)

    @router.post("/documents/{document_id:path}/rerun")
    async def rerun(request: Request, document_id: str) -> Response:
        visitor, form = await _acting(request, Role.operator)
        stage, version = form.get("stage", ""), _int(form.get("version"))
        target = f"{document_id} v{version} from {stage}"
        try:
            said = await run_in_threadpool(data.rerun, visitor.tenant_id, document_id, version, stage)
        except ValueError as err:
            audit(visitor, "rerun", target, {}, f"refused: {err}")
            raise _Denied(409, str(err)) from err
        audit(visitor, "rerun", target, {"versions": 1}, said)
        return _back(document_id, version, said)

    @router.post("/documents/{document_id:path}/reconcile")
    async def reconcile_document(request: Request, document_id: str) -> Response:
        visitor, form = await _acting(request, Role.operator)
        out = await run_in_threadpool(data.reconcile_document, visitor.tenant_id, document_id)
        said = (f"reconciled: {out['found']} finding(s) {out['kinds']}, {out['repaired']} repaired, "
                f"{out['failed']} failed")
        audit(visitor, "reconcile", document_id, out, said)
        return _back(document_id, _int(form.get("version")) or None, said)

    # -- dead letters ---------------------------------------------------------------------------------
    def _filters(form: dict[str, str]) -> Any:
        from manifold.dlq_tools.records import Filters, parse_duration

        def age(text: str) -> timedelta | None:
            try:
                return parse_duration(text) if text.strip() else None
            except ValueError as err:
                raise _Denied(400, str(err)) from err

        kind = form.get("kind") or None
        return Filters(tenant=None, stage=form.get("stage") or None, kind=kind,
                       older_than=age(form.get("older_than", "")), newer_than=age(form.get("newer_than", "")))

    @router.get("/dlq")
    async def dlq_page(request: Request) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        params = dict(request.query_params)
        service = data.dlq(visitor.name)
        rows = await run_in_threadpool(service.browse, _filters(params), tenant=visitor.tenant_id,
                                       include_closed=params.get("closed") == "1")
        from manifold.deploy.console.data import letter_row

        page = max(1, _int(params.get("page")) or 1)
        letters = [letter_row(e, s) for e, s in rows[(page - 1) * PAGE:page * PAGE]]
        kept = {k: v for k, v in params.items() if k in ("stage", "kind", "older_than", "newer_than", "closed")}
        return render("dlq.html", request, visitor, letters=letters, filters=params, cap=REPLAY_CAP,
                      admin=visitor.may(Role.admin), now=datetime.now(UTC), total=len(rows),
                      pager=_pager("/console/dlq", kept, page, len(rows)))

    @router.get("/dlq/{entry_id}")
    async def dlq_entry(request: Request, entry_id: str) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        service = data.dlq(visitor.name)
        try:
            found = await run_in_threadpool(lambda: service.find(entry_id, tenant=visitor.tenant_id))
        except ValueError:
            found = None
        if found is None:
            raise _Denied(404, f"no dead letter {entry_id!r} in this tenant")
        from manifold.deploy.console.data import letter_row

        entry, status = found
        payload = None
        if visitor.may(Role.admin) and entry.letter is not None:
            payload = entry.letter.value.decode("utf-8", "replace")[:20000]
        return render("dlq_entry.html", request, visitor, letter=letter_row(entry, status), payload=payload)

    def _selection(form: dict[str, str]) -> tuple[list[str], Any, str]:
        ids = [i for i in form.get("ids", "").replace(",", " ").split() if i]
        filters = None if ids else _filters(form)
        if not ids and filters is not None and filters.empty:
            raise _Denied(400, "say what to replay: tick entries, or give a stage, kind or age filter")
        described = ("ids " + ", ".join(ids)) if ids else "filter " + json.dumps(
            {k: form.get(k) for k in ("stage", "kind", "older_than", "newer_than") if form.get(k)})
        return ids, filters, described

    @router.post("/dlq/dry-run")
    async def dlq_dry_run(request: Request) -> HTMLResponse:
        visitor, form = await _acting(request, Role.operator)
        ids, filters, described = _selection(form)
        service = data.dlq(visitor.name)
        result = await run_in_threadpool(lambda: service.dry_run(ids=ids, filters=filters, tenant=visitor.tenant_id,
                                                                 cap=REPLAY_CAP))
        audit(visitor, "replay dry run", described, {"valid": len(result.valid), "refused": len(result.refused)},
              "dry run only; nothing produced")
        return render("dlq_dry_run.html", request, visitor, result=result, form=form, described=described,
                      ids=" ".join(ids))

    @router.post("/dlq/replay")
    async def dlq_replay(request: Request) -> HTMLResponse:
        visitor, form = await _acting(request, Role.operator)
        ids, filters, described = _selection(form)
        expected = _int(form.get("count"))
        if str(expected) != form.get("confirm", "").strip():
            raise _Denied(400, f"type the number of messages ({expected}) to confirm the replay")
        service = data.dlq(visitor.name)
        rate = float(form.get("rate") or 20)
        try:
            report = await run_in_threadpool(lambda: service.replay(form.get("digest", ""), ids=ids, filters=filters,
                                                                    tenant=visitor.tenant_id, cap=REPLAY_CAP,
                                                                    rate=min(max(rate, 0.1), 200.0)))
        except Exception as err:
            audit(visitor, "replay", described, {"confirmed": expected}, f"refused: {err}")
            raise _Denied(409, f"nothing replayed: {err}") from err
        data.nudge()
        counts = {"confirmed": expected, "replayed": len(report.replayed), "failed": len(report.failed),
                  "refused": len(getattr(report, "refused", []))}
        audit(visitor, "replay", described, counts, "ok" if not report.failed else "partly failed")
        return render("dlq_replayed.html", request, visitor, report=report, counts=counts)

    @router.post("/dlq/purge")
    async def dlq_purge(request: Request) -> HTMLResponse:
        visitor, form = await _acting(request, Role.admin)
        ids, filters, described = _selection(form)
        service = data.dlq(visitor.name)
        done = await run_in_threadpool(lambda: service.purge(ids=ids, filters=filters, tenant=visitor.tenant_id))
        counts = {"purged": done.count, "skipped": len(done.skipped), "unknown": len(done.unknown_ids)}
        audit(visitor, "purge", described, counts, "ok")
        return render("dlq_replayed.html", request, visitor, report=None, counts=counts)

    # -- ask ----------------------------------------------------------------------------------------
    @router.get("/ask")
    def ask_page(request: Request) -> HTMLResponse:
        visitor = _need(request, Role.viewer)
        return render("ask.html", request, visitor, reply=None, question="")

    @router.post("/ask")
    async def ask(request: Request) -> HTMLResponse:
        visitor, form = await _acting(request, Role.viewer)
        question = form.get("question", "").strip()[:4000]
        if "query:read" not in visitor.principal.scopes:
            raise _Denied(403, "asking needs scope query:read on your token")
        if not question:
            return render("ask.html", request, visitor, reply=None, question="", error="Type a question.")
        token = request.cookies.get(COOKIE) if visitor.via_cookie else request.headers["authorization"][7:].strip()
        q = settings.query
        req = QueryRequest(request_id=f"console-{uuid.uuid4().hex}", reply_topic=q.reply_topic,
                           deadline=datetime.now(UTC) + timedelta(milliseconds=q.default_deadline_ms),
                           question=question)
        try:
            reply = await run_in_threadpool(backend.answer, req, visitor.principal, token or "")
        except Exception as err:  # noqa: BLE001 - a timeout or an unreachable bus is shown, not raised
            return render("ask.html", request, visitor, reply=None, question=question,
                          error=f"No reply: {type(err).__name__}: {err}")
        return render("ask.html", request, visitor, reply=reply, question=question, error="")

    # -- audit --------------------------------------------------------------------------------------
    @router.get("/audit")
    async def audit_page(request: Request) -> HTMLResponse:
        visitor = _need(request, Role.operator)
        entries = await run_in_threadpool(data.audit().recent, visitor.tenant_id)
        return render("audit.html", request, visitor, entries=entries)

    app.include_router(router)
    from importlib.resources import files

    app.mount("/console/static", StaticFiles(directory=str(files("manifold.deploy.console").joinpath("static"))),
              name="console-static")

    @app.exception_handler(_Redirect)
    async def _redirect(request: Request, exc: _Redirect) -> Response:
        return RedirectResponse(exc.to, status_code=303, headers=SECURITY_HEADERS)

    @app.exception_handler(_Denied)
    async def _denied(request: Request, exc: _Denied) -> Response:
        return render("denied.html", request, None, status=exc.status, message=exc.message)


def _safely(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A view that names what it could not read instead of failing the whole page."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - an outage of one store is shown on the page
        log.warning("console overview: %s", err)
        return {"error": f"{type(err).__name__}: {err}"}


def _local(path: str) -> str:
    """Only a path inside the console is a valid place to go back to (no open redirect)."""
    return path if path.startswith("/console") and "//" not in path and "\\" not in path else "/console"


def _int(text: str | None) -> int:
    try:
        return int(str(text))
    except ValueError:
        return 0


def _pager(path: str, params: dict[str, str], page: int, total: int) -> dict[str, Any]:
    """Links to the previous and next page of a list, keeping its filters."""
    pages = max(1, -(-total // PAGE))
    def link(n: int) -> str:
        return f"{path}?{urlencode({**{k: v for k, v in params.items() if v}, 'page': n})}"

    return {"page": min(page, pages), "pages": pages, "total": total,
            "prev": link(page - 1) if page > 1 else "", "next": link(page + 1) if page < pages else ""}


def _back(document_id: str, version: int | None, said: str) -> Response:
    where = f"/console/documents/{quote(document_id)}/version?done={quote(said)}"
    if version:
        where += f"&v={version}"
    return RedirectResponse(where, status_code=303, headers=SECURITY_HEADERS)
