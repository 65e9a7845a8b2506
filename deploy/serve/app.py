"""The ASGI app of `manifold serve`: the REST API, MCP over streamable HTTP at `/mcp`, health,
readiness and metrics, on FastAPI (OpenAPI at `/openapi.json`, interactive docs at `/docs`).

Guarantees:
- Authentication: every `/v1/*` and `/mcp` request needs `Authorization: Bearer <token>`, verified
  by `query.auth.TokenVerifier` (the same signed principal as the Kafka protocol); a missing,
  expired or forged token is a 401 problem. The tenant is the token's and nothing else: a body
  or a query string that names a tenant is a 400 problem. Asking needs scope `query:read`,
  publishing and deleting `documents:write`, publishing a document's ACL or a user's groups
  `acl:write`, reading them `acl:read` (403 otherwise).
- Per-document access (issue 29): `PUT /v1/documents/{id}/acl` and `PUT /v1/principals/{user}/groups`
  publish signed full-replacement events (202: published; the applier applies them, a lower or
  equal `seq` than the applied one is ignored); the `GET`s read the applied state from
  PostgreSQL, or say that none is applied and which tenant default holds.
- Limits: bodies over `server.max_request_bytes` (uploads: `ingest.max_document_bytes` + 1 MiB)
  get 413 before they are read; each principal gets `server.rate_per_minute` requests per
  minute with bursts of `server.rate_burst` (429 + Retry-After). CORS headers only for
  `server.cors_origins`.
- `POST /v1/ask` and `POST /v1/plan` return the Kafka reply envelope (`QueryReply`) with 200 for
  every reply status (answered, partial, clarify, refused, no_answer, error); transport failures
  are problems: 504 when no reply came by the deadline (plus grace), 503 when the bus or the
  database cannot be reached. Every error is an RFC 9457 problem document.
- `/healthz` answers while the process runs; `/readyz` is 200 only when every dependency of the
  profile answers (else 503 with the reasons); `/metrics` is Prometheus text with bounded labels
  (route template, method, status class) and no tenant data.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from manifold.deploy.serve.backend import Backend
from manifold.deploy.serve.mcp_tools import build_mcp, http_principal
from manifold.deploy.serve.models import (
    FORBIDDEN_KEYS,
    TENANT_IN_BODY,
    AclBody,
    AclPublished,
    AclState,
    AskBody,
    DocumentJSON,
    DocumentList,
    DocumentStatus,
    GroupsBody,
    GroupsPublished,
    GroupsState,
    PlanBody,
    Published,
    Readiness,
)
from manifold.deploy.serve.problems import BodyLimit, RateLimiter, problem, retry_after, send_problem, validation_detail
from manifold.query import protocol
from manifold.query.auth import TokenError, TokenVerifier
from manifold.query.types import Principal, QueryReply, QueryRequest
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient

READ_SCOPE = "query:read"
WRITE_SCOPE = "documents:write"
ACL_WRITE_SCOPE = "acl:write"
ACL_READ_SCOPE = "acl:read"
UPLOAD_SLACK = 1024 * 1024

HTTP_REQUESTS = Counter("manifold_http_requests_total", "HTTP requests by route, method and status class",
                        ["route", "method", "status"])
HTTP_SECONDS = Histogram("manifold_http_seconds", "HTTP request latency by route", ["route"],
                         buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60))


class ApiProblem(Exception):
    """Raised by handlers and dependencies; rendered as a problem document."""

    def __init__(self, status: int, slug: str, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.slug, self.detail, self.headers = status, slug, detail, headers


_UNAUTHORISED = {"WWW-Authenticate": 'Bearer realm="manifold"'}
_bearer = HTTPBearer(auto_error=False, description="A principal token from `manifold token --tenant T`.")


def _media_type(document_id: str, content: bytes, given: str | None, fallback: str | None) -> str:
    from manifold.ingest.media import guess_media_type

    if given:
        return given
    guessed = guess_media_type(PurePosixPath(document_id), content[:4096]) or fallback
    if guessed is None:
        raise ApiProblem(415, "unknown-media-type", f"cannot tell the media type of {document_id!r}; "
                         "send media_type (or a file name with a known extension)")
    return guessed


def create_app(settings: ManifoldSettings, backend: Backend, verifier: TokenVerifier) -> FastAPI:
    """The app over `backend` (see module guarantees). Closing the backend is left to its owner."""
    srv = settings.server
    q = settings.query
    limiter = RateLimiter(srv.rate_per_minute, srv.rate_burst)

    def verify(token: str) -> Principal:
        try:
            return verifier.verify(token)
        except TokenError as err:
            raise ApiProblem(401, "invalid-token", f"invalid token: {err.reason}", _UNAUTHORISED) from None

    mcp = build_mcp(settings, backend, http_principal(verifier.verify), host=srv.host)
    mcp_app = mcp.streamable_http_app()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    app = FastAPI(
        title="manifold", version="1", lifespan=lifespan, docs_url="/docs", redoc_url=None,
        openapi_url="/openapi.json",
        description="Questions over a tenant's documents with cited evidence, explicit plans, and document "
        "publication. The tenant is always the bearer token's. Errors are RFC 9457 problem documents. "
        "MCP (streamable HTTP) is served at /mcp with the same bearer token.")
    app.state.backend = backend

    # -- errors as problem documents ---------------------------------------------------------
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem(exc.status, exc.slug, exc.detail, instance=request.url.path, headers=exc.headers)

    def _validation(request: Request, errors: list[Any]) -> JSONResponse:
        tenant = next((e for e in errors if e.get("type") == TENANT_IN_BODY), None)
        if tenant is not None:
            return problem(400, "tenant-in-request", str(tenant.get("msg")), instance=request.url.path)
        detail, clean = validation_detail(errors)
        return problem(422, "invalid-request", detail, instance=request.url.path, errors=clean)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation(request, list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, "http-error", str(exc.detail), instance=request.url.path,
                       headers=dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return problem(500, "internal-error", f"internal error: {type(exc).__name__}", instance=request.url.path)

    # -- metrics ---------------------------------------------------------------------------------
    @app.middleware("http")
    async def _measure(request: Request, call_next: Callable[[Request], Any]) -> Response:
        started = time.monotonic()
        response: Response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", None) or _template(app, request.scope)
        HTTP_REQUESTS.labels(route, request.method, f"{response.status_code // 100}xx").inc()
        HTTP_SECONDS.labels(route).observe(time.monotonic() - started)
        return response

    # -- authentication --------------------------------------------------------------------------
    def authenticated(scope: str) -> Callable[..., tuple[Principal, str]]:
        def dependency(request: Request,
                       creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                       ) -> tuple[Principal, str]:
            if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
                raise ApiProblem(401, "missing-token", "send header 'Authorization: Bearer <token>'", _UNAUTHORISED)
            principal = verify(creds.credentials)
            wait = limiter.take(f"{principal.tenant_id}\x00{principal.subject}")
            if wait:
                raise ApiProblem(429, "rate-limited", f"rate limit reached; retry in {wait:.1f}s", retry_after(wait))
            if scope not in principal.scopes:
                raise ApiProblem(403, "missing-scope", f"the token lacks scope {scope!r}")
            named = sorted(k for k in request.query_params if k.strip().lower() in FORBIDDEN_KEYS)
            if named:
                raise ApiProblem(400, "tenant-in-request",
                                 f"the query string may not name a tenant ({', '.join(named)}); "
                                 "the tenant comes from the bearer token")
            return principal, creds.credentials

        return dependency

    reader = Depends(authenticated(READ_SCOPE))
    writer = Depends(authenticated(WRITE_SCOPE))
    acl_writer = Depends(authenticated(ACL_WRITE_SCOPE))
    acl_reader = Depends(authenticated(ACL_READ_SCOPE))

    def _request(deadline_ms: int | None, **fields: Any) -> QueryRequest:
        ms = min(deadline_ms or q.default_deadline_ms, q.max_deadline_ms)
        return QueryRequest(request_id=f"http-{uuid.uuid4().hex}", reply_topic=q.reply_topic,
                            deadline=datetime.now(UTC) + timedelta(milliseconds=ms), **fields)

    def _answer(request: QueryRequest, auth: tuple[Principal, str]) -> QueryReply:
        from manifold.query.request_client import QueryTimeout

        try:
            return backend.answer(request, auth[0], auth[1])
        except QueryTimeout as err:
            raise ApiProblem(504, "deadline-exceeded", str(err)) from None
        except Transient as err:
            raise ApiProblem(503, "unavailable", f"the query service cannot be reached: {err}",
                             retry_after(2)) from None

    # -- the API -----------------------------------------------------------------------------
    problems: dict[int | str, dict[str, Any]] = {401: {"description": "missing, expired or forged token"},
                400: {"description": "the request names a tenant"}, 413: {"description": "body too large"},
                429: {"description": "rate limited"}, 504: {"description": "no reply by the deadline"}}

    @app.post("/v1/ask", response_model=QueryReply, tags=["query"], responses=problems)
    def ask(body: AskBody, auth: tuple[Principal, str] = reader) -> QueryReply:
        """Ask a question (or answer a clarification with `continuation` + `choice`); returns the reply
        envelope of the Kafka protocol with its status, answer, typed result, evidence, gaps and trace."""
        if not (body.question and body.question.strip()) and body.continuation is None:
            raise ApiProblem(422, "invalid-request", "send a question (or a continuation with a choice)")
        return _answer(_request(body.deadline_ms, question=body.question, session_id=body.session_id,
                                continuation=body.continuation, choice=body.choice, as_of=body.as_of), auth)

    @app.post("/v1/plan", response_model=QueryReply, tags=["query"], responses=problems)
    def plan(body: PlanBody, auth: tuple[Principal, str] = reader) -> QueryReply:
        """Run an explicit plan (the plan IR of `query.plan`); an invalid plan is answered `refused`."""
        return _answer(_request(body.deadline_ms, plan=body.plan, as_of=body.as_of), auth)

    @app.get("/v1/documents", response_model=DocumentList, tags=["documents"])
    def documents(auth: tuple[Principal, str] = reader) -> DocumentList:
        """Every document of the caller's tenant: active version and the state of each version."""
        return DocumentList(documents=_documents(auth[0]))

    def _documents(principal: Principal) -> list[DocumentStatus]:
        try:
            return backend.documents(principal)
        except Transient as err:
            raise ApiProblem(503, "unavailable", f"the manifest cannot be read: {err}", retry_after(2)) from None

    # -- per-document access (registered before GET /v1/documents/{id}, whose path would match) ----
    def _publish_access(send: Callable[[], Any]) -> Any:
        from confluent_kafka import KafkaException

        from manifold.shared.envelope_auth import NoProducerKey

        try:
            return send()
        except NoProducerKey as err:
            raise ApiProblem(503, "no-producer-key", f"this server cannot sign access events: {err}") from None
        except ValueError as err:
            raise ApiProblem(422, "invalid-request", str(err)) from None
        except (Transient, KafkaException) as err:
            raise ApiProblem(503, "unavailable", f"cannot publish now: {err}", retry_after(2)) from None

    def _read_access(read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Transient as err:
            raise ApiProblem(503, "unavailable", f"the access state cannot be read: {err}", retry_after(2)) from None

    def _check_id(document_id: str) -> None:
        from manifold.shared.events import check_document_id

        try:
            check_document_id(document_id)
        except ValueError as err:
            raise ApiProblem(422, "invalid-request", str(err)) from None

    @app.put("/v1/documents/{document_id:path}/acl", response_model=AclPublished, status_code=202,
             tags=["access"], responses=problems)
    def put_acl(document_id: str, body: AclBody, auth: tuple[Principal, str] = acl_writer) -> AclPublished:
        """Replace who may read a document of the caller's tenant: users, groups and/or `public`
        (all empty: nobody). Published as a signed `DocumentAclSet`; no content version is created.
        202: published (`GET .../acl` shows it once the `acl` worker role applied it)."""
        _check_id(document_id)
        event = _publish_access(lambda: backend.set_acl(auth[0].tenant_id, document_id, users=list(body.users),
                                                        groups=list(body.groups), public=body.public, seq=body.seq))
        return AclPublished(document_id=event.document_id, seq=event.seq, public=event.public,
                            users=list(event.users), groups=list(event.groups))

    @app.get("/v1/documents/{document_id:path}/acl", response_model=AclState, tags=["access"])
    def get_acl(document_id: str, auth: tuple[Principal, str] = acl_reader) -> AclState:
        """The applied ACL of a document of the caller's tenant, or `acl: default` with the tenant
        default that then applies (`tenant`: everyone in the tenant; `none`: nobody)."""
        _check_id(document_id)
        tenant = auth[0].tenant_id
        default = q.acl_default_for(tenant)
        row = _read_access(lambda: backend.acl(tenant, document_id))
        if row is None:
            return AclState(document_id=document_id, acl="default", default=default)
        return AclState(document_id=document_id, acl="set", default=default, seq=row.seq, public=row.public,
                        users=list(row.users), groups=list(row.groups), applied_at=row.applied_at)

    @app.put("/v1/principals/{user_id:path}/groups", response_model=GroupsPublished, status_code=202,
             tags=["access"], responses=problems)
    def put_groups(user_id: str, body: GroupsBody, auth: tuple[Principal, str] = acl_writer) -> GroupsPublished:
        """Replace the groups a user of the caller's tenant belongs to (flattened; an empty list
        removes every membership). Published as a signed `GroupsSet`; 202: published."""
        event = _publish_access(lambda: backend.set_groups(auth[0].tenant_id, user_id, list(body.groups),
                                                           seq=body.seq))
        return GroupsPublished(user_id=event.user_id, seq=event.seq, groups=list(event.groups))

    @app.get("/v1/principals/{user_id:path}/groups", response_model=GroupsState, tags=["access"])
    def get_groups(user_id: str, auth: tuple[Principal, str] = acl_reader) -> GroupsState:
        """The groups a user of the caller's tenant belongs to now (`recorded: false`: none applied)."""
        if not 1 <= len(user_id) <= 256:
            raise ApiProblem(422, "invalid-request", "user_id must be 1-256 characters")
        groups = _read_access(lambda: backend.groups_of(auth[0].tenant_id, user_id))
        return GroupsState(user_id=user_id, groups=list(groups or ()), recorded=groups is not None)

    @app.get("/v1/documents/{document_id:path}", response_model=DocumentStatus, tags=["documents"])
    def document(document_id: str, auth: tuple[Principal, str] = reader) -> DocumentStatus:
        """One document of the caller's tenant (404 if the tenant has no such document)."""
        for doc in _documents(auth[0]):
            if doc.document_id == document_id:
                return doc
        raise ApiProblem(404, "no-such-document", f"no document {document_id!r}")

    upload_body = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": DocumentJSON.model_json_schema()},
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary"},
            "document_id": {"type": "string", "description": "default: the file name"},
            "media_type": {"type": "string", "description": "default: guessed"}}}}}}}

    @app.post("/v1/documents", response_model=Published, status_code=202, tags=["documents"],
              openapi_extra=upload_body, responses={200: {"model": Published, "description": "unchanged"},
                                                    **problems})
    async def upload(request: Request, auth: tuple[Principal, str] = writer) -> Any:
        """Publish a document version through the same upstream path as `manifold ingest` (version
        ledger, claim check for large content, events acknowledged by the bus). 202: a new version
        is on its way (poll `GET /v1/documents/{id}` until it is active); 200: content unchanged."""
        document_id, content, media_type, fallback = await _read_upload(request)
        _check_id(document_id)
        media = _media_type(document_id, content, media_type, fallback)
        try:
            version = await run_in_threadpool(backend.publish, auth[0].tenant_id, document_id, content, media)
        except ValueError as err:
            raise ApiProblem(413, "document-too-large", str(err)) from None
        except Transient as err:
            raise ApiProblem(503, "unavailable", f"cannot publish now: {err}", retry_after(2)) from None
        if version is None:
            return JSONResponse(Published(document_id=document_id, version=None, outcome="unchanged").model_dump(),
                                status_code=200)
        return Published(document_id=document_id, version=version, outcome="published")

    async def _read_upload(request: Request) -> tuple[str, bytes, str | None, str | None]:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "application/json":
            try:
                data = json.loads(await request.body())
                body = DocumentJSON.model_validate(data)
            except RecursionError:
                raise ApiProblem(400, "invalid-json", "the body is nested too deeply") from None
            except ValueError as err:
                if isinstance(err, ValidationError):
                    raise _ValidationProblem(list(err.errors())) from None
                raise ApiProblem(400, "invalid-json", "the body is not valid JSON") from None
            if body.content is not None:
                return body.document_id, body.content.encode(), body.media_type, "text/plain"
            try:
                return (body.document_id, base64.b64decode(body.content_base64 or "", validate=True), body.media_type,
                        None)
            except (binascii.Error, ValueError):
                raise ApiProblem(422, "invalid-request", "content_base64 is not valid base64") from None
        if ctype == "multipart/form-data":
            form = await request.form(max_files=1, max_fields=8,
                                      max_part_size=settings.ingest.max_document_bytes + UPLOAD_SLACK)
            named = sorted(k for k in form if k.strip().lower() in FORBIDDEN_KEYS)
            if named:
                raise ApiProblem(400, "tenant-in-request", f"the form may not name a tenant ({', '.join(named)}); "
                                 "the tenant comes from the bearer token")
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                raise ApiProblem(422, "invalid-request", "multipart upload needs a 'file' part")
            content = await upload.read()
            document_id = str(form.get("document_id") or upload.filename or "").strip()
            if not document_id or len(document_id) > 512:
                raise ApiProblem(422, "invalid-request", "give a document_id (1-512 characters) or a file name")
            media = form.get("media_type")
            return document_id, content, media if isinstance(media, str) and media else None, None
        raise ApiProblem(415, "unsupported-media-type", "send application/json or multipart/form-data")

    class _ValidationProblem(Exception):
        def __init__(self, errors: list[Any]) -> None:
            self.errors = errors

    @app.exception_handler(_ValidationProblem)
    async def _validation_problem(request: Request, exc: _ValidationProblem) -> JSONResponse:
        return _validation(request, exc.errors)

    @app.delete("/v1/documents/{document_id:path}", response_model=Published, status_code=202, tags=["documents"])
    def delete(document_id: str, auth: tuple[Principal, str] = writer) -> Published:
        """Publish the deletion of a document; every store drops it once the delete is applied."""
        _check_id(document_id)
        try:
            version = backend.delete(auth[0].tenant_id, document_id)
        except Transient as err:
            raise ApiProblem(503, "unavailable", f"cannot publish now: {err}", retry_after(2)) from None
        if version is None:
            raise ApiProblem(404, "no-such-document", f"no published document {document_id!r}")
        return Published(document_id=document_id, version=version, outcome="deleted")

    # -- operations ----------------------------------------------------------------------------
    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """The process is up (no dependency is checked)."""
        return {"status": "ok", "profile": backend.profile}

    @app.get("/readyz", response_model=Readiness, tags=["operations"], responses={503: {"model": Readiness}})
    def readyz() -> Any:
        """Every dependency of this profile is reachable (distributed: Kafka, PostgreSQL,
        Elasticsearch, Neo4j; embedded: PostgreSQL)."""
        checks = backend.readiness()
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(Readiness(ready=ready, checks=checks).model_dump(), status_code=200 if ready else 503)

    @app.get("/metrics", tags=["operations"], response_class=Response)
    def metrics() -> Response:
        """Prometheus metrics of this process."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    if srv.console:  # the operator console at /console (its own sessions, roles and CSRF)
        from manifold.deploy.console.routes import install

        install(app, settings, backend, verifier.verify)

    for route in mcp_app.routes:  # MCP over streamable HTTP at /mcp, guarded below
        app.router.routes.append(route)

    def limit_for(scope: Any) -> int:
        if scope.get("method") == "POST" and scope.get("path") == "/v1/documents":
            return settings.ingest.max_document_bytes + UPLOAD_SLACK
        return srv.max_request_bytes

    app.add_middleware(McpGuard, verify=verifier.verify, limiter=limiter)
    app.add_middleware(BodyLimit, limit_for=limit_for)
    if srv.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(srv.cors_origins), allow_credentials=False,
                           allow_methods=["GET", "POST", "PUT", "DELETE"],
                           allow_headers=["authorization", "content-type", "mcp-protocol-version"])
    return app


def _template(app: FastAPI, scope: Any) -> str:
    """The path template of the route that serves `scope` (bounded metric labels), or `unmatched`."""
    from starlette.routing import Match

    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", "unmatched"))
    return "unmatched"


class McpGuard:
    """ASGI middleware: a `/mcp` request without a valid bearer token gets a 401 problem (and a
    rate-limited one 429) before the MCP transport sees it."""

    def __init__(self, app: Any, verify: Callable[[str], Principal], limiter: RateLimiter) -> None:
        self.app = app
        self.verify = verify
        self.limiter = limiter

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/mcp" or path.startswith("/mcp/")):
            await self.app(scope, receive, send)
            return
        headers = [(k.decode("latin-1"), v) for k, v in scope.get("headers", ())]
        token = protocol.bearer_token(headers)
        if token is None:
            await send_problem(scope, receive, send, 401, "missing-token",
                               "send header 'Authorization: Bearer <token>'", _UNAUTHORISED)
            return
        try:
            principal = self.verify(token)
        except TokenError as err:
            await send_problem(scope, receive, send, 401, "invalid-token", f"invalid token: {err.reason}",
                               _UNAUTHORISED)
            return
        if READ_SCOPE not in principal.scopes:
            await send_problem(scope, receive, send, 403, "missing-scope", f"the token lacks scope {READ_SCOPE!r}")
            return
        wait = self.limiter.take(f"{principal.tenant_id}\x00{principal.subject}")
        if wait:
            await send_problem(scope, receive, send, 429, "rate-limited", f"rate limit reached; retry in {wait:.1f}s",
                               retry_after(wait))
            return
        await self.app(scope, receive, send)
