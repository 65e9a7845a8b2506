"""Value types shared by the query side: principal, catalog entries, hits, evidence, reply envelope.

Guarantees:
- Every model is immutable (`frozen`) and rejects unknown fields (`extra="forbid"`), so a
  misspelt field in a request, a plan or a reply is an error rather than silently ignored.
- Money and quantities never appear as floats: `Evidence.claims` values and `QueryReply.result`
  values are strings (Decimal rendered with `str`), numbers that are counts are ints.
- `Principal` is built only by `manifold.query.auth` from a verified token; nothing in a request
  body can produce one. The tenant every store query uses is `Principal.tenant_id`.

The reply envelope follows DESIGN.md §5: status, answer, result, evidence, gaps,
clarification, plan, trace.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ReplyStatus = Literal["answered", "partial", "clarify", "refused", "no_answer", "error"]
IntentType = Literal["exact_lookup", "lexical", "semantic", "aggregate", "relationship", "mixed"]
EntityKind = Literal["company", "supplier", "product", "product_group", "contract", "invoice",
                     "credit_note", "order"]
HitSource = Literal["exact", "bm25", "vector"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Principal(_Frozen):
    """The authenticated caller. `tenant_id` scopes every store query; `scopes` gate routes."""

    tenant_id: str
    subject: str
    scopes: tuple[str, ...] = ("query:read",)


class Holdings(_Frozen):
    """Which structured records a tenant's active documents hold, by record type (`invoice`,
    `credit_note`, `order`, `catalog_item`): the planner plans a metric only where they can
    serve it. `None` means unknown (every metric may be planned)."""

    record_types: frozenset[str] | None = None

    def can_serve(self, *needed: str) -> bool:
        """True when the records are unknown or any of `needed` record types is held."""
        return self.record_types is None or bool(self.record_types & set(needed))


class CatalogEntry(_Frozen):
    """One resolvable name in a tenant's catalog (from active graph entities and records).

    `entity_id` is the graph entity id (`ent_...`); `key` is the canonical key (an identifier such
    as `PRD-401`, or a normalised organisation name such as `supplier beta`); `name` is the display
    name; `aliases` are other spellings seen in documents."""

    kind: EntityKind
    entity_id: str
    key: str
    name: str
    aliases: tuple[str, ...] = ()


class TextHit(_Frozen):
    """One chunk returned by exact, BM25 or vector retrieval (one branch, one rank)."""

    chunk_id: str
    document_id: str
    version: int
    section_id: str
    section_title: str = ""
    ordinal: int = 0
    text: str
    content_sha256: str
    identifiers: tuple[str, ...] = ()
    source: HitSource
    rank: int = Field(ge=1)
    score: float | None = None
    identity: bool = False
    """True only for an exact-lookup hit whose identifiers contain the requested id verbatim."""


class Evidence(_Frozen):
    """One citable item: a chunk, a record row, a metric result or a graph edge."""

    evidence_id: str
    store: Literal["postgres", "elasticsearch", "neo4j"]
    kind: Literal["chunk", "record", "metric", "edge", "entity"]
    tenant_id: str
    document_id: str | None = None
    version: int | None = None
    chunk_id: str | None = None
    record_id: str | None = None
    edge_id: str | None = None
    text: str | None = None
    claims: dict[str, Any] = Field(default_factory=dict)
    retrieved_at: datetime
    rank: int | None = None
    routes: tuple[str, ...] = ()


class Gap(_Frozen):
    """Something the answer needed and did not get (a failed step, missing data, a cap hit)."""

    step: str | None = None
    kind: Literal["missing_data", "step_failed", "timeout", "degraded", "capped", "unauthorised"]
    detail: str


class Clarification(_Frozen):
    question: str
    anchor: str
    candidates: tuple[CatalogEntry, ...] = ()
    continuation: str | None = None
    """Opaque, signed state the client sends back (with its choice) to resume the question."""


class IntentScore(_Frozen):
    type: IntentType
    confidence: float = Field(ge=0.0, le=1.0)


class TraceStep(_Frozen):
    step_id: str
    operator: str
    status: Literal["ok", "empty", "failed", "timeout", "skipped", "cancelled"]
    elapsed_ms: float
    hits: int = 0
    detail: str | None = None


class Trace(_Frozen):
    request_id: str
    intents: tuple[IntentScore, ...] = ()
    entities: dict[str, Any] = Field(default_factory=dict)
    constraints: dict[str, Any] = Field(default_factory=dict)
    steps: tuple[TraceStep, ...] = ()
    policy: tuple[str, ...] = ()
    """Policy decisions in order, e.g. `guard: pass`, `tenant: from token`, `final check: 0 dropped`."""
    elapsed_ms: float = 0.0


class QueryReply(_Frozen):
    """The reply envelope (DESIGN.md §5), correlated to its request by `request_id`."""

    request_id: str
    status: ReplyStatus
    answer: str = ""
    result: dict[str, Any] = Field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    gaps: tuple[Gap, ...] = ()
    clarification: Clarification | None = None
    plan: dict[str, Any] | None = None
    trace: Trace
    error: str | None = None


class QueryRequest(_Frozen):
    """A request on the request topic. The principal is NOT here: it is the signed token in the
    `authorization` header. Exactly one of `question` and `plan` is set."""

    schema_version: Literal[1] = 1
    request_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    reply_topic: str = Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    deadline: datetime
    question: str | None = Field(default=None, max_length=4000)
    plan: dict[str, Any] | None = None
    session_id: str | None = Field(default=None, max_length=128)
    continuation: str | None = Field(default=None, max_length=8192)
    choice: str | None = Field(default=None, max_length=256)
    """The candidate the user picked (an entity id or name) when answering a clarification."""
    as_of: datetime | None = None


class StepResult(_Frozen):
    """What every executor returns, whatever its operator.

    - `outputs`: the classified fields later steps may reference as `$step.field` (see
      `plan.OUTPUT_FIELDS`): `ids` (graph entity ids), `keys` (canonical keys: product codes,
      normalised names), `names` (display names), `identifiers`, `document_ids`.
    - `evidence`: citable items, each carrying its (document_id, version) so the final
      active-version and tenant check can run on it.
    - `result`: typed values for the answer (Decimal as strings, counts as ints).
    - `hits`: ranked text hits (text routes only).
    - `gaps`: what this step knows is missing (a cap was hit, no matching data, ...).
    - `rows`: rows / hits / paths returned by the store (for the trace).
    - `store_ms`: time spent inside the store call(s) alone (for the benchmark ratio).
    """

    outputs: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    result: dict[str, Any] = Field(default_factory=dict)
    hits: tuple[TextHit, ...] = ()
    gaps: tuple[Gap, ...] = ()
    rows: int = 0
    store_ms: float = 0.0
