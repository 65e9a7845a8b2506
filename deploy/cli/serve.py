"""`manifold serve` (HTTP API and MCP), `manifold mcp` (MCP over stdio) and `manifold token`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP, add_profile


def _serve(args: argparse.Namespace) -> int:
    from manifold.deploy.compose.process import limit_malloc_arenas
    from manifold.deploy.serve import run
    from manifold.query.auth import InsecureKey
    from manifold.shared.config import ManifoldSettings

    limit_malloc_arenas()
    settings = ManifoldSettings()
    try:
        run.serve(settings, args.host or settings.server.host, args.port or settings.server.port)
    except (InsecureKey, ValueError) as err:
        print(f"manifold serve: {err}", file=sys.stderr)
        return 2
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from manifold.deploy.compose.process import limit_malloc_arenas
    from manifold.deploy.serve import run
    from manifold.query.auth import InsecureKey
    from manifold.shared.config import ManifoldSettings

    limit_malloc_arenas()
    try:
        run.stdio(ManifoldSettings())
    except (InsecureKey, ValueError) as err:
        print(f"manifold mcp: {err}", file=sys.stderr)
        return 2
    return 0


def _duration_s(text: str) -> int:
    """`90`, `90s`, `15m`, `1h`, `2d` -> seconds."""
    import re

    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like 900, 15m, 1h or 1d")
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _token(args: argparse.Namespace) -> int:
    from manifold.query.auth import InsecureKey, TokenVerifier, mint_token, signing_key
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    try:
        TokenVerifier.from_settings(settings)  # the same key checks as every verifier
        ttl = _duration_s(args.ttl)
        q = settings.query
        algorithm, key = signing_key(settings)  # private key file, HS256 key, or the dev key when allowed
        token = mint_token(key, tenant_id=args.tenant, subject=args.subject, scopes=args.scope.split(),
                           issuer=q.token_issuer, audience=q.token_audience, ttl_s=ttl, algorithm=algorithm)
    except (InsecureKey, ValueError) as err:
        print(f"manifold token: {err}", file=sys.stderr)
        return 2
    print(token)
    return 0


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) and MCP at /mcp",
        description="distributed profile: a thin gateway over the query request/reply topics (run query workers "
        "beside it); embedded profile: answers in this process on one PostgreSQL. Callers send "
        "'Authorization: Bearer <token>' (manifold token). Settings MANIFOLD_SERVER__* (see README).",
    )
    serve.add_argument("--host", help="default MANIFOLD_SERVER__HOST (127.0.0.1)")
    serve.add_argument("--port", type=int, help="default MANIFOLD_SERVER__PORT (8080)")
    serve.set_defaults(run=_serve)

    mcp = sub.add_parser(
        "mcp",
        help="serve MCP over stdio (for desktop agents) as the principal of MANIFOLD_SERVER__MCP_TOKEN",
        description="Tools: ask, search_passages, lookup, metric, graph_neighbours, document_status.",
    )
    mcp.set_defaults(run=_mcp)

    token = sub.add_parser(
        "token",
        help="mint a principal token from MANIFOLD_QUERY__TOKEN_KEY (for curl, the client, MCP configs)",
        description="Prints a signed token for --tenant and --subject. The subject is the reader: every "
        "question asked with the token is answered from the documents whose ACL lets that user (or one "
        "of its groups, from `manifold groups set`, never from the token) read them. Refused when the key "
        "is the development key and MANIFOLD_QUERY__ALLOW_DEV_KEY is false, or shorter than 32 bytes.",
    )
    token.add_argument("--tenant", required=True, help=TENANT_HELP)
    token.add_argument("--ttl", default="1h", help="lifetime: 900, 15m, 1h, 1d (default 1h)")
    token.add_argument("--subject", default="manifold-token",
                       help="the user the token speaks for: the reader whose per-document ACLs and groups "
                       "apply (default manifold-token)")
    token.add_argument("--scope", default="query:read documents:write",
                       help="space-separated scopes (default 'query:read documents:write'; add 'acl:write acl:read' "
                       "for the HTTP ACL and group routes, and 'console:read', 'console:operate' or "
                       "'console:admin' for the /console operator console)")
    token.set_defaults(run=_token)
    for command in (serve, mcp):
        add_profile(command)
