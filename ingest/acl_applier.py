"""The ACL applier: the one writer of access-control state (issue 29).

Two roles over the bus, run like the publisher (`StageRunner`, same retries and DLQ):
- `acl` reads `manifold.acl` (`DocumentAclSet`, keyed tenant/document);
- `groups` reads `manifold.principals` (`GroupsSet`, keyed tenant/user).

Guarantees:
- Every event is verified before anything reads it: signed by a producer allowed its tenant
  (`envelope_auth.ProducerRegistry.check`, the same keys and tenant lists as document events),
  else dead-lettered as `unauthorized`; a malformed one is dead-lettered as `bad_input`.
- Applying is a single seq-guarded upsert in PostgreSQL (`acl_pg.PostgresAclStore`): duplicates,
  re-deliveries and out-of-order events are harmless (a lower or equal `seq` never overwrites).
- Nothing else changes: no content version, no re-parse, no embedding. Elasticsearch and Neo4j
  hold no copy of the ACL; each query resolves its reader's scope from this PostgreSQL state and
  carries it into their filters (`shared/access.py`), so an applied revoke holds in every store
  at once, with no second applier to lag behind.
- A tombstone (a key without a value, which `manifold purge-tenant` writes so that compaction
  erases a purged tenant's ACLs and memberships from the topics) is skipped, not dead-lettered.
- A stopped applier grants nothing: until an event is applied, the previous state (or the
  tenant's default) holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from manifold.shared import topics
from manifold.shared.acl_events import AccessEvent, DocumentAclSet, GroupsSet, parse_acl, parse_groups, signing_payload
from manifold.shared.envelope_auth import ProducerRegistry

log = logging.getLogger(__name__)

__all__ = ["AclState", "access_specs", "verifying"]


class AclState(Protocol):
    """Where access state is applied (PostgreSQL: `shared/stores/acl_pg.PostgresAclStore`)."""

    def apply_acl(self, event: DocumentAclSet) -> bool: ...

    def apply_groups(self, event: GroupsSet) -> bool: ...


def verifying(registry: ProducerRegistry, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """`decode` followed by the producer check (`Unauthorized` for a bad or missing signature or
    a tenant the producer may not publish for)."""

    def decode_and_verify(raw: bytes) -> AccessEvent:
        event = decode(raw)
        registry.check(event.producer, event.signature, event.tenant_id,
                       lambda producer: signing_payload(event, producer))
        return event  # type: ignore[no-any-return]  # parse_acl / parse_groups

    return decode_and_verify


def access_specs(state: AclState, registry: ProducerRegistry) -> dict[str, Any]:
    """The `StageSpec`s of the roles `acl` and `groups`."""
    from manifold.ingest.runner import Output, StageSpec

    def never_routed(_: object) -> Output:
        raise AssertionError("the ACL applier has no downstream topic")

    def apply_acl(event: DocumentAclSet | None) -> None:
        if event is None:  # a tombstone (purge-tenant erased the key): nothing to apply
            return
        changed = state.apply_acl(event)
        log.info("acl %s/%s seq %d %s", event.tenant_id, event.document_id, event.seq,
                 "applied" if changed else "not newer: kept")

    def apply_groups(event: GroupsSet | None) -> None:
        if event is None:
            return
        changed = state.apply_groups(event)
        log.info("groups %s/%s seq %d %s", event.tenant_id, event.user_id, event.seq,
                 "applied" if changed else "not newer: kept")

    src = topics.STAGE_SOURCES
    return {
        "acl": StageSpec("acl", src["acl"], verifying(registry, parse_acl), apply_acl, never_routed,
                         none_means="done", tombstones=True),
        "groups": StageSpec("groups", src["groups"], verifying(registry, parse_groups), apply_groups,
                            never_routed, none_means="done", tombstones=True),
    }
