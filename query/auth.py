"""Principal tokens: JWTs that carry who is asking and for which tenant.

Guarantees:
- `verify_token` returns a `Principal` only for a token signed by one of the configured keys with
  that key's algorithm (HS256 for a shared secret, EdDSA for an Ed25519 public key, RS256 for an
  RSA public key of at least 2048 bits), issued by `issuer` for `audience`, inside its
  `nbf`..`exp` window (± `clock_skew_s`), with every claim present and well-formed, a lifetime
  (`exp` minus the earlier of `iat`/`nbf`) of at most `max_lifetime_s`, and an `exp` no further
  ahead than `max_lifetime_s`. Anything else raises `TokenError` with a short, loggable reason
  (never the token or a key).
- The algorithm is checked before the signature and must be that of a configured key:
  `alg: none` and every other algorithm are rejected explicitly, and an HS256 token is never
  checked against a public key (no key-confusion downgrade).
- The tenant of a `Principal` comes only from the signed `tenant` claim.
- `TokenVerifier.from_settings` needs a configured key: `query.token_public_key_file` (PEM) or
  `query.token_jwks_file` (a local JWKS, public keys only) so query workers hold no signing
  secret, or `query.token_key` (HS256, at least 32 bytes). The built-in development key is used
  only when `query.allow_dev_key` is true (default false); otherwise `InsecureKey` is raised, so a
  worker without a key refuses to start.

Claims: `sub`, `tenant` (slug), `scope` (space-separated), `iss`, `aud`, `iat`, `nbf`, `exp`,
`jti`.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from manifold.query.types import Principal
from manifold.shared.config import DEV_TOKEN_KEY, ManifoldSettings
from manifold.shared.errors import ManifoldError

log = logging.getLogger(__name__)

ALGORITHM = "HS256"
ASYMMETRIC = ("EdDSA", "RS256")
MIN_KEY_BYTES = 32
MIN_RSA_BITS = 2048
DEFAULT_MAX_LIFETIME_S = 86400
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A tenant slug; always used with `fullmatch` (`match` + `$` would accept a trailing newline)."""
_SCOPE_RE = re.compile(r"[A-Za-z0-9:._-]{1,64}")
REQUIRED_CLAIMS = ("sub", "tenant", "scope", "iss", "aud", "iat", "nbf", "exp", "jti")


class TokenError(ManifoldError):
    """A token was not accepted; `reason` says why (expired, bad signature, wrong audience, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InsecureKey(ValueError):
    """No usable token key is configured (none at all, the development key without the opt-in,
    too short, or a key file that is not a public key of a supported type)."""


@dataclass(frozen=True)
class VerificationKey:
    """One key tokens may be signed with: its algorithm, the key (an HS256 secret or a public
    key object) and, from a JWKS, its key id."""

    algorithm: str
    key: Any
    kid: str | None = None

    def __repr__(self) -> str:  # never show a secret
        return f"VerificationKey({self.algorithm}, kid={self.kid!r})"


def _algorithm_of_public_key(key: Any, where: str) -> str:
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

    if isinstance(key, ed25519.Ed25519PublicKey):
        return "EdDSA"
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise InsecureKey(f"{where}: RSA key of {key.key_size} bits; at least {MIN_RSA_BITS} needed")
        return "RS256"
    raise InsecureKey(f"{where}: only Ed25519 (EdDSA) and RSA (RS256) public keys are supported")


def load_public_key(path: Path) -> VerificationKey:
    """A PEM public key file (Ed25519 or RSA). Raises `InsecureKey` for anything else."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError, TypeError) as err:
        raise InsecureKey(f"query.token_public_key_file {path}: not a readable PEM public key ({err})") from None
    return VerificationKey(_algorithm_of_public_key(key, str(path)), key)


def load_jwks(path: Path) -> list[VerificationKey]:
    """The public keys of a local JWKS file (`{"keys": [...]}`). Symmetric (`oct`) keys and
    private keys are refused: a verifier must hold no signing material."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise InsecureKey(f"query.token_jwks_file {path}: not a readable JSON file ({err})") from None
    raw_keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(raw_keys, list) or not raw_keys:
        raise InsecureKey(f"query.token_jwks_file {path}: no 'keys' list")
    out = []
    for raw in raw_keys:
        if not isinstance(raw, dict) or raw.get("kty") not in ("OKP", "RSA"):
            raise InsecureKey(f"query.token_jwks_file {path}: only OKP (Ed25519) and RSA public keys are accepted")
        if "d" in raw:
            raise InsecureKey(f"query.token_jwks_file {path}: holds a private key; publish public keys only")
        try:
            jwk = jwt.PyJWK(raw)
        except jwt.PyJWTError as err:
            raise InsecureKey(f"query.token_jwks_file {path}: bad key ({err})") from None
        algorithm = _algorithm_of_public_key(jwk.key, str(path))
        if raw.get("alg") not in (None, algorithm):
            raise InsecureKey(f"query.token_jwks_file {path}: key alg {raw.get('alg')!r} is not {algorithm}")
        out.append(VerificationKey(algorithm, jwk.key, raw.get("kid") if isinstance(raw.get("kid"), str) else None))
    return out


def load_signing_key(path: Path) -> tuple[str, Any]:
    """(algorithm, private key) from a PEM private key file (Ed25519 or RSA): for token issuers,
    the CLI and tests. Query workers never need it."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise InsecureKey(f"query.token_signing_key_file {path}: not a readable PEM private key ({err})") from None
    return _algorithm_of_public_key(key.public_key(), str(path)), key


def verification_keys(settings: ManifoldSettings) -> list[VerificationKey]:
    """Every key `settings.query` configures; raises `InsecureKey` when none is usable."""
    q = settings.query
    keys: list[VerificationKey] = []
    if q.token_public_key_file is not None:
        keys.append(load_public_key(q.token_public_key_file))
    if q.token_jwks_file is not None:
        keys.extend(load_jwks(q.token_jwks_file))
    secret = q.token_key.get_secret_value() if q.token_key is not None else None
    if secret == DEV_TOKEN_KEY and not q.allow_dev_key:
        raise InsecureKey("query.token_key is the built-in development key and query.allow_dev_key is false; "
                          "set your own key")
    if secret is not None:
        if len(secret.encode()) < MIN_KEY_BYTES:
            raise InsecureKey(f"query.token_key is shorter than {MIN_KEY_BYTES} bytes")
        keys.append(VerificationKey(ALGORITHM, secret))
    if not keys:
        if not q.allow_dev_key:
            raise InsecureKey(
                "no token key configured: set MANIFOLD_QUERY__TOKEN_PUBLIC_KEY_FILE (PEM, Ed25519 or RSA), "
                "MANIFOLD_QUERY__TOKEN_JWKS_FILE or MANIFOLD_QUERY__TOKEN_KEY (HS256, >= 32 bytes); for local "
                "development only, MANIFOLD_QUERY__ALLOW_DEV_KEY=true accepts the built-in development key")
        keys.append(VerificationKey(ALGORITHM, DEV_TOKEN_KEY))
    return keys


def uses_dev_key(settings: ManifoldSettings) -> bool:
    """True when tokens signed with the public development key are accepted."""
    q = settings.query
    configured = q.token_key is not None or q.token_public_key_file is not None or q.token_jwks_file is not None
    return q.allow_dev_key and (not configured or (q.token_key is not None
                                                   and q.token_key.get_secret_value() == DEV_TOKEN_KEY))


def signing_key(settings: ManifoldSettings) -> tuple[str, Any]:
    """(algorithm, key) to mint tokens with: `token_signing_key_file`, else `token_key`, else the
    development key when allowed. Raises `InsecureKey` otherwise."""
    q = settings.query
    if q.token_signing_key_file is not None:
        return load_signing_key(q.token_signing_key_file)
    if q.token_key is not None:
        return ALGORITHM, q.token_key.get_secret_value()
    if q.allow_dev_key:
        return ALGORITHM, DEV_TOKEN_KEY
    raise InsecureKey("no key to sign tokens with: set MANIFOLD_QUERY__TOKEN_SIGNING_KEY_FILE or "
                      "MANIFOLD_QUERY__TOKEN_KEY (or MANIFOLD_QUERY__ALLOW_DEV_KEY=true for local development)")


def continuation_secret(settings: ManifoldSettings) -> str:
    """The secret that seals clarification continuations (shared by the query workers, never a
    token-signing key when tokens are asymmetric): `continuation_key`, else `token_key`, else the
    development key when allowed. Raises `InsecureKey` otherwise."""
    q = settings.query
    for candidate in (q.continuation_key, q.token_key):
        if candidate is not None:
            value = candidate.get_secret_value()
            if value == DEV_TOKEN_KEY and not q.allow_dev_key:
                raise InsecureKey("the continuation key is the built-in development key; set your own")
            if len(value.encode()) < MIN_KEY_BYTES:
                raise InsecureKey(f"query.continuation_key is shorter than {MIN_KEY_BYTES} bytes")
            return value
    if q.allow_dev_key:
        return DEV_TOKEN_KEY
    raise InsecureKey("set MANIFOLD_QUERY__CONTINUATION_KEY (>= 32 bytes, shared by the query workers): with "
                      "public-key tokens the workers hold no secret to seal clarification continuations with")


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


def mint_token(
    key: Any,
    *,
    tenant_id: str,
    subject: str,
    scopes: Sequence[str] = ("query:read",),
    issuer: str,
    audience: str,
    ttl_s: int,
    now: float | None = None,
    algorithm: str = ALGORITHM,
    kid: str | None = None,
) -> str:
    """Sign a principal token valid from `now` for `ttl_s` seconds with `key` (an HS256 secret,
    or an Ed25519 / RSA private key with `algorithm` EdDSA / RS256). Raises ValueError for a
    tenant that is not a slug, an empty subject, a malformed scope or a non-positive ttl."""
    if not TENANT_RE.fullmatch(tenant_id):
        raise ValueError(f"tenant {tenant_id!r} is not a slug ({TENANT_RE.pattern})")
    if not subject:
        raise ValueError("subject must not be empty")
    if not scopes or not all(_SCOPE_RE.fullmatch(s) for s in scopes):
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
    headers = {"typ": "JWT", **({"kid": kid} if kid else {})}
    return jwt.encode(claims, key, algorithm=algorithm, headers=headers)


def verify_token(
    token: str,
    *,
    key: str | VerificationKey | Sequence[VerificationKey],
    issuer: str,
    audience: str,
    clock_skew_s: int,
    now: float | None = None,
    max_lifetime_s: int = DEFAULT_MAX_LIFETIME_S,
) -> Principal:
    """Verify `token` and return its principal, or raise `TokenError` (see module guarantees).
    `key` is an HS256 secret, or the configured `VerificationKey`s."""
    keys = [VerificationKey(ALGORITHM, key)] if isinstance(key, str) else \
        [key] if isinstance(key, VerificationKey) else list(key)
    if not isinstance(token, str) or not token:
        raise TokenError("missing token")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenError("malformed token") from None
    alg = header.get("alg")
    accepted = sorted({k.algorithm for k in keys})
    candidates = [k for k in keys if k.algorithm == alg]
    if not candidates:
        raise TokenError(f"algorithm {alg!r} is not accepted (only {', '.join(accepted)})")
    kid = header.get("kid")
    if isinstance(kid, str) and any(k.kid for k in candidates):
        candidates = [k for k in candidates if k.kid == kid]
        if not candidates:
            raise TokenError("unknown key id")
    claims: dict[str, Any] | None = None
    for candidate in candidates:
        try:
            claims = jwt.decode(
                token,
                candidate.key,
                algorithms=[candidate.algorithm],
                audience=audience,
                issuer=issuer,
                # Time claims are checked below against `now` (PyJWT only knows the wall clock).
                options={"require": list(REQUIRED_CLAIMS), "verify_exp": False, "verify_nbf": False,
                         "verify_iat": False},
            )
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.MissingRequiredClaimError as err:
            raise TokenError(f"missing claim {err.claim!r}") from None
        except jwt.InvalidAudienceError:
            raise TokenError("wrong audience") from None
        except jwt.InvalidIssuerError:
            raise TokenError("wrong issuer") from None
        except jwt.InvalidAlgorithmError:
            raise TokenError(f"algorithm {alg!r} is not accepted (only {', '.join(accepted)})") from None
        except jwt.PyJWTError as err:
            raise TokenError(f"malformed token ({type(err).__name__})") from None
    if claims is None:
        raise TokenError("bad signature")
    return _principal(claims, _now(now), clock_skew_s, max_lifetime_s)


def _principal(claims: dict[str, object], now: int, skew: int, max_lifetime_s: int) -> Principal:
    for name in ("iat", "nbf", "exp"):
        if not isinstance(claims[name], int) or isinstance(claims[name], bool):
            raise TokenError(f"claim {name!r} is not an integer timestamp")
    exp, nbf, iat = int(claims["exp"]), int(claims["nbf"]), int(claims["iat"])  # type: ignore[call-overload]  # ints: checked above
    if now >= exp + skew:
        raise TokenError("expired")
    if now + skew < nbf:
        raise TokenError("not yet valid")
    if now + skew < iat:
        raise TokenError("issued in the future")
    if exp - min(iat, nbf) > max_lifetime_s:
        raise TokenError(f"lifetime exceeds the {max_lifetime_s} s cap")
    if exp > now + max_lifetime_s + skew:
        raise TokenError(f"expires more than {max_lifetime_s} s ahead")
    tenant, subject, scope, jti = claims["tenant"], claims["sub"], claims["scope"], claims["jti"]
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise TokenError("claim 'tenant' is not a tenant slug")
    if not isinstance(subject, str) or not subject or len(subject) > 256:
        raise TokenError("claim 'sub' is empty or too long")
    if not isinstance(jti, str) or not jti:
        raise TokenError("claim 'jti' is empty")
    if not isinstance(scope, str) or not scope.split() or not all(_SCOPE_RE.fullmatch(s) for s in scope.split()):
        raise TokenError("claim 'scope' is not a space-separated list of scopes")
    return Principal(tenant_id=tenant, subject=subject, scopes=tuple(scope.split()))


@dataclass(frozen=True)
class TokenVerifier:
    """Verifies tokens against the configured keys, issuer and audience (thread-safe, no state)."""

    keys: tuple[VerificationKey, ...]
    issuer: str
    audience: str
    clock_skew_s: int = 30
    max_lifetime_s: int = DEFAULT_MAX_LIFETIME_S

    def __repr__(self) -> str:  # never show a key
        return (f"TokenVerifier(algorithms={sorted({k.algorithm for k in self.keys})}, issuer={self.issuer!r}, "
                f"audience={self.audience!r})")

    @property
    def asymmetric(self) -> bool:
        """True when no key is a shared secret: this verifier cannot mint tokens."""
        return all(k.algorithm in ASYMMETRIC for k in self.keys)

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> TokenVerifier:
        """Raises `InsecureKey` when no usable key is configured (see `verification_keys`)."""
        q = settings.query
        keys = tuple(verification_keys(settings))
        if uses_dev_key(settings):
            log.warning("query tokens: accepting the built-in DEVELOPMENT key (query.allow_dev_key=true): anyone "
                        "can mint a token for any tenant; local development and tests only")
        return cls(keys=keys, issuer=q.token_issuer, audience=q.token_audience, clock_skew_s=q.clock_skew_s,
                   max_lifetime_s=q.token_max_lifetime_s)

    def verify(self, token: str, *, now: float | None = None) -> Principal:
        return verify_token(token, key=self.keys, issuer=self.issuer, audience=self.audience,
                            clock_skew_s=self.clock_skew_s, now=now, max_lifetime_s=self.max_lifetime_s)
