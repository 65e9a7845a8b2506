"""`manifold.client`: a typed Python client for `manifold serve`, on httpx.

    from manifold.client import ManifoldClient
    with ManifoldClient("http://127.0.0.1:8080", token) as m:
        reply = m.ask("Which suppliers supply PRD-482?")          # query.types.QueryReply
        if reply.status == "clarify":
            reply = m.ask(session_id="s1", continuation=reply.clarification.continuation, choice="PRD-482")
        up = m.upload("notes/memo.txt", b"...")                     # Published
        for doc in m.wait_active(up):                               # DocumentStatus, until active
            print(doc.state)

Guarantees: replies are parsed into the server's own models (`QueryReply`, `DocumentStatus`,
`Published`), so a field the server does not send is a validation error, not a silent None. An
error response (an RFC 9457 problem document) raises `ProblemError` carrying its status, type
and detail; nothing is retried behind the caller's back. The client never sends a tenant: the
server takes it from the token.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from manifold.deploy.serve.models import DocumentList, DocumentStatus, Published
from manifold.query.types import QueryReply

__all__ = ["ManifoldClient", "ProblemError"]


class ProblemError(Exception):
    """The server answered with a problem document (or another non-2xx response)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.type = str(problem.get("type", "about:blank"))
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{status} {self.type}: {self.detail}")


class ManifoldClient:
    """One base URL, one bearer token, one connection pool (thread-safe, as httpx.Client is)."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = 75.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport,
                                  headers={"Authorization": f"Bearer {token}"})

    # -- queries ------------------------------------------------------------------------------
    def ask(self, question: str | None = None, *, session_id: str | None = None,
            continuation: str | None = None, choice: str | None = None, deadline_ms: int | None = None,
            as_of: str | None = None) -> QueryReply:
        body = {"question": question, "session_id": session_id, "continuation": continuation, "choice": choice,
                "deadline_ms": deadline_ms, "as_of": as_of}
        return QueryReply.model_validate(self._json("POST", "/v1/ask", json=_drop_none(body)))

    def plan(self, plan: dict[str, Any], *, deadline_ms: int | None = None) -> QueryReply:
        body = {"plan": plan, "deadline_ms": deadline_ms}
        return QueryReply.model_validate(self._json("POST", "/v1/plan", json=_drop_none(body)))

    # -- documents ----------------------------------------------------------------------------
    def documents(self) -> list[DocumentStatus]:
        return DocumentList.model_validate(self._json("GET", "/v1/documents")).documents

    def document(self, document_id: str) -> DocumentStatus:
        return DocumentStatus.model_validate(self._json("GET", f"/v1/documents/{quote(document_id, safe='/')}"))

    def upload(self, document_id: str, content: bytes | str, *, media_type: str | None = None) -> Published:
        """Publish one document (multipart); `Published.outcome` is `published` or `unchanged`."""
        data = {"document_id": document_id, **({"media_type": media_type} if media_type else {})}
        raw = content.encode() if isinstance(content, str) else content
        files = {"file": (Path(document_id).name, raw, media_type or "application/octet-stream")}
        return Published.model_validate(self._json("POST", "/v1/documents", data=data, files=files))

    def upload_file(self, path: str | Path, document_id: str | None = None) -> Published:
        path = Path(path)
        return self.upload(document_id or path.name, path.read_bytes())

    def delete(self, document_id: str) -> Published:
        return Published.model_validate(self._json("DELETE", f"/v1/documents/{quote(document_id, safe='/')}"))

    def wait_active(self, published: Published, *, timeout_s: float = 300.0,
                    poll_s: float = 0.5) -> Iterator[DocumentStatus]:
        """Yield the document's status each time it changes until `published.version` is active
        (or, for a delete, the document is deleted); raise TimeoutError after `timeout_s`."""
        give_up = time.monotonic() + timeout_s
        last = None
        while True:
            try:
                doc: DocumentStatus | None = self.document(published.document_id)
            except ProblemError as err:
                if err.status != 404:
                    raise
                doc = None
            if doc is not None and doc != last:
                last = doc
                yield doc
                if published.outcome == "deleted" and doc.state == "deleted":
                    return
                if published.outcome != "deleted" and doc.active_version == published.version:
                    return
                if doc.versions.get(published.version or -1) == "failed":
                    raise RuntimeError(f"{published.document_id} v{published.version} failed to publish")
            if time.monotonic() >= give_up:
                raise TimeoutError(f"{published.document_id} v{published.version} not done in {timeout_s:.0f}s")
            time.sleep(poll_s)

    # -- operations ---------------------------------------------------------------------------
    def ready(self) -> dict[str, Any]:
        response = self._http.get("/readyz")
        return response.json()  # type: ignore[no-any-return]  # httpx types json() as Any

    def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        response = self._http.request(method, url, **kwargs)
        if response.is_success:
            return response.json()
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:500]}
        raise ProblemError(response.status_code, body if isinstance(body, dict) else {"detail": str(body)})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ManifoldClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}
