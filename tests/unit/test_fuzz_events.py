"""Fuzz the event validator (`shared/events.py`) with hypothesis.

Properties:
- `parse_event` never raises anything but `BadEvent`, whatever the bytes (random bytes, random
  JSON, valid envelopes with one field replaced by random JSON);
- every envelope it accepts round-trips: `parse_event(e.model_dump_json()) == e`, with a key
  `tenant/document` and (for an upsert) inline content matching its sha256 and size;
- an upsert built by `upserted(...)` from any valid inputs is accepted back unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifold.shared.errors import BadEvent
from manifold.shared.events import (
    MAX_INLINE_BYTES,
    DocumentDeleted,
    DocumentUpserted,
    check_document_id,
    event_key,
    parse_event,
    upserted,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
tenants = st.from_regex(r"\A[a-z0-9][a-z0-9_-]{0,62}\Z")


def _well_shaped(document_id: str) -> bool:
    try:
        check_document_id(document_id)
    except ValueError:
        return False
    return True


document_ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=80).filter(_well_shaped)
media_types = st.sampled_from(["text/plain", "text/markdown", "application/pdf", "text/csv", "application/json",
                               "application/vnd.openxmlformats-officedocument.wordprocessingml.document"])
metadata = st.dictionaries(st.text(min_size=1, max_size=20),
                           st.none() | st.booleans() | st.integers() | st.text(max_size=50), max_size=8)


def _accepts_or_bad_event(raw: bytes) -> DocumentUpserted | DocumentDeleted | None:
    try:
        event = parse_event(raw)
    except BadEvent as err:
        assert str(err), "a rejection must carry a reason"
        return None
    _check_accepted(event)
    return event


def _check_accepted(event: DocumentUpserted | DocumentDeleted) -> None:
    assert parse_event(event.model_dump_json().encode()) == event
    assert event.key == event_key(event.tenant_id, event.document_id)
    assert event.version >= 1
    if isinstance(event, DocumentUpserted):
        assert (event.content_b64 is None) != (event.content_ref is None)
        content = event.inline_content()
        if content is not None:
            assert len(content) == event.size <= MAX_INLINE_BYTES
            assert hashlib.sha256(content).hexdigest() == event.content_sha256


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_are_rejected_only_with_bad_event(raw: bytes) -> None:
    _accepts_or_bad_event(raw)


@FUZZ
@given(json_values)
def test_random_json_is_rejected_only_with_bad_event(value: object) -> None:
    _accepts_or_bad_event(json.dumps(value).encode())


@FUZZ
@given(tenants, document_ids, st.integers(1, 2**40), st.binary(max_size=4096), media_types, metadata)
def test_valid_upserts_round_trip(tenant: str, doc: str, version: int, content: bytes, media: str,
                                  meta: dict) -> None:
    event = upserted(tenant, doc, version, content, media, meta)
    back = parse_event(event.model_dump_json().encode())
    assert back == event
    assert back.inline_content() == content
    _check_accepted(back)


@FUZZ
@given(tenants, document_ids, st.integers(1, 2**40))
def test_valid_deletes_round_trip(tenant: str, doc: str, version: int) -> None:
    event = DocumentDeleted(tenant_id=tenant, document_id=doc, version=version)
    assert parse_event(event.model_dump_json().encode()) == event


FIELDS = ["type", "schema_version", "event_id", "tenant_id", "document_id", "version", "occurred_at",
          "content_sha256", "media_type", "content_b64", "content_ref", "size", "metadata", "extra_field"]


@FUZZ
@given(tenants, document_ids, st.binary(max_size=256), st.sampled_from(FIELDS), json_values)
def test_one_mutated_field_is_accepted_consistently_or_rejected(tenant: str, doc: str, content: bytes,
                                                                field: str, value: object) -> None:
    body = json.loads(upserted(tenant, doc, 1, content, "text/plain").model_dump_json())
    body[field] = value
    event = _accepts_or_bad_event(json.dumps(body).encode())
    if event is not None and field in ("tenant_id", "document_id"):
        assert isinstance(value, str)  # never coerced from another type


@FUZZ
@given(st.binary(max_size=512), st.text(max_size=64))
def test_wrongly_encoded_or_mismatched_content_is_bad_event(content: bytes, junk: str) -> None:
    body = json.loads(upserted("acme", "a.txt", 1, content, "text/plain").model_dump_json())
    body["content_b64"] = base64.b64encode(content).decode() + junk
    _accepts_or_bad_event(json.dumps(body).encode())
    body["content_b64"] = base64.b64encode(content + b"x").decode()
    assert _accepts_or_bad_event(json.dumps(body).encode()) is None  # size and hash no longer match


@given(st.sampled_from(["../../etc/passwd", "/etc/passwd", "a/../../b.txt", "a//b", "dir/", ".", "..",
                        "\\\\server\\share", "x\\..\\y", "https://../x"]),
       st.integers(min_value=1, max_value=5))
def test_path_shaped_document_ids_are_refused_by_every_event(document_id: str, version: int) -> None:
    # leading separator, empty / "." / ".." segments: refused with the reason, never normalised silently
    with pytest.raises(ValueError, match="document_id must not"):
        DocumentDeleted(tenant_id="acme", document_id=document_id, version=version)


def test_ordinary_and_url_shaped_document_ids_are_kept_as_given() -> None:
    for document_id in ("a.txt", "dir/sub/a.md", "v1.2/notes..md", "https://wiki.example/page?id=3", "s3://b/k.pdf"):
        assert check_document_id(document_id) == document_id
