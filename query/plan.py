"""The plan IR: a typed DAG of steps over a closed vocabulary of operators (DESIGN.md §5).

A plan is what the router compiles a question into, or what a client sends explicitly. It is
validated here *before any store is touched*; executors only ever receive validated steps.

Guarantees of `validate_plan(raw)` (raises `PlanError` with every reason it found):
- **Closed vocabulary.** Operators are `resolve_entity`, `exact_lookup`, `bm25_search`,
  `vector_search`, `hybrid_search`, `metric_query`, `graph_expand`; metric templates, relation
  types, directions, entity kinds and sources are closed `Literal` sets. Unknown fields are errors.
- **No caller tenant.** A key named `tenant`, `tenant_id`, `org_id` or `principal` anywhere in
  the plan is rejected: the tenant comes only from the verified token.
- **Bounded.** Every step has a limit under its cap (`LIMIT_CAP`, `HOP_CAP`, `FANOUT_CAP`,
  `MAX_STEPS`); a search needs a non-empty query; a metric needs a bounded period or explicit
  ids, so there are no unbounded scans.
- **Sound DAG.** Step ids are unique; `depends_on` and every `$step.field` reference name an
  earlier step (so the graph is acyclic by construction); a reference is implicitly a dependency.
- **Joins on classified fields only.** A reference may only read a classified output field
  (`REF_FIELDS`: ids, keys, names, identifiers, document_ids) that the referenced operator
  produces (`OUTPUT_FIELDS`); free text (`text`, `query`) can never feed another step, and the
  join keys must be classified too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from manifold.query.types import EntityKind

LIMIT_CAP = 100
CANDIDATE_CAP = 200
HOP_CAP = 3
FANOUT_CAP = 200
MAX_STEPS = 8
MAX_IDS = 200
FORBIDDEN_KEYS = frozenset({"tenant", "tenant_id", "org_id", "principal", "tenantid"})

REF_FIELDS = ("ids", "keys", "names", "identifiers", "document_ids")
REF_PATTERN = re.compile(r"^\$([a-z][a-z0-9_]{0,39})\.([a-z_]+)$")

Relation = Literal["APPROVED_VENDOR", "SUPPLIES", "BELONGS_TO", "PART_OF", "PARTY_TO", "COVERS",
                   "ISSUED_BY", "BILLED_TO", "CONTAINS", "ORDERED_BY", "PLACED_WITH"]
MetricName = Literal["total_spend", "revenue_at_risk", "unit_price_on"]
TextSource = Literal["elasticsearch", "postgres"]

Ids = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=MAX_IDS)]
IdsOrRef = Union[Ids, Annotated[str, Field(pattern=REF_PATTERN.pattern)]]


class PlanError(ValueError):
    """The plan was rejected before execution; `reasons` lists every problem found."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


class _Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResolveEntityParams(_Params):
    kind: EntityKind
    text: str = Field(min_length=1, max_length=200)
    limit: int = Field(5, ge=1, le=10)


class ExactLookupParams(_Params):
    identifiers: IdsOrRef
    sources: tuple[TextSource, ...] = ("elasticsearch", "postgres")
    limit: int = Field(20, ge=1, le=LIMIT_CAP)


class TextSearchParams(_Params):
    query: str = Field(min_length=1, max_length=1000)
    limit: int = Field(10, ge=1, le=LIMIT_CAP)
    document_ids: IdsOrRef | None = None
    """Restrict to these documents (a structural scope), e.g. `$notice.document_ids`."""


class BM25SearchParams(TextSearchParams):
    pass


class VectorSearchParams(TextSearchParams):
    ef_search: int = Field(100, ge=10, le=1000)


class HybridSearchParams(TextSearchParams):
    identifiers: IdsOrRef | None = None
    candidates: int = Field(40, ge=1, le=CANDIDATE_CAP)
    """Per-branch candidate depth before fusion."""
    query_class: Literal["default", "exact", "lexical", "semantic"] = "default"
    """Selects the per-class RRF weights from settings."""
    per_document_cap: int = Field(2, ge=1, le=10)
    terms: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...] = Field((), max_length=10)
    """Technical identifiers the question names (`max_connections`, `--no-verify`, `GIT_DIR`):
    among the fused candidates, chunks holding more of them literally rank first."""


class Period(_Params):
    start: date
    end: date
    """Half-open: [start, end)."""

    @model_validator(mode="after")
    def _ordered(self) -> Period:
        if self.end <= self.start:
            raise ValueError("period end must be after its start")
        if (self.end - self.start).days > 3660:
            raise ValueError("period longer than ten years")
        return self


class MetricParams(_Params):
    company_names: IdsOrRef | None = None
    supplier_names: IdsOrRef | None = None
    product_codes: IdsOrRef | None = None
    order_numbers: IdsOrRef | None = None
    period: Period | None = None
    on: date | None = None
    currency: str | None = Field(None, pattern=r"^[A-Z]{3}$")
    statuses: tuple[Annotated[str, Field(min_length=1, max_length=40)], ...] | None = None
    price_source: Literal["invoice", "catalog"] | None = None
    """unit_price_on only: the price the question names (invoice lines or catalog items)."""


class MetricQueryParams(_Params):
    metric: MetricName
    where: MetricParams = MetricParams()

    @model_validator(mode="after")
    def _bounded(self) -> MetricQueryParams:
        w = self.where
        if self.metric == "unit_price_on":
            if w.product_codes is None or w.on is None:
                raise ValueError("unit_price_on needs product_codes and on")
        elif self.metric == "total_spend":
            if w.period is None and not any((w.company_names, w.supplier_names, w.product_codes)):
                raise ValueError("total_spend needs a period or at least one of company, supplier, product")
        return self


class GraphExpandParams(_Params):
    from_ids: IdsOrRef
    relation: Relation | tuple[Relation, ...]
    direction: Literal["out", "in"] = "out"
    max_hops: int = Field(1, ge=1)
    valid_during: Period | None = None
    fanout_cap: int = Field(50, ge=1, le=FANOUT_CAP)

    @field_validator("max_hops")
    @classmethod
    def _hops(cls, value: int) -> int:
        if value > HOP_CAP:
            raise ValueError(f"max_hops {value} is over the limit of {HOP_CAP}")
        return value


class _Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    depends_on: tuple[str, ...] = ()
    optional: bool = False
    """Optional steps are cancelled first when the deadline is short; their failure is a gap."""
    timeout_ms: int | None = Field(None, ge=10, le=60_000)


class ResolveEntityStep(_Step):
    operator: Literal["resolve_entity"]
    params: ResolveEntityParams


class ExactLookupStep(_Step):
    operator: Literal["exact_lookup"]
    params: ExactLookupParams


class BM25SearchStep(_Step):
    operator: Literal["bm25_search"]
    params: BM25SearchParams


class VectorSearchStep(_Step):
    operator: Literal["vector_search"]
    params: VectorSearchParams


class HybridSearchStep(_Step):
    operator: Literal["hybrid_search"]
    params: HybridSearchParams


class MetricQueryStep(_Step):
    operator: Literal["metric_query"]
    params: MetricQueryParams


class GraphExpandStep(_Step):
    operator: Literal["graph_expand"]
    params: GraphExpandParams


Step = Annotated[
    Union[ResolveEntityStep, ExactLookupStep, BM25SearchStep, VectorSearchStep, HybridSearchStep,
          MetricQueryStep, GraphExpandStep],
    Field(discriminator="operator"),
]

OPERATORS = ("resolve_entity", "exact_lookup", "bm25_search", "vector_search", "hybrid_search",
             "metric_query", "graph_expand")

OUTPUT_FIELDS: dict[str, frozenset[str]] = {
    "resolve_entity": frozenset({"ids", "keys", "names"}),
    "exact_lookup": frozenset({"identifiers", "document_ids"}),
    "bm25_search": frozenset({"identifiers", "document_ids"}),
    "vector_search": frozenset({"identifiers", "document_ids"}),
    "hybrid_search": frozenset({"identifiers", "document_ids"}),
    "metric_query": frozenset(),
    "graph_expand": frozenset({"ids", "keys", "names"}),
}
"""The classified fields each operator's result exposes to later steps."""


class Join(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    keys: tuple[Literal["ids", "keys", "names", "identifiers", "document_ids"], ...] = ()
    missing: Literal["report_gap", "fail"] = "report_gap"


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: tuple[Step, ...] = Field(min_length=1, max_length=MAX_STEPS)
    join: Join = Join()

    def step(self, step_id: str) -> Any:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


def references(step: Any) -> list[tuple[str, str, str]]:
    """(param name, referenced step, field) for every `$step.field` in a step's params."""
    found = []
    for name, value in _walk_params(step.params):
        if isinstance(value, str):
            match = REF_PATTERN.match(value)
            if match:
                found.append((name, match.group(1), match.group(2)))
    return found


def _walk_params(model: BaseModel, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out.extend(_walk_params(value, f"{prefix}{name}."))
        else:
            out.append((f"{prefix}{name}", value))
    return out


def _forbidden_keys(node: Any, path: str = "plan") -> list[str]:
    reasons = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(key, str) and key.strip().lower() in FORBIDDEN_KEYS:
                reasons.append(f"{path}.{key}: a plan may not name a tenant or principal; "
                               "the tenant comes from the authenticated token")
            reasons.extend(_forbidden_keys(value, f"{path}.{key}"))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            reasons.extend(_forbidden_keys(value, f"{path}[{i}]"))
    return reasons


def validate_plan(raw: Mapping[str, Any] | Plan) -> Plan:
    """Parse and check a plan (see the module docstring); raise `PlanError` listing every reason."""
    if isinstance(raw, Plan):
        raw = raw.model_dump(mode="json")
    if not isinstance(raw, Mapping):
        raise PlanError(["a plan must be a JSON object"])
    reasons = _forbidden_keys(raw)
    if reasons:
        raise PlanError(reasons)
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # pydantic also reports a tuple whose items all failed as "too short"; that is noise.
        if any(tuple(e.get("loc", ()))[:1] == ("steps",) and len(e.get("loc", ())) > 1 for e in errors):
            errors = [e for e in errors if tuple(e.get("loc", ())) != ("steps",)]
        raise PlanError([_describe(err) for err in errors]) from None
    seen: dict[str, str] = {}
    for step in plan.steps:
        if step.id in seen:
            reasons.append(f"step id {step.id!r} is used twice")
        for dep in step.depends_on:
            if dep not in seen:
                reasons.append(f"step {step.id!r} depends on {dep!r}, which is not an earlier step")
        for name, ref_step, ref_field in references(step):
            if ref_step not in seen:
                reasons.append(f"step {step.id!r}.{name} refers to ${ref_step}, which is not an earlier step")
            elif ref_field not in REF_FIELDS:
                reasons.append(f"step {step.id!r}.{name} joins on ${ref_step}.{ref_field}: only classified "
                               f"fields ({', '.join(REF_FIELDS)}) may be joined, never free text")
            elif ref_field not in OUTPUT_FIELDS[seen[ref_step]]:
                reasons.append(f"step {step.id!r}.{name}: {seen[ref_step]} step {ref_step!r} has no "
                               f"output field {ref_field!r}")
        seen[step.id] = step.operator
    if reasons:
        raise PlanError(reasons)
    return plan


def dependencies(plan: Plan) -> dict[str, set[str]]:
    """step id -> the steps it needs (explicit `depends_on` plus every referenced step)."""
    return {s.id: set(s.depends_on) | {ref for _, ref, _ in references(s)} for s in plan.steps}


def _describe(err: Mapping[str, Any]) -> str:
    loc = ".".join(str(part) for part in err.get("loc", ()))
    msg = str(err.get("msg", "invalid"))
    if err.get("type") == "union_tag_invalid":
        msg = f"unknown operator (allowed: {', '.join(OPERATORS)})"
    elif err.get("type") == "extra_forbidden":
        msg = "unknown field"
    return f"{loc}: {msg}" if loc else msg
