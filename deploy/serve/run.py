"""Composition roots of `manifold serve` (uvicorn) and `manifold mcp` (stdio).

Guarantees: the token key is checked (`TokenVerifier.from_settings`) before anything starts, so
an insecure key fails fast with `InsecureKey`; the backend is closed when serving stops; `mcp`
over stdio refuses to start without a valid configured token (`server.mcp_token`) and acts as
that token's principal only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from manifold.shared.config import ManifoldSettings

log = logging.getLogger(__name__)


def build(settings: ManifoldSettings, backend: Any = None) -> tuple[Any, Any]:
    """(app, backend) for `settings`; builds the profile's backend unless one is given."""
    from manifold.deploy.serve.app import create_app
    from manifold.deploy.serve.backend import build_backend
    from manifold.query.auth import TokenVerifier

    verifier = TokenVerifier.from_settings(settings)
    backend = backend or build_backend(settings)
    return create_app(settings, backend, verifier), backend


def uvicorn_server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server for `app` (no access log; the app counts requests in /metrics)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=10, lifespan="on")
    return uvicorn.Server(config)


@contextmanager
def in_thread(app: Any, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 60.0) -> Iterator[str]:
    """Serve `app` with uvicorn in a background thread (port 0: a free one); yields the base URL
    once it accepts connections, and stops it on exit. For tests, benchmarks and embedding."""
    server = uvicorn_server(app, host, port)
    server.install_signal_handlers = lambda: None  # not the main thread
    thread = threading.Thread(target=server.run, name="manifold-serve-uvicorn", daemon=True)
    thread.start()
    give_up = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > give_up:
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    bound = server.servers[0].sockets[0].getsockname()
    try:
        yield f"http://{host}:{bound[1]}"
    finally:
        server.should_exit = True
        thread.join(30)


def serve(settings: ManifoldSettings, host: str, port: int, say: Any = print) -> None:
    """Serve the API and MCP on host:port until SIGINT/SIGTERM (uvicorn handles the signals)."""
    app, backend = build(settings)
    try:
        say(f"manifold serve ({settings.profile}): http://{host}:{port}  docs /docs  MCP /mcp")
        uvicorn_server(app, host, port).run()
    finally:
        backend.close()


def stdio(settings: ManifoldSettings) -> None:
    """MCP over stdio as the principal of `server.mcp_token`, answering through the profile's backend."""
    from manifold.deploy.serve.backend import build_backend
    from manifold.deploy.serve.mcp_tools import build_mcp, fixed_principal
    from manifold.query.auth import TokenError, TokenVerifier

    verifier = TokenVerifier.from_settings(settings)
    secret = settings.server.mcp_token
    if secret is None or not secret.get_secret_value():
        raise ValueError("set MANIFOLD_SERVER__MCP_TOKEN to the token this MCP server acts as "
                         "(manifold token --tenant T)")
    token = secret.get_secret_value()
    try:
        verifier.verify(token)
    except TokenError as err:
        raise ValueError(f"MANIFOLD_SERVER__MCP_TOKEN is not accepted: {err.reason}") from None
    backend = build_backend(settings)
    try:
        build_mcp(settings, backend, fixed_principal(verifier.verify, token)).run("stdio")
    finally:
        backend.close()
