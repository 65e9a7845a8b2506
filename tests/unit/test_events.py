from __future__ import annotations

import base64
import json

import pytest

from manifold.shared.errors import BadEvent
from manifold.shared.events import (
    MAX_EVENT_BYTES,
    MAX_INLINE_BYTES,
    ContentRef,
    DocumentDeleted,
    DocumentUpserted,
    event_key,
    parse_event,
    upserted,
)


def test_round_trip_and_key() -> None:
    event = upserted("acme", "contracts/a.md", 3, b"# Terms", "text/markdown", {"lang": "en"})
    back = parse_event(event.model_dump_json().encode())
    assert isinstance(back, DocumentUpserted)
    assert back == event
    assert back.inline_content() == b"# Terms"
    assert back.key == event_key("acme", "contracts/a.md") == b"acme/contracts/a.md"


def test_delete_round_trip() -> None:
    event = DocumentDeleted(tenant_id="acme", document_id="a.md", version=4)
    assert parse_event(event.model_dump_json().encode()) == event


def _raw(**overrides) -> bytes:
    body = json.loads(upserted("acme", "a.txt", 1, b"hello", "text/plain").model_dump_json())
    body.update(overrides)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"tenant_id": "ACME; DROP TABLE"}, "tenant_id"),
        ({"document_id": "a\x00b"}, "control characters"),
        ({"version": 0}, "version"),
        ({"content_sha256": "0" * 64}, "does not match the inline content"),
        ({"size": 6}, "does not match inline content"),
        ({"content_b64": "!!!"}, "not valid base64"),
        ({"media_type": "nonsense"}, "media_type"),
        ({"schema_version": 2}, "schema_version"),
        ({"surprise": 1}, "surprise"),
        ({"type": "DocumentRenamed"}, "type"),
        ({"occurred_at": "2026-01-01T00:00:00"}, "timezone"),
    ],
)
def test_malformed_events_are_rejected_with_a_reason(overrides, reason: str) -> None:
    with pytest.raises(BadEvent, match="invalid document event") as err:
        parse_event(_raw(**overrides))
    assert reason in str(err.value)


def test_not_json_and_oversized() -> None:
    with pytest.raises(BadEvent):
        parse_event(b"\xff\xfe not json")
    with pytest.raises(BadEvent, match="limit"):
        parse_event(b" " * (MAX_EVENT_BYTES + 1))


def test_inline_limit_and_claim_check() -> None:
    big = b"x" * (MAX_INLINE_BYTES + 1)
    with pytest.raises(ValueError, match="use a content_ref"):
        upserted("acme", "big.txt", 1, big, "text/plain")
    import hashlib

    ref = ContentRef(sha256=hashlib.sha256(big).hexdigest(), size=len(big))
    event = upserted("acme", "big.txt", 1, big, "text/plain", content_ref=ref)
    assert event.content_b64 is None and event.inline_content() is None
    both = json.loads(event.model_dump_json())
    both["content_b64"] = base64.b64encode(b"x").decode()
    with pytest.raises(BadEvent, match="exactly one"):
        parse_event(json.dumps(both).encode())


@pytest.mark.parametrize("number", [b"1e999", b"-1e999", b"Infinity", b"NaN"])
def test_a_metadata_number_json_cannot_carry_back_is_rejected(number: bytes) -> None:
    raw = _raw(metadata={"score": 0}).replace(b'"score": 0', b'"score": ' + number)
    try:
        event = parse_event(raw)
    except BadEvent as err:
        assert "finite" in str(err) or "metadata" in str(err)
    else:  # accepted only if it survives its own round trip
        assert parse_event(event.model_dump_json().encode()) == event
