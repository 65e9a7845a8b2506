"""RFC 9457 problem documents, and the ASGI guards that answer with them before the app runs.

Guarantees:
- Every error the server produces is `application/problem+json` with `type`, `title`, `status`,
  `detail` and `instance` (the request path); the detail never contains a token or a key.
- `BodyLimit` rejects a body larger than its limit with 413 before the app reads it: at once
  when `content-length` says so, or as soon as a chunked body passes the limit.
- `RateLimiter` is a token bucket per key (the principal): `rate_per_minute` sustained,
  `burst` at once; a refused request gets 429 with `Retry-After`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

PROBLEM_JSON = "application/problem+json"
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
          413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
          429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable",
          504: "Gateway Timeout"}


def problem(status: int, slug: str, detail: str, *, instance: str = "", headers: dict[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    """A problem document response; `slug` names the problem type (`urn:manifold:problem:<slug>`)."""
    body = {"type": f"urn:manifold:problem:{slug}", "title": TITLES.get(status, "Error"), "status": status,
            "detail": detail, **({"instance": instance} if instance else {}), **extra}
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


async def send_problem(scope: Scope, receive: Receive, send: Send, status: int, slug: str, detail: str,
                       headers: dict[str, str] | None = None) -> None:
    await problem(status, slug, detail, instance=scope.get("path", ""), headers=headers)(scope, receive, send)


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit_for(scope)` bytes (see module guarantees)."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[Scope], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_problem(scope, receive, send, 400, "bad-content-length",
                                       "content-length is not a number")
                    return
                if declared > limit:
                    await send_problem(scope, receive, send, 413, "body-too-large",
                                       f"the body is {declared} bytes; the limit here is {limit}")
                    return
        seen = 0
        started = rejected = False

        async def limited_receive() -> MutableMapping[str, Any]:
            nonlocal seen, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # answer 413 now; the app sees a disconnect and its output is dropped
                    rejected = True
                    if not started:
                        await send_problem(scope, receive, send, 413, "body-too-large",
                                           f"the body passed the limit of {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if rejected:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not rejected:
                raise


class RateLimiter:
    """Token buckets per key; thread-safe. `rate_per_minute=0` disables limiting."""

    def __init__(self, rate_per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate_per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0.0 if the request may proceed, else the seconds to wait before the next one will."""
        if self._rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - last) * self._rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > 100_000:  # bound memory: forget full buckets
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self._burst}
            return (1.0 - tokens) / self._rate


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def validation_detail(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A one-line detail and the JSON-safe list of validation errors (loc, msg, type)."""
    clean = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
             for e in errors]
    first = clean[0] if clean else {"loc": [], "msg": "invalid request"}
    return f"{'.'.join(first['loc']) or 'request'}: {first['msg']}", json.loads(json.dumps(clean))
