"""Composition root of a query worker process: builds the `Answerer` from settings.

Nothing connects at import time; `build_answerer` connects lazily on first use.
"""

from __future__ import annotations

from typing import Protocol

from manifold.query.types import Principal, QueryReply, QueryRequest
from manifold.shared.config import ManifoldSettings


class Answerer(Protocol):
    """Answers one verified request for one authenticated principal. Never raises for bad
    questions or store failures: those become `refused`, `partial` or `error` replies."""

    def answer(self, request: QueryRequest, principal: Principal) -> QueryReply: ...

    def close(self) -> None: ...


def build_answerer(settings: ManifoldSettings) -> Answerer:
    """The real answerer over the stores named in `settings` (filled in by the query engine)."""
    raise NotImplementedError("query engine not wired yet")
