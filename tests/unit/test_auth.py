"""Principal tokens: only a well-formed HS256 token signed with our key yields a Principal."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from manifold.query.auth import InsecureKey, TokenError, TokenVerifier, mint_token, verify_token
from manifold.shared.config import DEV_TOKEN_KEY, ManifoldSettings

KEY = "unit-test-signing-key-0123456789abcdef"
OTHER = "another-signing-key-0123456789abcdefgh"
NOW = 1_800_000_000
COMMON = {"issuer": "manifold", "audience": "manifold.query"}


def _mint(key: str = KEY, **kw) -> str:
    args = {"tenant_id": "acme", "subject": "alice", "ttl_s": 300, "now": NOW, **COMMON, **kw}
    return mint_token(key, **args)


def _verify(token: str, *, now: float = NOW + 1, key: str = KEY, **kw):
    args = {"key": key, "clock_skew_s": 30, "now": now, **COMMON, **kw}
    return verify_token(token, **args)


def _reason(token: str, **kw) -> str:
    with pytest.raises(TokenError) as info:
        _verify(token, **kw)
    return info.value.reason


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def test_round_trip() -> None:
    principal = _verify(_mint(scopes=("query:read", "query:plan")))
    assert principal.tenant_id == "acme"
    assert principal.subject == "alice"
    assert principal.scopes == ("query:read", "query:plan")


def test_claims_present() -> None:
    claims = jwt.decode(_mint(), options={"verify_signature": False})
    assert set(claims) == {"sub", "tenant", "scope", "iss", "aud", "iat", "nbf", "exp", "jti"}
    assert claims["exp"] - claims["iat"] == 300


def test_expired_and_skew() -> None:
    token = _mint()
    assert _verify(token, now=NOW + 300 + 29).tenant_id == "acme"  # inside the skew
    assert _reason(token, now=NOW + 300 + 30) == "expired"


def test_not_yet_valid() -> None:
    assert _reason(_mint(), now=NOW - 31) == "not yet valid"


def test_tampered_tenant_fails_signature() -> None:
    header, payload, sig = _mint().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["tenant"] = "victim"
    assert _reason(f"{header}.{_b64(claims)}.{sig}") == "bad signature"


def test_wrong_key() -> None:
    assert _reason(_mint(key=OTHER)) == "bad signature"


def test_alg_none_rejected() -> None:
    header, payload, _ = _mint().split(".")
    forged = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{payload}."
    assert "algorithm 'none'" in _reason(forged)


def test_other_alg_rejected() -> None:
    token = jwt.encode({"sub": "x"}, KEY + KEY, algorithm="HS512")
    assert "algorithm 'HS512'" in _reason(token)


def test_wrong_audience_and_issuer() -> None:
    assert _reason(_mint(audience="elsewhere")) == "wrong audience"
    assert _reason(_mint(issuer="mallory")) == "wrong issuer"


def test_missing_claim() -> None:
    token = jwt.encode({"sub": "a", "iss": "manifold", "aud": "manifold.query", "iat": NOW, "nbf": NOW,
                        "exp": NOW + 60, "jti": "j", "scope": "query:read"}, KEY, algorithm="HS256")
    assert _reason(token) == "missing claim 'tenant'"


def test_bad_tenant_claim() -> None:
    token = jwt.encode({"sub": "a", "tenant": "Not A Slug", "iss": "manifold", "aud": "manifold.query",
                        "iat": NOW, "nbf": NOW, "exp": NOW + 60, "jti": "j", "scope": "query:read"},
                       KEY, algorithm="HS256")
    assert "tenant" in _reason(token)


def test_garbage_and_empty() -> None:
    assert _reason("not.a.token").startswith("malformed")
    assert _reason("") == "missing token"


def test_mint_rejects_bad_tenant() -> None:
    with pytest.raises(ValueError):
        _mint(tenant_id="../etc")


def _settings(**query) -> ManifoldSettings:
    base = ManifoldSettings()
    return base.model_copy(update={"query": base.query.model_copy(update=query)})


def test_verifier_refuses_dev_key_unless_allowed() -> None:
    from pydantic import SecretStr

    assert TokenVerifier.from_settings(_settings(allow_dev_key=True)).key == DEV_TOKEN_KEY
    with pytest.raises(InsecureKey, match="development key"):
        TokenVerifier.from_settings(_settings(allow_dev_key=False))
    with pytest.raises(InsecureKey, match="32 bytes"):
        TokenVerifier.from_settings(_settings(token_key=SecretStr("short"), allow_dev_key=False))
    verifier = TokenVerifier.from_settings(_settings(token_key=SecretStr(KEY), allow_dev_key=False))
    assert KEY not in repr(verifier)
    assert verifier.verify(_mint(), now=NOW).tenant_id == "acme"
