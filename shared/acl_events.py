"""Access events: who may read a document, and which groups a user belongs to (issue 29).

Two event types, each on its own compacted topic (`topics.ACL`, `topics.PRINCIPALS`), separate
from content versions:

- `DocumentAclSet` (key `tenant/document`): the FULL list of readers of one document, as users,
  groups and/or `public` (everyone in the tenant), with a per-document sequence number `seq`.
- `GroupsSet` (key `tenant/user`): the FULL, flattened list of groups one user belongs to (nested
  groups are the producer's to flatten), with a per-user `seq`. An empty list removes every
  membership.

Guarantees:
- Both are replacements, never deltas, so duplicates and re-deliveries are harmless, and the
  applier keeps the highest `seq` it has seen (a lower or equal `seq` never overwrites).
- Both are signed exactly like document events: HMAC-SHA256 with the producer's key
  (`envelope_auth.ProducerRegistry`, the same `ingest.producers` and tenant lists) over the
  canonical JSON array

      ["manifold.acl.v1", producer, type, tenant_id, subject, seq, public, users, groups]

  where `subject` is the document id (ACL) or user id (groups), `users` and `groups` sorted
  and de-duplicated (an ACL event's `public` is false and `users` empty for `GroupsSet`). An
  unsigned, mis-signed or out-of-tenant event raises `Unauthorized` (dead-lettered as
  `unauthorized`).
- Names are bounded: at most `MAX_READERS` users and `MAX_READERS` groups per event, each name
  1-256 printable characters; anything else is `BadInput` (dead-lettered as `bad_input`).
- Nothing here touches content: an ACL event carries no version, and a content event no ACL.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from manifold.shared.errors import BadInput
from manifold.shared.events import TenantId, check_document_id, event_key

SIGNING_CONTEXT = "manifold.acl.v1"
MAX_READERS = 10_000
Name = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]


def _sorted_unique(values: list[str]) -> list[str]:
    return sorted(set(values))


class _AccessEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()), min_length=1, max_length=128)
    tenant_id: TenantId
    seq: int = Field(ge=1, le=2**62)
    occurred_at: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    producer: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    signature: str | None = Field(None, max_length=128)


class DocumentAclSet(_AccessEvent):
    """Who may read `document_id` from now on (replaces every earlier ACL of the document)."""

    type: Literal["DocumentAclSet"] = "DocumentAclSet"
    document_id: str
    public: bool = False
    users: list[Name] = Field(default_factory=list, max_length=MAX_READERS)
    groups: list[Name] = Field(default_factory=list, max_length=MAX_READERS)

    _doc_id = field_validator("document_id")(check_document_id)
    _norm = field_validator("users", "groups")(_sorted_unique)

    @property
    def subject(self) -> str:
        return self.document_id

    @property
    def key(self) -> bytes:
        return event_key(self.tenant_id, self.document_id)


class GroupsSet(_AccessEvent):
    """The groups `user_id` belongs to from now on (replaces every earlier membership)."""

    type: Literal["GroupsSet"] = "GroupsSet"
    user_id: Name
    groups: list[Name] = Field(default_factory=list, max_length=MAX_READERS)

    _norm = field_validator("groups")(_sorted_unique)

    @property
    def subject(self) -> str:
        return self.user_id

    @property
    def key(self) -> bytes:
        return principal_key(self.tenant_id, self.user_id)


AccessEvent = DocumentAclSet | GroupsSet


def principal_key(tenant_id: str, user_id: str) -> bytes:
    """The key of a user's membership events on `manifold.principals`: `tenant/user`."""
    return f"{tenant_id}/{user_id}".encode()


def signing_payload(event: AccessEvent, producer: str) -> bytes:
    """The exact bytes a producer signs (see the module docstring)."""
    public = event.public if isinstance(event, DocumentAclSet) else False
    users = event.users if isinstance(event, DocumentAclSet) else []
    body = [SIGNING_CONTEXT, producer, event.type, event.tenant_id, event.subject, event.seq, public,
            sorted(set(users)), sorted(set(event.groups))]
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()


def first_error(err: ValidationError) -> str:
    """`field: message` of the first validation error (what a user is told)."""
    errors = err.errors()
    if not errors:
        return "event: invalid"
    where = ".".join(str(p) for p in errors[0]["loc"]) or "event"
    return f"{where}: {errors[0]['msg']}"


def _decode(raw: bytes, model: type[DocumentAclSet] | type[GroupsSet]) -> AccessEvent:
    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        raise BadInput(f"not a valid {model.__name__} event: {first_error(err)}") from None
    except ValueError:
        raise BadInput(f"not a valid {model.__name__} event (not JSON)") from None


def parse_acl(raw: bytes) -> DocumentAclSet:
    """A `DocumentAclSet` from bytes, or `BadInput` naming the first invalid field."""
    return _decode(raw, DocumentAclSet)  # type: ignore[return-value]  # the model asked for


def parse_groups(raw: bytes) -> GroupsSet:
    """A `GroupsSet` from bytes, or `BadInput` naming the first invalid field."""
    return _decode(raw, GroupsSet)  # type: ignore[return-value]  # the model asked for


def sign_access(event: AccessEvent, producer: str, key: str) -> AccessEvent:
    """`event` carrying `producer` and its signature under `key` (HMAC-SHA256, as documents)."""
    from manifold.shared.envelope_auth import mac

    unsigned = event.model_copy(update={"producer": producer, "signature": None})
    return unsigned.model_copy(update={"signature": mac(key, signing_payload(unsigned, producer))})
