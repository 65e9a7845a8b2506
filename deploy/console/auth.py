"""Who is using the console, and in which role: sessions, roles from scopes, CSRF.

Guarantees:
- The principal comes only from a verified token (`query.auth.TokenVerifier`): either the
  `Authorization: Bearer` header (scripts, checks) or the session cookie that signing in sets,
  which holds that same token (HttpOnly, SameSite=Strict, Secure when served over HTTPS, path
  `/console`). Every request verifies it again, so an expired or revoked-key token ends the
  session. The tenant is the token's; nothing in a URL or form can name another one.
- Roles come from the token's scopes and are checked on the server for every route:
  `console:admin` ⊃ `console:operate` ⊃ `console:read` (admin implies operator implies viewer).
  A token without any of them cannot sign in.
- Every state-changing request authenticated by the cookie must carry the CSRF token (form field
  `csrf` or header `X-CSRF-Token`): an HMAC of the session token under a per-process secret,
  compared in constant time. A bearer-header request needs none (a browser never adds that
  header on its own).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import IntEnum

from manifold.query.types import Principal

COOKIE = "manifold_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


class Role(IntEnum):
    """Console roles, ordered: a higher role may do everything a lower one may."""

    viewer = 1
    operator = 2
    admin = 3


SCOPES = {"console:read": Role.viewer, "console:operate": Role.operator, "console:admin": Role.admin}


def role_of(principal: Principal) -> Role | None:
    """The highest console role the principal's scopes grant, or None (no console access)."""
    granted = [SCOPES[s] for s in principal.scopes if s in SCOPES]
    return max(granted) if granted else None


@dataclass(frozen=True)
class Visitor:
    """A verified console user: the principal, its role, how it authenticated and its CSRF token
    (empty for bearer-header requests, which need none)."""

    principal: Principal
    role: Role
    via_cookie: bool
    csrf: str

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    @property
    def name(self) -> str:
        return self.principal.subject

    def may(self, needed: Role) -> bool:
        return self.role >= needed


class Csrf:
    """CSRF tokens bound to one session token, under a secret that lives as long as the process
    (a restart signs everyone's forms anew; sessions themselves survive: the cookie is the token)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token_for(self, session_token: str) -> str:
        return hmac.new(self._secret, session_token.encode(), hashlib.sha256).hexdigest()

    def valid(self, session_token: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(self.token_for(session_token), str(given))
