"""Principal tokens: only a well-formed HS256 token signed with our key yields a Principal."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from manifold.query.auth import (
    InsecureKey,
    TokenError,
    TokenVerifier,
    continuation_secret,
    mint_token,
    signing_key,
    verify_token,
)
from manifold.query.request_client import mint_dev_token
from manifold.shared.config import DEV_TOKEN_KEY, ManifoldSettings, QuerySettings

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

    assert TokenVerifier.from_settings(_settings(allow_dev_key=True)).keys[0].key == DEV_TOKEN_KEY
    with pytest.raises(InsecureKey, match="development key"):
        TokenVerifier.from_settings(_settings(token_key=SecretStr(DEV_TOKEN_KEY), allow_dev_key=False))
    with pytest.raises(InsecureKey, match="32 bytes"):
        TokenVerifier.from_settings(_settings(token_key=SecretStr("short"), allow_dev_key=False))
    verifier = TokenVerifier.from_settings(_settings(token_key=SecretStr(KEY), allow_dev_key=False))
    assert KEY not in repr(verifier)
    assert verifier.verify(_mint(), now=NOW).tenant_id == "acme"



# -- issue 13, finding 6 ------------------------------------------------------------------------
def test_the_defaults_accept_no_key_at_all() -> None:
    """Default settings (no key, no opt-in): a query worker refuses to start, with what to set."""
    defaults = QuerySettings()
    assert defaults.allow_dev_key is False and defaults.token_key is None
    with pytest.raises(InsecureKey, match="no token key configured.*TOKEN_PUBLIC_KEY_FILE.*ALLOW_DEV_KEY"):
        TokenVerifier.from_settings(_settings(allow_dev_key=False))
    with pytest.raises(InsecureKey, match="no key to sign tokens with"):
        signing_key(_settings(allow_dev_key=False))
    forged = mint_token(DEV_TOKEN_KEY, tenant_id="victim", subject="anyone", ttl_s=300, **COMMON)
    from pydantic import SecretStr

    own = TokenVerifier.from_settings(_settings(token_key=SecretStr(KEY), allow_dev_key=False))
    with pytest.raises(TokenError, match="bad signature"):
        own.verify(forged)


def test_the_token_lifetime_is_capped() -> None:
    day = 86400
    assert _verify(_mint(ttl_s=day)).tenant_id == "acme"
    assert _reason(_mint(ttl_s=365 * day)) == f"lifetime exceeds the {day} s cap"
    assert _reason(_mint(ttl_s=2 * 3600), max_lifetime_s=3600) == "lifetime exceeds the 3600 s cap"
    # issued (and valid from) far in the past but expiring a year ahead: still refused
    claims = {"sub": "a", "tenant": "acme", "scope": "query:read", "iss": "manifold", "aud": "manifold.query",
              "iat": NOW, "nbf": NOW, "exp": NOW + 365 * day, "jti": "j"}
    assert "cap" in _reason(jwt.encode(claims, KEY, algorithm="HS256"), now=NOW + 364 * day)
    late = {**claims, "iat": NOW + 300 * day, "nbf": NOW + 300 * day, "exp": NOW + 300 * day + 600}
    assert _reason(jwt.encode(late, KEY, algorithm="HS256"), now=NOW) == "not yet valid"
    assert _settings().query.token_max_lifetime_s == day


def _ed25519_pair(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private = ed25519.Ed25519PrivateKey.generate()
    pub = tmp_path / "tokens.pub.pem"
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
    priv = tmp_path / "tokens.key.pem"
    priv.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return private, pub, priv


def test_ed25519_public_key_verifies_and_workers_hold_no_secret(tmp_path) -> None:
    private, pub, priv = _ed25519_pair(tmp_path)
    verifier = TokenVerifier.from_settings(_settings(token_public_key_file=pub, allow_dev_key=False))
    assert verifier.asymmetric and [k.algorithm for k in verifier.keys] == ["EdDSA"]
    token = mint_token(private, algorithm="EdDSA", tenant_id="acme", subject="alice", ttl_s=300, **COMMON)
    assert verifier.verify(token).tenant_id == "acme"
    # the CLI mints with the private key file; the worker only needs the public one
    cli = _settings(token_public_key_file=pub, token_signing_key_file=priv, allow_dev_key=False)
    assert mint_dev_token(cli, "acme").count(".") == 2 and verifier.verify(mint_dev_token(cli, "acme"))
    # an HS256 token (even one "signed" with the public key's bytes) is refused before the signature
    confused = jwt.encode({"alg": "x"}, "k" * 40, algorithm="HS256")
    assert "not accepted (only EdDSA)" in _reason(confused, key=verifier.keys)
    (tmp_path / "other").mkdir()
    other, _, _ = _ed25519_pair(tmp_path / "other")
    stranger = mint_token(other, algorithm="EdDSA", tenant_id="acme", subject="m", ttl_s=300, **COMMON)
    with pytest.raises(TokenError, match="bad signature"):
        verifier.verify(stranger)
    with pytest.raises(InsecureKey, match="CONTINUATION_KEY"):
        continuation_secret(_settings(token_public_key_file=pub, allow_dev_key=False))


def test_rs256_from_a_local_jwks_matched_by_kid(tmp_path) -> None:
    import json as _json

    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ("k1", "k2")}
    jwks = {"keys": [{**_json.loads(RSAAlgorithm.to_jwk(k.public_key())), "kid": kid, "alg": "RS256", "use": "sig"}
                     for kid, k in keys.items()]}
    path = tmp_path / "jwks.json"
    path.write_text(_json.dumps(jwks))
    verifier = TokenVerifier.from_settings(_settings(token_jwks_file=path, allow_dev_key=False))
    for kid, key in keys.items():
        token = mint_token(key, algorithm="RS256", kid=kid, tenant_id="acme", subject=kid, ttl_s=300, **COMMON)
        assert verifier.verify(token).subject == kid
    wrong_kid = mint_token(keys["k1"], algorithm="RS256", kid="k9", tenant_id="acme", subject="x", ttl_s=300, **COMMON)
    with pytest.raises(TokenError, match="unknown key id"):
        verifier.verify(wrong_kid)
    private_jwk = {"keys": [{**_json.loads(RSAAlgorithm.to_jwk(keys["k1"])), "kid": "k1"}]}
    path.write_text(_json.dumps(private_jwk))
    with pytest.raises(InsecureKey, match="private key"):
        TokenVerifier.from_settings(_settings(token_jwks_file=path, allow_dev_key=False))
    path.write_text(_json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}))
    with pytest.raises(InsecureKey, match="public keys"):
        TokenVerifier.from_settings(_settings(token_jwks_file=path, allow_dev_key=False))


def test_a_worker_without_a_key_refuses_to_start(tmp_path) -> None:
    """`manifold workers --roles query` with neither a key nor the opt-in: exit 2, one clear line."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("MANIFOLD_QUERY__")}
    env.update(MANIFOLD_QUERY__METRICS_PORT="0", MANIFOLD_KAFKA__PORT="1")
    proc = subprocess.run([sys.executable, "-m", "manifold.deploy.cli", "workers", "--roles", "query"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "no token key configured" in proc.stderr and "Traceback" not in proc.stderr
