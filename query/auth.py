"""Principal tokens: HS256 JWTs that carry who is asking and for which tenant.

Guarantees:
- `verify_token` returns a `Principal` only for a token signed with `key` using HS256, issued by
  `issuer` for `audience`, inside its `nbf`..`exp` window (± `clock_skew_s`), with every claim
  present and well-formed. Anything else raises `TokenError` with a short, loggable reason
  (the reason never contains the token or the key).
- The algorithm is checked before the signature: `alg: none` and every other algorithm
  (RS256, HS512, ...) are rejected explicitly, so no key-confusion downgrade is possible.
- The tenant of a `Principal` comes only from the signed `tenant` claim.
- `TokenVerifier.from_settings` refuses the built-in development key unless
  `query.allow_dev_key` is true, and refuses keys shorter than 32 bytes.

Claims: `sub`, `tenant` (slug), `scope` (space-separated), `iss`, `aud`, `iat`, `nbf`, `exp`,
`jti`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import jwt

from manifold.query.types import Principal
from manifold.shared.config import DEV_TOKEN_KEY, ManifoldSettings
from manifold.shared.errors import ManifoldError

ALGORITHM = "HS256"
MIN_KEY_BYTES = 32
TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_SCOPE_RE = re.compile(r"^[A-Za-z0-9:._-]{1,64}$")
REQUIRED_CLAIMS = ("sub", "tenant", "scope", "iss", "aud", "iat", "nbf", "exp", "jti")


class TokenError(ManifoldError):
    """A token was not accepted; `reason` says why (expired, bad signature, wrong audience, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InsecureKey(ValueError):
    """The configured signing key must not be used (development key in production, too short)."""


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


def mint_token(
    key: str,
    *,
    tenant_id: str,
    subject: str,
    scopes: Sequence[str] = ("query:read",),
    issuer: str,
    audience: str,
    ttl_s: int,
    now: float | None = None,
) -> str:
    """Sign a principal token valid from `now` for `ttl_s` seconds. Raises ValueError for a
    tenant that is not a slug, an empty subject, a malformed scope or a non-positive ttl."""
    if not TENANT_RE.match(tenant_id):
        raise ValueError(f"tenant {tenant_id!r} is not a slug ({TENANT_RE.pattern})")
    if not subject:
        raise ValueError("subject must not be empty")
    if not scopes or not all(_SCOPE_RE.match(s) for s in scopes):
        raise ValueError(f"scopes must be non-empty tokens without spaces: {list(scopes)!r}")
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    issued = _now(now)
    claims = {
        "sub": subject,
        "tenant": tenant_id,
        "scope": " ".join(scopes),
        "iss": issuer,
        "aud": audience,
        "iat": issued,
        "nbf": issued,
        "exp": issued + int(ttl_s),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"typ": "JWT"})


def verify_token(
    token: str,
    *,
    key: str,
    issuer: str,
    audience: str,
    clock_skew_s: int,
    now: float | None = None,
) -> Principal:
    """Verify `token` and return its principal, or raise `TokenError` (see module guarantees)."""
    if not isinstance(token, str) or not token:
        raise TokenError("missing token")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenError("malformed token") from None
    alg = header.get("alg")
    if alg != ALGORITHM:
        raise TokenError(f"algorithm {alg!r} is not accepted (only {ALGORITHM})")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=audience,
            issuer=issuer,
            # Time claims are checked below against `now` (PyJWT only knows the wall clock).
            options={"require": list(REQUIRED_CLAIMS), "verify_exp": False, "verify_nbf": False,
                     "verify_iat": False},
        )
    except jwt.InvalidSignatureError:
        raise TokenError("bad signature") from None
    except jwt.MissingRequiredClaimError as err:
        raise TokenError(f"missing claim {err.claim!r}") from None
    except jwt.InvalidAudienceError:
        raise TokenError("wrong audience") from None
    except jwt.InvalidIssuerError:
        raise TokenError("wrong issuer") from None
    except jwt.InvalidAlgorithmError:
        raise TokenError(f"algorithm {alg!r} is not accepted (only {ALGORITHM})") from None
    except jwt.PyJWTError as err:
        raise TokenError(f"malformed token ({type(err).__name__})") from None
    return _principal(claims, _now(now), clock_skew_s)


def _principal(claims: dict[str, object], now: int, skew: int) -> Principal:
    for name in ("iat", "nbf", "exp"):
        if not isinstance(claims[name], int) or isinstance(claims[name], bool):
            raise TokenError(f"claim {name!r} is not an integer timestamp")
    exp, nbf, iat = int(claims["exp"]), int(claims["nbf"]), int(claims["iat"])  # type: ignore[call-overload]
    if now >= exp + skew:
        raise TokenError("expired")
    if now + skew < nbf:
        raise TokenError("not yet valid")
    if now + skew < iat:
        raise TokenError("issued in the future")
    tenant, subject, scope, jti = claims["tenant"], claims["sub"], claims["scope"], claims["jti"]
    if not isinstance(tenant, str) or not TENANT_RE.match(tenant):
        raise TokenError("claim 'tenant' is not a tenant slug")
    if not isinstance(subject, str) or not subject or len(subject) > 256:
        raise TokenError("claim 'sub' is empty or too long")
    if not isinstance(jti, str) or not jti:
        raise TokenError("claim 'jti' is empty")
    if not isinstance(scope, str) or not scope.split() or not all(_SCOPE_RE.match(s) for s in scope.split()):
        raise TokenError("claim 'scope' is not a space-separated list of scopes")
    return Principal(tenant_id=tenant, subject=subject, scopes=tuple(scope.split()))


@dataclass(frozen=True)
class TokenVerifier:
    """Verifies tokens against one key, issuer and audience (thread-safe, holds no state)."""

    key: str
    issuer: str
    audience: str
    clock_skew_s: int = 30

    def __repr__(self) -> str:  # never show the key
        return f"TokenVerifier(issuer={self.issuer!r}, audience={self.audience!r})"

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> TokenVerifier:
        """Raises `InsecureKey` for the development key when `query.allow_dev_key` is false and
        for any key shorter than 32 bytes."""
        q = settings.query
        key = q.token_key.get_secret_value()
        if key == DEV_TOKEN_KEY and not q.allow_dev_key:
            raise InsecureKey("query.token_key is the built-in development key and query.allow_dev_key "
                              "is false; set MANIFOLD_QUERY__TOKEN_KEY")
        if len(key.encode()) < MIN_KEY_BYTES:
            raise InsecureKey(f"query.token_key is shorter than {MIN_KEY_BYTES} bytes")
        return cls(key=key, issuer=q.token_issuer, audience=q.token_audience, clock_skew_s=q.clock_skew_s)

    def verify(self, token: str, *, now: float | None = None) -> Principal:
        return verify_token(token, key=self.key, issuer=self.issuer, audience=self.audience,
                            clock_skew_s=self.clock_skew_s, now=now)
