"""The query request/reply wire format on Kafka.

Request: key = request id (UTF-8), value = `QueryRequest` JSON (at most 64 KiB), header
`authorization: Bearer <jwt>`. Reply: key = request id, value = `QueryReply` JSON, written to the
request's `reply_topic`.

Guarantees of `decode_request`: it returns only requests that validate as `QueryRequest`,
carry a bearer token, have exactly one of question / plan (or a continuation turn), a
timezone-aware deadline, and a `reply_topic` that is the configured reply topic or a name under
it (`<reply_topic>.<suffix>`), so a request cannot make a worker write to an arbitrary topic.
A body that names a tenant is refused: the tenant comes only from the signed token. Every
rejection is a `BadRequest` with a readable reason and, when recoverable, the request id and
the (allowed) reply topic, so the caller can still be told why.

`decode_request` raises nothing but `BadRequest`, whatever the bytes: any size, any nesting
depth (a `RecursionError` from ten thousand nested arrays included), invalid UTF-8, numbers too
long to convert. When the JSON cannot be parsed, the request id and reply topic are still
recovered from the raw bytes when they appear there as plain `"request_id": "..."` /
`"reply_topic": "..."` pairs, so the caller can still be told why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from manifold.query.types import QueryReply, QueryRequest, ReplyStatus, Trace
from manifold.shared import topics
from manifold.shared.errors import ManifoldError

MAX_REQUEST_BYTES = 64 * 1024
AUTH_HEADER = "authorization"
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_FORGED_TENANT_FIELDS = ("tenant", "tenant_id", "principal")
_RAW_FIELD_RE = {name: re.compile(rb'"' + name.encode() + rb'"\s*:\s*"([^"\\]{1,256})"')
                 for name in ("request_id", "reply_topic")}

Headers = Sequence[tuple[str, bytes | str | None]] | None


class BadRequest(ManifoldError):
    """A request that cannot be served as sent. `status` is `refused` (policy: no token, a
    tenant in the body) or `error` (malformed)."""

    def __init__(self, reason: str, *, status: Literal["refused", "error"] = "error",
                 request_id: str | None = None, reply_topic: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.request_id = request_id
        self.reply_topic = reply_topic


def reply_topic_allowed(topic: str, allowed: str) -> bool:
    """True for `allowed` itself or a topic under it (`allowed + "." + suffix`)."""
    return topic == allowed or (topic.startswith(allowed + ".") and len(topic) > len(allowed) + 1)


def bearer_token(headers: Headers) -> str | None:
    """The token of the first `authorization: Bearer ...` header (name case-insensitive)."""
    for name, raw in headers or ():
        if name.lower() != AUTH_HEADER or raw is None:
            continue
        value = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def decode_request(value: bytes | None, headers: Headers, *,
                   allowed_reply_topic: str = topics.QUERY_REPLIES) -> tuple[QueryRequest, str]:
    """Decode one request message into (request, bearer token); raise `BadRequest` otherwise
    (and nothing else, whatever the bytes). Does not verify the token (`auth.TokenVerifier`)."""
    try:
        return _decode(value, headers, allowed_reply_topic)
    except BadRequest:
        raise
    except Exception as err:  # noqa: BLE001 - no input may escape as anything but BadRequest
        request_id, reply_to = _recover_raw(value, allowed_reply_topic)
        raise BadRequest(f"request cannot be decoded ({type(err).__name__})", request_id=request_id,
                         reply_topic=reply_to) from None


def _decode(value: bytes | None, headers: Headers, allowed_reply_topic: str) -> tuple[QueryRequest, str]:
    if value is None:
        raise BadRequest("request has no value")
    if len(value) > MAX_REQUEST_BYTES:
        raise BadRequest(f"request is {len(value)} bytes; the limit is {MAX_REQUEST_BYTES}")
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        request_id, reply_to = _recover_raw(value, allowed_reply_topic)
        raise BadRequest("request is not valid JSON (or nested too deeply)", request_id=request_id,
                         reply_topic=reply_to) from None
    if not isinstance(data, dict):
        raise BadRequest("request must be a JSON object")
    request_id = _recover_request_id(data)
    reply_topic = data.get("reply_topic")
    reply_to = reply_topic if isinstance(reply_topic, str) and reply_topic_allowed(reply_topic, allowed_reply_topic) \
        else None

    def bad(reason: str, status: Literal["refused", "error"] = "error") -> BadRequest:
        return BadRequest(reason, status=status, request_id=request_id, reply_topic=reply_to)

    forged = [f for f in _FORGED_TENANT_FIELDS if f in data]
    if forged:
        raise bad(f"the request body may not name a tenant ({', '.join(forged)}); "
                  "the tenant comes from the signed token", "refused")
    if isinstance(reply_topic, str) and reply_to is None:
        raise bad(f"reply_topic {reply_topic!r} is not allowed; use {allowed_reply_topic!r} "
                  f"or a topic named {allowed_reply_topic!r}.<suffix>")
    token = bearer_token(headers)
    if token is None:
        raise bad("missing token: send header 'authorization: Bearer <token>'", "refused")
    try:
        request = QueryRequest.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise bad(f"invalid request: {where}: {first['msg']}") from None
    if request.deadline.tzinfo is None:
        raise bad("deadline must carry a timezone (e.g. ...Z)")
    has_question = request.question is not None and request.question.strip() != ""
    has_plan = request.plan is not None
    if has_question and has_plan:
        raise bad("send either a question or a plan, not both")
    if has_plan and request.continuation is not None:
        raise bad("a continuation resumes a question; it cannot be combined with a plan")
    if not has_question and not has_plan and request.continuation is None:
        raise bad("send a question or a plan (or a continuation with a choice)")
    return request, token


def _recover_raw(value: bytes | None, allowed_reply_topic: str) -> tuple[str | None, str | None]:
    """(request id, allowed reply topic) found as plain string fields in undecodable bytes."""
    found: dict[str, str | None] = {}
    for name, pattern in _RAW_FIELD_RE.items():
        match = pattern.search(value[:MAX_REQUEST_BYTES]) if isinstance(value, bytes) else None
        try:
            found[name] = match.group(1).decode("utf-8") if match else None
        except UnicodeDecodeError:
            found[name] = None
    rid, topic = found["request_id"], found["reply_topic"]
    return (rid if rid is not None and _REQUEST_ID_RE.fullmatch(rid) else None,
            topic if topic is not None and reply_topic_allowed(topic, allowed_reply_topic) else None)


def _recover_request_id(data: dict[str, Any]) -> str | None:
    rid = data.get("request_id")
    return rid if isinstance(rid, str) and _REQUEST_ID_RE.fullmatch(rid) else None


def encode_request(request: QueryRequest, token: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of a request message."""
    return (request.request_id.encode(), request.model_dump_json(exclude_none=True).encode(),
            [(AUTH_HEADER, f"Bearer {token}".encode())])


def encode_reply(reply: QueryReply) -> bytes:
    return reply.model_dump_json().encode()


def decode_reply(value: bytes) -> QueryReply:
    return QueryReply.model_validate_json(value)


def status_reply(request_id: str, status: ReplyStatus, error: str, *,
                 policy: Sequence[str] = (), elapsed_ms: float = 0.0) -> QueryReply:
    """A reply with no data: for refusals and errors raised before (or instead of) answering."""
    return QueryReply(request_id=request_id, status=status, error=error,
                      trace=Trace(request_id=request_id, policy=tuple(policy), elapsed_ms=elapsed_ms))


def bad_request_reply(err: BadRequest, key: bytes | None, *, elapsed_ms: float = 0.0) -> QueryReply:
    """The reply to a request that could not be decoded: correlated by the request id if it
    could be recovered, else by the Kafka message key."""
    request_id = err.request_id or (key.decode("utf-8", "replace")[:128] if key else "") or "unknown"
    return status_reply(request_id, err.status, err.reason, policy=(f"decode: {err.status}",),
                        elapsed_ms=elapsed_ms)


def utcnow() -> datetime:
    return datetime.now(UTC)
