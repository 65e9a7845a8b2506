"""Continuations: sealed state comes back only unaltered, unexpired, for its tenant and session."""

from __future__ import annotations

import pytest

from manifold.query.sessions import ContinuationError, open_, seal

KEY = "unit-test-signing-key-0123456789abcdef"
NOW = 1_800_000_000.0
STATE = {"anchor": "beta", "candidates": ["ent_1", "ent_2"], "question": "total for beta?"}


def _seal(**kw) -> str:
    return seal(STATE, **{"key": KEY, "tenant_id": "acme", "session_id": "s1", "ttl_s": 900, "now": NOW, **kw})


def _open(blob: str, **kw) -> dict:
    return open_(blob, **{"key": KEY, "tenant_id": "acme", "session_id": "s1", "now": NOW + 1, **kw})


def test_round_trip_is_url_safe() -> None:
    blob = _seal()
    assert _open(blob) == STATE
    assert set(blob) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_expired() -> None:
    with pytest.raises(ContinuationError, match="expired"):
        _open(_seal(), now=NOW + 900)


def test_other_tenant_or_session() -> None:
    with pytest.raises(ContinuationError, match="tenant"):
        _open(_seal(), tenant_id="other")
    with pytest.raises(ContinuationError, match="session"):
        _open(_seal(), session_id="s2")


def test_forged_or_altered() -> None:
    import base64
    import json

    body, mac = _seal().split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["tenant"] = "victim"
    altered = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    with pytest.raises(ContinuationError, match="signature"):
        _open(f"{altered}.{mac}", tenant_id="victim")
    with pytest.raises(ContinuationError, match="signature"):
        _open(_seal(key="another-signing-key-0123456789abcdefgh"))
    for junk in ("", "abc", "a.b.c", "!!!.???"):
        with pytest.raises(ContinuationError):
            _open(junk)


def test_too_large_or_not_json() -> None:
    with pytest.raises(ContinuationError, match="limit"):
        seal({"x": "y" * 9000}, key=KEY, tenant_id="acme", session_id="s1")
    with pytest.raises(ContinuationError, match="JSON"):
        seal({"x": object()}, key=KEY, tenant_id="acme", session_id="s1")
