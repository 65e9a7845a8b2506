"""HTTP bodies of `manifold serve`, beside the Kafka protocol's own models (`query.types`).

The reply of `POST /v1/ask` and `POST /v1/plan` IS `query.types.QueryReply`, the Kafka reply
envelope, so the OpenAPI document and the wire format cannot drift apart. The request bodies
carry what a `QueryRequest` carries minus what the gateway owns (request id, reply topic, the
absolute deadline, which it computes from `deadline_ms`).

Guarantees: every body is frozen and rejects unknown fields; a body that names a tenant
(`tenant`, `tenant_id`, `org_id`, `principal` at any depth) fails validation with the error
type `tenant_in_body`, which the app turns into a 400 problem: the tenant comes only from the
bearer token.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from manifold.query.types import Clarification, Evidence, Gap, QueryReply, ReplyStatus
from manifold.shared.acl_events import MAX_READERS

FORBIDDEN_KEYS = frozenset({"tenant", "tenant_id", "tenantid", "org_id", "principal"})
TENANT_IN_BODY = "tenant_in_body"


def named_tenant(node: Any, path: str = "body") -> str | None:
    """The path of the first key anywhere in `node` that names a tenant, else None."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.strip().lower() in FORBIDDEN_KEYS:
                return f"{path}.{key}"
            found = named_tenant(value, f"{path}.{key}")
            if found:
                return found
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            found = named_tenant(value, f"{path}[{i}]")
            if found:
                return found
    return None


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_tenant(cls, data: Any) -> Any:
        where = named_tenant(data)
        if where:
            raise PydanticCustomError(TENANT_IN_BODY, "{where}: the request may not name a tenant; the tenant "
                                      "comes from the bearer token", {"where": where})
        return data


class _Timing(_Body):
    deadline_ms: int | None = Field(None, ge=1, le=600_000,
                                    description="answer within this many ms (capped at query.max_deadline_ms); "
                                    "default query.default_deadline_ms")
    as_of: datetime | None = Field(None, description="read relative dates ('last quarter') against this instant")


class AskBody(_Timing):
    """A question, or the follow-up to a clarification (`continuation` + `choice`)."""

    question: str | None = Field(None, max_length=4000)
    session_id: str | None = Field(None, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    continuation: str | None = Field(None, max_length=8192,
                                     description="`clarification.continuation` of the clarify reply being answered")
    choice: str | None = Field(None, max_length=256, description="the chosen candidate (entity id or name)")


class PlanBody(_Timing):
    """An explicit plan in the plan IR (`query.plan.Plan`); it is validated before any store is
    touched and an invalid plan is answered with status `refused` and every reason."""

    plan: dict[str, Any]


class DocumentJSON(_Body):
    """`POST /v1/documents` as JSON: a document's text (or base64 bytes) under an id."""

    document_id: str = Field(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f]+$")
    content: str | None = Field(None, description="the document as UTF-8 text")
    content_base64: str | None = Field(None, description="the document's bytes, base64 (for binary formats)")
    media_type: str | None = Field(None, max_length=128, description="default: guessed from the id and content")

    @model_validator(mode="after")
    def _one_content(self) -> DocumentJSON:
        if (self.content is None) == (self.content_base64 is None):
            raise ValueError("send exactly one of content and content_base64")
        return self


class Published(BaseModel):
    """What an upload or a delete did: `published` (a new version is on its way), `unchanged`
    (same content as the latest version: nothing published) or `deleted` (a delete published)."""

    document_id: str
    version: int | None
    outcome: Literal["published", "unchanged", "deleted"]


ReaderName = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
Seq = Annotated[int, Field(ge=1, le=2**62)]


class AclBody(_Body):
    """`PUT /v1/documents/{id}/acl`: the document's FULL list of readers (it replaces the previous
    ACL). Users and groups combine with `public`; all empty and `public` false: nobody may read."""

    users: list[ReaderName] = Field(default_factory=list, max_length=MAX_READERS,
                                    description="user ids (token subjects)")
    groups: list[ReaderName] = Field(default_factory=list, max_length=MAX_READERS, description="group names")
    public: bool = Field(False, description="everyone in the tenant may read the document")
    seq: Seq | None = Field(None, description="sequence number; default: now in microseconds. An ACL with a "
                            "lower or equal seq than the applied one is ignored")


class GroupsBody(_Body):
    """`PUT /v1/principals/{user_id}/groups`: the user's FULL, flattened group list (an empty list
    removes every membership)."""

    groups: list[ReaderName] = Field(max_length=MAX_READERS)
    seq: Seq | None = Field(None, description="sequence number; default: now in microseconds")


class AclPublished(BaseModel):
    """The `DocumentAclSet` event that was published (the `acl` worker role applies it)."""

    document_id: str
    seq: int
    public: bool
    users: list[str]
    groups: list[str]
    outcome: Literal["published"] = "published"


class AclState(BaseModel):
    """A document's access state: the applied ACL, or none and the tenant default that applies."""

    document_id: str
    acl: Literal["set", "default"]
    default: Literal["tenant", "none"]
    """Who may read the document while it has no ACL (`query.acl_default` or the tenant's override)."""
    seq: int | None = None
    public: bool | None = None
    users: list[str] | None = None
    groups: list[str] | None = None
    applied_at: datetime | None = None


class GroupsPublished(BaseModel):
    """The `GroupsSet` event that was published (the `groups` worker role applies it)."""

    user_id: str
    seq: int
    groups: list[str]
    outcome: Literal["published"] = "published"


class GroupsState(BaseModel):
    """A user's applied group memberships (`recorded` false: no membership event was applied)."""

    user_id: str
    groups: list[str]
    recorded: bool


class DocumentStatus(BaseModel):
    """One document of the caller's tenant, from the publication manifest."""

    document_id: str
    active_version: int | None
    state: str
    """The state of the newest version: staged, active, retired, deleted, failed, ..."""
    versions: dict[int, str]


class DocumentList(BaseModel):
    documents: list[DocumentStatus]


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]
    """dependency -> `ok` or the reason it is not reachable."""


class EvidencePack(BaseModel):
    """What an MCP tool returns as structured content: the reply without its trace and plan."""

    request_id: str
    status: ReplyStatus
    answer: str = ""
    result: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)
    clarification: Clarification | None = None
    error: str | None = None

    @classmethod
    def of(cls, reply: QueryReply) -> EvidencePack:
        return cls(request_id=reply.request_id, status=reply.status, answer=reply.answer, result=reply.result,
                   evidence=list(reply.evidence), gaps=list(reply.gaps), clarification=reply.clarification,
                   error=reply.error)
