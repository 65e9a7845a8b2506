"""The access publish client: `manifold acl set`, `manifold groups set` and the HTTP API publish
per-document ACLs and group memberships as signed events (issue 29).

Guarantees:
- Every event is signed by the configured upstream producer (`envelope_auth.Signer`, the same
  key and tenant list as document events) and acknowledged by the bus before `set_*` returns
  (any bus adapter: confluent-kafka's producer, or `BusProducer` on the embedded profile).
- Events are full replacements; `seq` defaults to the current time in microseconds, so a later
  command supersedes an earlier one; an upstream system that keeps its own counter passes `seq`.
- Input is validated before anything is sent (`acl_events`): a bad tenant, document id or name
  raises `ValueError` naming the field, and nothing is published.
- Publishing changes no content: the applier (`ingest/acl_applier.py`) writes the ACL state;
  no version is created and nothing is re-parsed or re-embedded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from manifold.shared import topics
from manifold.shared.acl_events import AccessEvent, DocumentAclSet, GroupsSet, first_error, sign_access
from manifold.shared.envelope_auth import Signer
from manifold.shared.messaging import Producer, send_and_wait


def next_seq() -> int:
    """A sequence number that grows with wall-clock time (microseconds since the epoch)."""
    return time.time_ns() // 1000


@dataclass
class AccessClient:
    """Publishes `DocumentAclSet` and `GroupsSet` events."""

    producer: Producer
    signer: Signer

    def _send(self, topic: str, event: AccessEvent) -> AccessEvent:
        signed = sign_access(event, self.signer.producer, self.signer.key)
        send_and_wait(self.producer, topic, signed.key, signed.model_dump_json().encode(), None, 30.0)
        return signed

    def set_acl(self, tenant_id: str, document_id: str, *, users: Sequence[str] = (), groups: Sequence[str] = (),
                public: bool = False, seq: int | None = None) -> DocumentAclSet:
        """Replace who may read `document_id` (no readers at all: nobody may)."""
        try:
            event = DocumentAclSet(tenant_id=tenant_id, document_id=document_id, users=list(users),
                                   groups=list(groups), public=public, seq=seq or next_seq())
        except ValidationError as err:
            raise ValueError(first_error(err)) from None
        return self._send(topics.ACL, event)  # type: ignore[return-value]  # the same event, signed

    def set_groups(self, tenant_id: str, user_id: str, groups: Sequence[str], *,
                   seq: int | None = None) -> GroupsSet:
        """Replace the groups `user_id` belongs to (an empty list removes every membership)."""
        try:
            event = GroupsSet(tenant_id=tenant_id, user_id=user_id, groups=list(groups), seq=seq or next_seq())
        except ValidationError as err:
            raise ValueError(first_error(err)) from None
        return self._send(topics.PRINCIPALS, event)  # type: ignore[return-value]  # the same event, signed
