"""Signed upstream envelopes (issue 13, finding 7): only a producer's valid signature, for a
tenant it may publish for, gets an event past the first stage; everything else is `unauthorized`."""

from __future__ import annotations

import json

import pytest

from manifold.shared.config import DEV_PRODUCER_ID, DEV_PRODUCER_KEY, ManifoldSettings
from manifold.shared.envelope_auth import (
    NoProducerKey,
    ProducerGrant,
    ProducerRegistry,
    Signer,
    Unauthorized,
    sign,
    signer_from_settings,
    signing_payload,
)
from manifold.shared.errors import BadInput
from manifold.shared.events import DocumentDeleted, parse_event, upserted

KEY = "crm-producer-key-0123456789abcdef01234"
OTHER = "erp-producer-key-0123456789abcdef01234"
REGISTRY = ProducerRegistry({"crm": ProducerGrant(KEY, frozenset({"acme", "beta"})),
                             "erp": ProducerGrant(OTHER, frozenset({"*"}))})
decode = REGISTRY.verifying(parse_event)


def _event(tenant: str = "acme", **kw):
    return upserted(tenant, "contracts/a.md", 3, b"# Terms", "text/markdown", {"lang": "en", "n": 1.5}, **kw)


def _wire(event) -> bytes:
    return event.model_dump_json().encode()


def _refused(raw: bytes) -> str:
    with pytest.raises(Unauthorized) as info:
        decode(raw)
    assert info.value.error_kind == "unauthorized" and isinstance(info.value, BadInput)
    return str(info.value)


def test_signed_events_pass_and_round_trip_the_wire() -> None:
    for event in (_event(), DocumentDeleted(tenant_id="beta", document_id="x", version=2)):
        signed = sign(event, "crm", KEY)
        assert decode(_wire(signed)) == signed
    assert decode(_wire(sign(_event("anyone"), "erp", OTHER))).tenant_id == "anyone"


def test_unsigned_unknown_and_out_of_scope_are_unauthorized() -> None:
    assert "unsigned" in _refused(_wire(_event()))
    assert "unknown producer 'ghost'" in _refused(_wire(sign(_event(), "ghost", KEY)))
    assert "may not publish for tenant 'victim'" in _refused(_wire(sign(_event("victim"), "crm", KEY)))
    assert "bad signature" in _refused(_wire(sign(_event(), "crm", OTHER)))  # right id, wrong key


@pytest.mark.parametrize("field, value", [
    ("tenant_id", "beta"), ("document_id", "contracts/b.md"), ("version", 4), ("media_type", "text/plain"),
    ("metadata", {"lang": "de", "n": 1.5}), ("producer", "erp"), ("type", "DocumentDeleted"),
])
def test_any_change_to_a_signed_field_breaks_the_signature(field: str, value: object) -> None:
    body = json.loads(_wire(sign(_event(), "crm", KEY)))
    body[field] = value
    if field == "type":
        body = {k: v for k, v in body.items() if k in DocumentDeleted.model_fields}
    reason = _refused(json.dumps(body).encode())
    assert "bad signature" in reason or "may not publish" in reason


def test_content_is_bound_through_its_hash() -> None:
    body = json.loads(_wire(sign(_event(), "crm", KEY)))
    other = json.loads(_wire(upserted("acme", "contracts/a.md", 3, b"# Other", "text/markdown")))
    body.update(content_b64=other["content_b64"], content_sha256=other["content_sha256"], size=other["size"])
    assert "bad signature" in _refused(json.dumps(body).encode())


def test_malformed_events_stay_bad_input_not_unauthorized() -> None:
    with pytest.raises(BadInput) as info:
        decode(b"{not json")
    assert info.value.error_kind == "bad_input"


def test_the_signed_bytes_are_canonical_and_documented() -> None:
    payload = json.loads(signing_payload(_event(), "crm"))
    assert payload[:7] == ["manifold.envelope.v1", "crm", "DocumentUpserted", "acme", "contracts/a.md", 3,
                           _event().content_sha256]
    assert signing_payload(_event(), "crm") == signing_payload(parse_event(_wire(_event())), "crm")


def _settings(allow: bool, **ingest) -> ManifoldSettings:
    base = ManifoldSettings()
    return base.model_copy(update={"query": base.query.model_copy(update={"allow_dev_key": allow}),
                                   "ingest": base.ingest.model_copy(update=ingest)})


def test_the_development_producer_needs_the_explicit_opt_in() -> None:
    dev_signed = _wire(sign(_event("anyone"), DEV_PRODUCER_ID, DEV_PRODUCER_KEY))
    with pytest.raises(Unauthorized, match="unknown producer 'dev'"):
        ProducerRegistry.from_settings(_settings(False)).verify(parse_event(dev_signed))
    assert ProducerRegistry.from_settings(_settings(True)).verify(parse_event(dev_signed)).tenant_id == "anyone"
    with pytest.raises(Unauthorized):
        ProducerRegistry.from_settings(None).verify(parse_event(dev_signed))
    with pytest.raises(NoProducerKey, match="PRODUCER_KEY"):
        signer_from_settings(_settings(False))
    assert signer_from_settings(_settings(True)) == Signer(DEV_PRODUCER_ID, DEV_PRODUCER_KEY)


def test_producers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANIFOLD_INGEST__PRODUCERS", json.dumps({"crm": {"key": KEY, "tenants": ["acme"]}}))
    monkeypatch.setenv("MANIFOLD_INGEST__PRODUCER_ID", "crm")
    monkeypatch.setenv("MANIFOLD_QUERY__ALLOW_DEV_KEY", "false")
    settings = ManifoldSettings()
    signer = signer_from_settings(settings)
    assert signer.producer == "crm" and KEY not in repr(signer)
    registry = ProducerRegistry.from_settings(settings)
    assert set(registry.producers) == {"crm"}
    assert registry.verify(signer(_event())).tenant_id == "acme"
    for bad in ({"crm": {"key": "short", "tenants": ["acme"]}}, {"crm": {"key": KEY, "tenants": ["Acme\n"]}},
                {"bad id!": {"key": KEY, "tenants": ["acme"]}}):
        monkeypatch.setenv("MANIFOLD_INGEST__PRODUCERS", json.dumps(bad))
        with pytest.raises(ValueError):
            ManifoldSettings()
