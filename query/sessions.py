"""Clarify turns across stateless, horizontally scaled workers.

A worker that needs the user to choose (status `clarify`) does not keep the pending route state:
it seals it into `Clarification.continuation` and the client sends it back with its choice, to
any worker. `seal` / `open_` make that safe.

Guarantees:
- The blob is `base64url(canonical JSON payload) + "." + base64url(HMAC-SHA256)`; the MAC covers
  the version, tenant, session, expiry and state, under a key derived from `key` for this purpose
  only (so a continuation can never be confused with a token signed by the same key).
- `open_` returns the state only if the MAC verifies (constant-time compare), the blob has not
  expired, and it was sealed for the same tenant AND session; otherwise `ContinuationError`.
- The state is integrity-protected, not encrypted: it must not hold secrets (it goes to the
  client, which may read it).
- A sealed blob is at most `MAX_BLOB_CHARS` (the `QueryRequest.continuation` limit).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

from manifold.shared.errors import ManifoldError

VERSION = 1
MAX_BLOB_CHARS = 8192
_PURPOSE = b"manifold.query.continuation.v1"


class ContinuationError(ManifoldError):
    """A continuation was forged, altered, expired, too large or bound to another tenant/session."""


def _subkey(key: str) -> bytes:
    return hmac.new(key.encode(), _PURPOSE, hashlib.sha256).digest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _b64e(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(state: dict[str, Any], *, key: str, tenant_id: str, session_id: str, ttl_s: int = 900,
         now: float | None = None) -> str:
    """Seal JSON-serialisable `state` for (`tenant_id`, `session_id`), valid for `ttl_s` seconds.
    Raises `ContinuationError` if the state is not JSON-serialisable or the blob would be too large."""
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    issued = int(time.time() if now is None else now)
    payload = {"v": VERSION, "tenant": tenant_id, "session": session_id, "exp": issued + int(ttl_s),
               "state": state}
    try:
        body = _canonical(payload)
    except (TypeError, ValueError) as err:
        raise ContinuationError(f"state is not JSON-serialisable: {err}") from None
    mac = hmac.new(_subkey(key), body, hashlib.sha256).digest()
    blob = f"{_b64e(body)}.{_b64e(mac)}"
    if len(blob) > MAX_BLOB_CHARS:
        raise ContinuationError(f"sealed state is {len(blob)} chars; the limit is {MAX_BLOB_CHARS}")
    return blob


def open_(blob: str, *, key: str, tenant_id: str, session_id: str, now: float | None = None) -> dict[str, Any]:
    """The state sealed in `blob`, or `ContinuationError` (forged, expired, other tenant/session)."""
    if not isinstance(blob, str) or len(blob) > MAX_BLOB_CHARS or blob.count(".") != 1:
        raise ContinuationError("malformed continuation")
    body_b64, mac_b64 = blob.split(".")
    try:
        body, mac = _b64d(body_b64), _b64d(mac_b64)
    except (binascii.Error, ValueError):
        raise ContinuationError("malformed continuation") from None
    expected = hmac.new(_subkey(key), body, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected):
        raise ContinuationError("continuation signature does not verify (forged or altered)")
    try:
        payload = json.loads(body)
    except ValueError:
        raise ContinuationError("malformed continuation") from None
    if not isinstance(payload, dict) or payload.get("v") != VERSION or not isinstance(payload.get("state"), dict):
        raise ContinuationError("unsupported continuation version")
    if payload.get("tenant") != tenant_id:
        raise ContinuationError("continuation belongs to another tenant")
    if payload.get("session") != session_id:
        raise ContinuationError("continuation belongs to another session")
    exp = payload.get("exp")
    if not isinstance(exp, int) or (time.time() if now is None else now) >= exp:
        raise ContinuationError("continuation expired")
    state: dict[str, Any] = payload["state"]  # a dict: checked above
    return state
