"""Helpers for the `manifold serve` tests: a real uvicorn on a loopback port, in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from manifold.query.auth import mint_token
from manifold.shared.config import ManifoldSettings


@contextmanager
def running_uvicorn(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port); yields the base URL."""
    from manifold.deploy.serve.run import uvicorn_server

    server = uvicorn_server(app, "127.0.0.1", 0)
    server.install_signal_handlers = lambda: None  # not the main thread
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    give_up = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < give_up, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def token(settings: ManifoldSettings, tenant: str, *, scopes: tuple[str, ...] = ("query:read", "documents:write"),
          ttl_s: int = 600, now: float | None = None, key: str | None = None) -> str:
    q = settings.query
    return mint_token(key or q.token_key.get_secret_value(), tenant_id=tenant, subject="e2e-http", scopes=scopes,
                      issuer=q.token_issuer, audience=q.token_audience, ttl_s=ttl_s, now=now)
