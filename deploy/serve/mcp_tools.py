"""The MCP server: manifold's query surface as typed tools (the `mcp` package's FastMCP).

Tools: `ask`, `search_passages`, `lookup`, `metric`, `graph_neighbours`, `document_status`.
Every tool but `document_status` is compiled into a request (a question, or an explicit plan in
the plan IR) and answered by the same `Backend` as `POST /v1/ask` / `POST /v1/plan`, so the plan
validation, tenant scoping, deadline and final active-version check are the service's. Each
returns an `EvidencePack` as structured content (status, answer, typed result, evidence with
document, version and chunk ids, gaps, clarification).

Guarantees: the principal comes from `principal_of(ctx)` — over streamable HTTP the caller's
bearer token (the app's guard has already rejected a request without a valid one), over stdio
the configured token — and never from a tool argument: no tool has a tenant parameter.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal

import anyio
from mcp.server.fastmcp import Context, FastMCP
from pydantic import Field

from manifold.deploy.serve.backend import Backend
from manifold.deploy.serve.models import DocumentList, EvidencePack
from manifold.query.plan import MetricName, Relation
from manifold.query.types import EntityKind, Principal, QueryRequest
from manifold.shared.config import ManifoldSettings

PrincipalOf = Callable[[Any], tuple[Principal, str]]
"""(tool context) -> (verified principal, its token); raises PermissionError when there is none."""

INSTRUCTIONS = (
    "manifold answers questions over one tenant's documents, records and entity graph, with citations. "
    "Use `ask` for natural-language questions (it may reply status 'clarify' with candidates: call `ask` "
    "again with the same session_id, the clarification's continuation and your choice). Use the other "
    "tools for direct retrieval. Every result lists its evidence (document, version, chunk ids).")

Ids = list[Annotated[str, Field(min_length=1, max_length=200)]]


def build_mcp(settings: ManifoldSettings, backend: Backend, principal_of: PrincipalOf, *,
              host: str = "127.0.0.1") -> FastMCP:
    """A FastMCP server over `backend` (stateless streamable HTTP at `/mcp`, JSON responses)."""
    mcp = FastMCP("manifold", instructions=INSTRUCTIONS, stateless_http=True, json_response=True,
                  streamable_http_path="/mcp", host=host, log_level="WARNING")
    q = settings.query

    def request(*, question: str | None = None, plan: dict[str, Any] | None = None, session_id: str | None = None,
                continuation: str | None = None, choice: str | None = None,
                deadline_ms: int | None = None) -> QueryRequest:
        ms = min(deadline_ms or q.default_deadline_ms, q.max_deadline_ms)
        return QueryRequest(request_id=f"mcp-{uuid.uuid4().hex}", reply_topic=q.reply_topic,
                            deadline=datetime.now(UTC) + timedelta(milliseconds=ms), question=question, plan=plan,
                            session_id=session_id, continuation=continuation, choice=choice)

    async def run(ctx: Context, req: QueryRequest) -> EvidencePack:  # type: ignore[type-arg]  # bare Context: FastMCP spots it
        principal, token = principal_of(ctx)
        reply = await anyio.to_thread.run_sync(backend.answer, req, principal, token)
        return EvidencePack.of(reply)

    def one_step(step_id: str, operator: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"steps": [{"id": step_id, "operator": operator,
                           "params": {k: v for k, v in params.items() if v is not None}}]}

    @mcp.tool(description="Ask a question in natural language; returns the answer with its evidence. "
              "A 'clarify' status carries candidates and a continuation: answer it by calling ask again "
              "with session_id, continuation and choice.")
    async def ask(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                  question: Annotated[str | None, Field(max_length=4000)] = None,
                  session_id: Annotated[str | None, Field(max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")] = None,
                  continuation: Annotated[str | None, Field(max_length=8192)] = None,
                  choice: Annotated[str | None, Field(max_length=256)] = None,
                  deadline_ms: Annotated[int | None, Field(ge=100, le=600_000)] = None) -> EvidencePack:
        if not (question and question.strip()) and continuation is None:
            raise ValueError("give a question, or a continuation with a choice")
        return await run(ctx, request(question=question, session_id=session_id, continuation=continuation,
                                      choice=choice, deadline_ms=deadline_ms))

    @mcp.tool(description="Search passages (chunks of active documents) by BM25, vector similarity or "
              "both fused (hybrid); optionally only within some documents.")
    async def search_passages(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                              query: Annotated[str, Field(min_length=1, max_length=1000)],
                              mode: Literal["bm25", "vector", "hybrid"] = "hybrid",
                              limit: Annotated[int, Field(ge=1, le=100)] = 10,
                              document_ids: Ids | None = None,
                              deadline_ms: Annotated[int | None, Field(ge=100, le=600_000)] = None) -> EvidencePack:
        plan = one_step("search", f"{mode}_search", {"query": query, "limit": limit, "document_ids": document_ids})
        return await run(ctx, request(plan=plan, deadline_ms=deadline_ms))

    @mcp.tool(description="Look up an exact identifier (invoice, order, contract, product code, ...) "
              "in the text index and the records.")
    async def lookup(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                     identifier: Annotated[str, Field(min_length=1, max_length=200)],
                     limit: Annotated[int, Field(ge=1, le=100)] = 20,
                     deadline_ms: Annotated[int | None, Field(ge=100, le=600_000)] = None) -> EvidencePack:
        plan = one_step("lookup", "exact_lookup", {"identifiers": [identifier], "limit": limit})
        return await run(ctx, request(plan=plan, deadline_ms=deadline_ms))

    @mcp.tool(description="Compute an allowlisted metric over the records: total_spend (needs a period or "
              "a company/supplier/product), revenue_at_risk, unit_price_on (needs product_codes and on). "
              "Periods are half-open [period_start, period_end). Amounts are decimal strings.")
    async def metric(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                     metric: MetricName,
                     company_names: Ids | None = None,
                     supplier_names: Ids | None = None,
                     product_codes: Ids | None = None,
                     order_numbers: Ids | None = None,
                     period_start: date | None = None,
                     period_end: date | None = None,
                     on: date | None = None,
                     currency: Annotated[str | None, Field(pattern=r"^[A-Z]{3}$")] = None,
                     statuses: list[Annotated[str, Field(min_length=1, max_length=40)]] | None = None,
                     deadline_ms: Annotated[int | None, Field(ge=100, le=600_000)] = None) -> EvidencePack:
        if (period_start is None) != (period_end is None):
            raise ValueError("give both period_start and period_end, or neither")
        where: dict[str, Any] = {
            "company_names": company_names, "supplier_names": supplier_names, "product_codes": product_codes,
            "order_numbers": order_numbers, "on": on.isoformat() if on else None, "currency": currency,
            "statuses": statuses,
            "period": {"start": period_start.isoformat(), "end": period_end.isoformat()}
            if period_start and period_end else None}
        plan = one_step("metric", "metric_query",
                        {"metric": metric, "where": {k: v for k, v in where.items() if v is not None}})
        return await run(ctx, request(plan=plan, deadline_ms=deadline_ms))

    @mcp.tool(description="Resolve an entity by name (or identifier) and follow a relation from it in the "
              "entity graph, e.g. kind=product name=PRD-482 relation=SUPPLIES direction=in gives its suppliers.")
    async def graph_neighbours(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                               kind: EntityKind,
                               name: Annotated[str, Field(min_length=1, max_length=200)],
                               relation: Relation,
                               direction: Literal["out", "in"] = "out",
                               max_hops: Annotated[int, Field(ge=1, le=3)] = 1,
                               deadline_ms: Annotated[int | None, Field(ge=100, le=600_000)] = None) -> EvidencePack:
        plan = {"steps": [
            {"id": "anchor", "operator": "resolve_entity", "params": {"kind": kind, "text": name}},
            {"id": "neighbours", "operator": "graph_expand",
             "params": {"from_ids": "$anchor.ids", "relation": relation, "direction": direction,
                        "max_hops": max_hops}}]}
        return await run(ctx, request(plan=plan, deadline_ms=deadline_ms))

    @mcp.tool(description="Publication status of the caller's documents (all, or one document id): "
              "active version and the state of every version.")
    async def document_status(ctx: Context,  # type: ignore[type-arg]  # FastMCP finds the context by the bare class
                              document_id: Annotated[str | None, Field(min_length=1, max_length=512)] = None
                              ) -> DocumentList:
        principal, _ = principal_of(ctx)
        docs = await anyio.to_thread.run_sync(backend.documents, principal)
        return DocumentList(documents=[d for d in docs if document_id is None or d.document_id == document_id])

    return mcp


def http_principal(verify: Callable[[str], Principal]) -> PrincipalOf:
    """`PrincipalOf` for streamable HTTP: the bearer token of the HTTP request of the call."""
    from manifold.query.protocol import bearer_token

    def principal_of(ctx: Any) -> tuple[Principal, str]:
        req = getattr(ctx.request_context, "request", None)
        token = bearer_token(list(req.headers.items())) if req is not None else None
        if token is None:
            raise PermissionError("no bearer token on this MCP request")
        return verify(token), token

    return principal_of


def fixed_principal(verify: Callable[[str], Principal], token: str) -> PrincipalOf:
    """`PrincipalOf` for stdio: the one configured token, verified on every call (so it stops
    working when it expires)."""
    return lambda _ctx: (verify(token), token)
