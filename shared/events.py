"""Upstream document events: the versioned envelopes published to `manifold.documents`.

Guarantees:
- Envelopes are frozen pydantic models; `parse_event` is the one way bytes from Kafka become an
  event, and it raises `BadEvent` (never a bare ValidationError) with a reason an operator can read.
- Events are keyed `tenant/document` (`event_key`), so one document's versions share a partition.
- Content travels inline (base64, at most `MAX_INLINE_BYTES`) or as a claim-check reference to
  the staging store, never both; the sha256 always names the content bytes.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from manifold.shared.errors import BadEvent

SCHEMA_VERSION: Final = 1
MAX_INLINE_BYTES = 256 * 1024
MAX_EVENT_BYTES = 512 * 1024  # a serialized envelope; larger content must use a claim check
MAX_METADATA_ITEMS = 64

TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
"""For pydantic (Rust regex: `$` is the end of the text). With Python's `re`, use `fullmatch`:
`re.match` with `$` also accepts a trailing newline."""
_DOC_ID_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]")

def is_tenant(value: object) -> bool:
    """True for a tenant slug (`fullmatch`: no trailing newline, nothing after it)."""
    return isinstance(value, str) and re.fullmatch(TENANT_PATTERN, value) is not None


TenantId = Annotated[str, Field(pattern=TENANT_PATTERN, description="lower-case tenant slug")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
MetadataValue = str | int | float | bool | None


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SEGMENT_SEPARATORS = re.compile(r"[/\\]")


def check_document_id(value: str) -> str:
    """`value` if it is a valid document id, else `ValueError` saying why.

    An id is 1-512 characters without control characters, and is never path-shaped in a way that
    could name something outside its tenant's namespace: no leading `/` (or `\\`), and no empty,
    `.` or `..` segment between separators (`/` or `\\`). A URL-shaped id keeps its `scheme://`
    (`https://wiki.example/page` is valid; `https://../x` is not). The same rule holds for the
    upstream contract (every event model), the HTTP API and `manifold ingest`."""
    if not 1 <= len(value) <= 512:
        raise ValueError("document_id must be 1-512 characters")
    if _DOC_ID_FORBIDDEN.search(value):
        raise ValueError("document_id must not contain control characters")
    rest = _URL_SCHEME.sub("", value, count=1)
    segments = _SEGMENT_SEPARATORS.split(rest)
    if segments[0] == "" and len(segments) > 1:
        raise ValueError(f"document_id must not start with a path separator: {value!r}")
    bad = next((s for s in segments if s in ("", ".", "..")), None)
    if bad is not None:
        shown = "an empty" if bad == "" else f"a {bad!r}"
        raise ValueError(f"document_id must not contain {shown} path segment: {value!r}")
    return value


class ContentRef(BaseModel):
    """A claim check: content stored in the staging store under its sha256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: Literal["staging"] = "staging"
    sha256: Sha256
    size: int = Field(ge=0)


class _Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()), min_length=1, max_length=128)
    tenant_id: TenantId
    document_id: str
    version: int = Field(ge=1)
    occurred_at: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    producer: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    """The upstream producer that signed this envelope (`shared.envelope_auth`)."""
    signature: str | None = Field(None, max_length=128)
    """`hmac-sha256:<hex>` over the envelope's signed fields (`shared.envelope_auth`)."""

    _doc_id = field_validator("document_id")(check_document_id)

    @property
    def key(self) -> bytes:
        return event_key(self.tenant_id, self.document_id)


class DocumentUpserted(_Envelope):
    """Version `version` of a document; versions of one document are strictly increasing."""

    type: Literal["DocumentUpserted"] = "DocumentUpserted"
    content_sha256: Sha256
    media_type: str = Field(min_length=3, max_length=255, pattern=r"^[\w.+-]+/[\w.+-]+$")
    content_b64: str | None = None
    content_ref: ContentRef | None = None
    size: int = Field(ge=0)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > MAX_METADATA_ITEMS:
            raise ValueError(f"at most {MAX_METADATA_ITEMS} metadata items")
        for key, item in value.items():
            if not 1 <= len(key) <= 128:
                raise ValueError("metadata keys must be 1-128 characters")
            if isinstance(item, str) and len(item) > 4096:
                raise ValueError(f"metadata value for {key!r} exceeds 4096 characters")
            if isinstance(item, float) and not math.isfinite(item):  # JSON has no Infinity or NaN
                raise ValueError(f"metadata value for {key!r} must be a finite number")
        return value

    @model_validator(mode="after")
    def _one_content_source(self) -> DocumentUpserted:
        if (self.content_b64 is None) == (self.content_ref is None):
            raise ValueError("exactly one of content_b64 and content_ref must be set")
        if self.content_b64 is not None:
            try:
                raw = base64.b64decode(self.content_b64, validate=True)
            except ValueError as err:
                raise ValueError(f"content_b64 is not valid base64: {err}") from None
            if len(raw) > MAX_INLINE_BYTES:
                raise ValueError(f"inline content exceeds {MAX_INLINE_BYTES} bytes; use a content_ref")
            if len(raw) != self.size:
                raise ValueError(f"size {self.size} does not match inline content ({len(raw)} bytes)")
            if hashlib.sha256(raw).hexdigest() != self.content_sha256:
                raise ValueError("content_sha256 does not match the inline content")
        else:
            assert self.content_ref is not None
            if self.content_ref.sha256 != self.content_sha256 or self.content_ref.size != self.size:
                raise ValueError("content_ref does not match content_sha256/size")
        return self

    def inline_content(self) -> bytes | None:
        return None if self.content_b64 is None else base64.b64decode(self.content_b64)


class DocumentDeleted(_Envelope):
    """The document is deleted as of `version` (greater than any version it replaces)."""

    type: Literal["DocumentDeleted"] = "DocumentDeleted"


DocumentEvent = Annotated[DocumentUpserted | DocumentDeleted, Field(discriminator="type")]
_EVENT = TypeAdapter(DocumentEvent)


def event_key(tenant_id: str, document_id: str) -> bytes:
    """The Kafka key of a document's events: one document, one partition, ordered versions."""
    return f"{tenant_id}/{document_id}".encode()


def parse_event(raw: bytes) -> DocumentUpserted | DocumentDeleted:
    """Validate bytes from the bus into an event; raise `BadEvent` with a readable reason."""
    if len(raw) > MAX_EVENT_BYTES:
        raise BadEvent(f"event is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES} (use a content_ref)")
    try:
        return _EVENT.validate_json(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in err.errors()[:5]
        )
        raise BadEvent(f"invalid document event: {problems}") from None


def upserted(
    tenant_id: str,
    document_id: str,
    version: int,
    content: bytes,
    media_type: str,
    metadata: dict[str, MetadataValue] | None = None,
    content_ref: ContentRef | None = None,
) -> DocumentUpserted:
    """Build an upsert; content goes inline unless a claim-check `content_ref` is given."""
    sha = hashlib.sha256(content).hexdigest()
    inline = None if content_ref is not None else base64.b64encode(content).decode()
    return DocumentUpserted(
        tenant_id=tenant_id,
        document_id=document_id,
        version=version,
        content_sha256=sha,
        media_type=media_type,
        content_b64=inline,
        content_ref=content_ref,
        size=len(content),
        metadata=metadata or {},
    )
