"""Signed upstream envelopes: which producer may publish for which tenant (issue 13, finding 7).

Every upstream producer has an id, a secret key and the list of tenants it may publish for
(`ingest.producers`). A producer signs each `DocumentUpserted` / `DocumentDeleted` it publishes;
the first stage (parse) verifies the signature and the tenant before anything else reads the
event, and an unsigned, mis-signed or out-of-scope event is dead-lettered as `unauthorized`.

Wire format: two envelope fields, `producer` (the id) and `signature` (`hmac-sha256:` + 64 hex
digits). The signature is HMAC-SHA256 (stdlib `hmac`) with the producer's key over the UTF-8 bytes
of the canonical JSON array (`json.dumps(..., separators=(",", ":"), ensure_ascii=True)`):

    ["manifold.envelope.v1", producer, type, tenant_id, document_id, version,
     content_sha256 or "", media_type or "", size or 0, metadata_sha256 or ""]

where `metadata_sha256` is the sha256 of the metadata as canonical JSON (keys sorted). The content
itself is bound through `content_sha256`, which the envelope model already checks against the
inline bytes (and the staging store against a claim check). `event_id` and `occurred_at` are not
signed: replaying a signed event publishes the same version again, which every stage treats as
idempotent.

Guarantees:
- `ProducerRegistry.verify` accepts an event only when its producer is known, the signature is
  the HMAC of exactly these bytes under that producer's key (compared in constant time), and
  the event's tenant is in the producer's list (`"*"`: any tenant). Otherwise it raises
  `Unauthorized` (a `BadInput` whose DLQ kind is `unauthorized`) with a reason that names the
  producer and tenant, never a key.
- The built-in development producer (`DEV_PRODUCER_ID`, any tenant) exists only when
  `query.allow_dev_key` is true, the same explicit opt-in as the development token key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from manifold.shared.config import DEV_PRODUCER_ID, DEV_PRODUCER_KEY, ManifoldSettings
from manifold.shared.errors import BadInput
from manifold.shared.events import DocumentDeleted, DocumentUpserted

log = logging.getLogger(__name__)

SIGNING_CONTEXT = "manifold.envelope.v1"
SCHEME = "hmac-sha256:"
ANY_TENANT = "*"

Event = DocumentUpserted | DocumentDeleted
E = TypeVar("E", DocumentUpserted, DocumentDeleted)


class Unauthorized(BadInput):
    """The event is unsigned, mis-signed, from an unknown producer, or for a tenant its producer
    may not publish for."""

    error_kind = "unauthorized"


def signing_payload(event: Event, producer: str) -> bytes:
    """The exact bytes a producer signs (see the module docstring)."""
    if isinstance(event, DocumentUpserted):
        meta = json.dumps(event.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        fields = [event.content_sha256, event.media_type, event.size, hashlib.sha256(meta.encode()).hexdigest()]
    else:
        fields = ["", "", 0, ""]
    body = [SIGNING_CONTEXT, producer, event.type, event.tenant_id, event.document_id, event.version, *fields]
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()


def mac(key: str, payload: bytes) -> str:
    """`hmac-sha256:` + the hex HMAC-SHA256 of `payload` under `key`."""
    return SCHEME + hmac.new(key.encode(), payload, hashlib.sha256).hexdigest()


def sign(event: E, producer: str, key: str) -> E:
    """`event` carrying `producer` and its signature under `key`."""
    unsigned = event.model_copy(update={"producer": producer, "signature": None})
    return unsigned.model_copy(update={"signature": mac(key, signing_payload(unsigned, producer))})


@dataclass(frozen=True)
class Signer:
    """Signs events as one producer (`UpstreamClient.signer`)."""

    producer: str
    key: str = field(repr=False)

    def __call__(self, event: E) -> E:
        return sign(event, self.producer, self.key)


@dataclass(frozen=True)
class ProducerGrant:
    key: str = field(repr=False)
    tenants: frozenset[str]


@dataclass(frozen=True)
class ProducerRegistry:
    """The producers the first stage accepts events from, with their keys and tenants."""

    producers: Mapping[str, ProducerGrant]

    @classmethod
    def from_settings(cls, settings: ManifoldSettings | None) -> ProducerRegistry:
        """`ingest.producers`, plus the development producer when `query.allow_dev_key` is true.
        No settings: an empty registry (every event is refused)."""
        if settings is None:
            return cls({})
        grants = {pid: ProducerGrant(p.key.get_secret_value(), frozenset(p.tenants))
                  for pid, p in settings.ingest.producers.items()}
        if settings.query.allow_dev_key:
            log.warning("upstream envelopes: accepting the built-in DEVELOPMENT producer %r for every tenant "
                        "(query.allow_dev_key=true); local development and tests only", DEV_PRODUCER_ID)
            grants.setdefault(DEV_PRODUCER_ID, ProducerGrant(DEV_PRODUCER_KEY, frozenset({ANY_TENANT})))
        if not grants:
            log.warning("upstream envelopes: no producer keys configured (MANIFOLD_INGEST__PRODUCERS): every event "
                        "on manifold.documents will be dead-lettered as unauthorized")
        return cls(grants)

    def verify(self, event: Event) -> Event:
        """`event` if it is signed by a known producer allowed its tenant; else `Unauthorized`."""
        self.check(event.producer, event.signature, event.tenant_id,
                   lambda producer: signing_payload(event, producer))
        return event

    def check(self, producer: str | None, signature: str | None, tenant_id: str,
              payload: Callable[[str], bytes]) -> None:
        """Raise `Unauthorized` unless `signature` is `producer`'s MAC of `payload(producer)` and
        `producer` may publish for `tenant_id` (document and access events share this rule)."""
        if producer is None or signature is None:
            raise Unauthorized(f"unsigned event for tenant {tenant_id!r}: upstream producers must sign "
                               "(docs/ingestion.md 'Producer keys')")
        grant = self.producers.get(producer)
        if grant is None:
            raise Unauthorized(f"unknown producer {producer!r}")
        expected = mac(grant.key, payload(producer))
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise Unauthorized(f"bad signature from producer {producer!r}")
        if ANY_TENANT not in grant.tenants and tenant_id not in grant.tenants:
            raise Unauthorized(f"producer {producer!r} may not publish for tenant {tenant_id!r}")

    def verifying(self, decode: Callable[[bytes], Event]) -> Callable[[bytes], Event]:
        """`decode` followed by `verify`: the first stage's decoder."""

        def decode_and_verify(raw: bytes) -> Event:
            return self.verify(decode(raw))

        return decode_and_verify


class NoProducerKey(ValueError):
    """`manifold ingest` has no producer key to sign with."""


def signer_from_settings(settings: ManifoldSettings) -> Signer:
    """The producer `manifold ingest` signs as: `ingest.producer_id` with its key from
    `ingest.producers` (or `ingest.producer_key`), else the development producer when
    `query.allow_dev_key` is true; else `NoProducerKey` (unsigned events would all be refused)."""
    i = settings.ingest
    if i.producer_id is not None:
        if i.producer_key is not None:
            return Signer(i.producer_id, i.producer_key.get_secret_value())
        grant = i.producers.get(i.producer_id)
        if grant is None:
            raise NoProducerKey(f"ingest.producer_id {i.producer_id!r} has no key: set "
                                "MANIFOLD_INGEST__PRODUCER_KEY or list it in MANIFOLD_INGEST__PRODUCERS")
        return Signer(i.producer_id, grant.key.get_secret_value())
    if settings.query.allow_dev_key:
        return Signer(DEV_PRODUCER_ID, DEV_PRODUCER_KEY)
    raise NoProducerKey("no producer key to sign events with: set MANIFOLD_INGEST__PRODUCER_ID and "
                        "MANIFOLD_INGEST__PRODUCER_KEY (docs/ingestion.md 'Producer keys'); "
                        "for local development only, "
                        "MANIFOLD_QUERY__ALLOW_DEV_KEY=true signs with the built-in development producer")
