"""Helpers for the `manifold serve` tests: a real uvicorn on a loopback port, in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from manifold.query.auth import mint_token, signing_key
from manifold.shared.config import ManifoldSettings


@contextmanager
def running_uvicorn(app: Any) -> Iterator[str]:
    """Serve `app` with a real uvicorn on 127.0.0.1 (a free port); yields the base URL."""
    from manifold.deploy.serve.run import in_thread

    with in_thread(app) as url:
        yield url


def token(settings: ManifoldSettings, tenant: str, *, scopes: tuple[str, ...] = ("query:read", "documents:write"),
          ttl_s: int = 600, now: float | None = None, key: str | None = None, subject: str = "e2e-http") -> str:
    q = settings.query
    algorithm, signing = signing_key(settings)  # the configured key, or the dev key the tests opt into
    return mint_token(key or signing, tenant_id=tenant, subject=subject, scopes=scopes,
                      issuer=q.token_issuer, audience=q.token_audience, ttl_s=ttl_s, now=now,
                      algorithm="HS256" if key else algorithm)
