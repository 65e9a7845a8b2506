"""The query turn: guard → route → (clarify) → plan → validate → execute → final check → assemble.

Guarantees (DESIGN.md §3.5, §5; seed 002 "The turn pipeline"):
- The guard runs first, before any catalog read, model or store work; a refused question costs
  nothing and says why.
- The tenant is `principal.tenant_id`, from the verified token, and nothing else: request bodies,
  plans, question text and document text cannot change it (plans naming a tenant are rejected).
- Every plan, routed or explicit, passes `validate_plan` before a store is touched.
- An ambiguous or unresolved anchor stops the turn with `clarify` and its candidates; the
  continuation is signed and bound to the tenant and session, so a follow-up resumes the same
  question with the chosen entity and cannot be replayed by another tenant.
- Per-document access: before anything else reads a store, the reader's scope is resolved once
  from PostgreSQL (`Readers.scope`: the token's subject, its groups from the membership state,
  the tenant's ACLs) and entered for the whole turn (`shared.access.reading_as`); every store
  read runs under it in the store's own filter or policy, and a failure to resolve it is an
  `error` reply, never an unfiltered read.
- Final check: every evidence item must belong to the principal's tenant and to a version that
  is active in the manifest right now, read through the query role's ACL policies (so a document
  revoked while Elasticsearch or Neo4j answered is dropped); the trace says how many were
  dropped without saying why, so it never reveals a hidden document.
- Fallback: when a structured step (metric, graph, lookup) found no data, or no structured plan
  could be made, the text routes for the same anchors run within the same deadline and the
  answer quotes a cited line that names an anchor, `partial`, with a gap saying the number was
  read from text, not computed from records; the number check covers the quote (its numbers must
  be in the cited chunk's text).
- Structured steps only where the tenant's data can serve them: the planner gets the catalog's
  `holdings` (record types held); a metric the records cannot serve, or one the question does
  not bound, is not planned and the question is searched as passages (the trace's policy says
  which metric was skipped and why).
- Abstention (`query.abstain`): a passage answer whose evidence contains none of the question's
  salient terms (or misses a technical identifier or quoted phrase it names) is `no_answer`,
  naming the missing terms; one that misses only some names or rare words is `partial` with a
  gap naming them. Before judging, a passage answer that misses a salient term is searched once
  more with those terms (`planner.rescue_plan`: the passages holding them rank first; they lead
  the evidence when an identifier, quoted phrase or name was missed, except passages of a
  document the search had already cited, which follow the search's own; else they all follow
  it), so a
  term the documents hold is looked for before it is called missing. The answer line quotes the
  best-matching sentence of the passages (`assemble.best_passage`) and its chunk is the first
  citation.
- `answer` never raises: store outages become gaps (`partial`), bugs become `error` replies.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any, Protocol

from manifold.query import abstain, assemble
from manifold.query.engine import Engine, Execution
from manifold.query.plan import Plan, PlanError, validate_plan
from manifold.query.planner import (
    PlanningGap,
    anchor_terms,
    empty_structured_steps,
    fallback_plan,
    plan_with_notes,
    rescue_plan,
)
from manifold.query.routing.terms import covered, technical_terms
from manifold.query.types import (
    CatalogEntry,
    Clarification,
    Evidence,
    Gap,
    Holdings,
    IntentScore,
    Principal,
    QueryReply,
    QueryRequest,
    Trace,
)
from manifold.shared import access, tracing
from manifold.shared.access import ReadScope
from manifold.shared.errors import Transient

log = logging.getLogger(__name__)


class Catalog(Protocol):
    def load(self, tenant_id: str) -> Sequence[CatalogEntry]: ...

    def holdings(self, tenant_id: str) -> Holdings: ...


class ActiveVersions(Protocol):
    def active(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, int]:
        """document id -> active version, read from the manifest through the query role."""


class Readers(Protocol):
    def scope(self, principal: Principal) -> ReadScope:
        """What `principal` may read now, from the ACL and membership state."""


class Continuations(Protocol):
    def seal(self, state: dict[str, Any], *, tenant_id: str, session_id: str) -> str: ...

    def open(self, blob: str, *, tenant_id: str, session_id: str) -> dict[str, Any]: ...


class QueryService:
    def __init__(self, *, engine: Engine, catalog: Catalog, active: ActiveVersions, readers: Readers,
                 continuations: Continuations, screen: Callable[[str], Any], route: Callable[..., Any],
                 apply_choice: Callable[[Any, str], Any], classifier: Any = None,
                 closers: Sequence[Callable[[], None]] = (),
                 clock: Callable[[], float] = time.monotonic,
                 common_word: Callable[[str], bool] = lambda _word: True) -> None:
        self._engine = engine
        self._catalog = catalog
        self._active = active
        self._readers = readers
        self._continuations = continuations
        self._screen = screen
        self._route = route
        self._apply_choice = apply_choice
        self._classifier = classifier
        self._clock = clock
        self._closers = list(closers)
        self._common_word = common_word

    def close(self) -> None:
        """Stop the engine's threads and release the store clients handed in as `closers`."""
        self._engine.close()
        for close in self._closers:
            close()

    def answer(self, request: QueryRequest, principal: Principal) -> QueryReply:
        started = self._clock()
        policy = [f"tenant {principal.tenant_id}: from the verified token"]
        try:
            with tracing.span("query", attributes={"manifold.request_id": request.request_id,
                                                   "manifold.tenant_id": principal.tenant_id}):
                scope = self._readers.scope(principal)
                policy.append(f"reader {principal.subject!r}: per-document ACLs, default {scope.default!r}")
                with access.reading_as(scope):
                    return self._answer(request, principal, started, policy)
        except Exception as exc:  # noqa: BLE001 - the contract is a reply, never a crash
            log.exception("query %s failed", request.request_id)
            return self._reply(request, started, policy, status="error", error=f"internal error: {type(exc).__name__}")

    # -- the turn ---------------------------------------------------------------------------

    def _answer(self, request: QueryRequest, principal: Principal, started: float, policy: list[str]) -> QueryReply:
        deadline = started + max((request.deadline - datetime.now(UTC)).total_seconds(), 0.0)
        as_of = (request.as_of or datetime.now(UTC)).date()
        route = None
        question = request.question or ""
        degraded: list[Gap] = []  # stores that were down before the plan ran (then `partial`)
        if request.continuation is not None:
            session = request.session_id or "-"
            try:
                state = self._continuations.open(request.continuation, tenant_id=principal.tenant_id,
                                                 session_id=session)
            except Exception as exc:  # noqa: BLE001 - forged/expired continuation is a refusal
                policy.append("continuation: rejected")
                return self._reply(request, started, policy, status="refused", error=f"continuation rejected: {exc}")
            question = str(state.get("question", ""))
            as_of = date.fromisoformat(state.get("as_of", as_of.isoformat()))
            policy.append("continuation: verified")
        if request.plan is not None:
            try:
                plan = validate_plan(request.plan)
            except PlanError as exc:
                policy.append("plan: rejected")
                return self._reply(request, started, policy, status="refused",
                                   error=f"plan rejected: {exc}")
            policy.append("plan: explicit, validated")
        else:
            with tracing.span("guard"):
                decision = self._screen(question)
            if not decision.allowed:
                policy.append(f"guard: refused ({decision.category})")
                return self._reply(request, started, policy, status="refused",
                                   answer=f"Refused: {decision.reason}", error=decision.reason)
            policy.append("guard: pass")
            with tracing.span("route"):
                catalog = self._catalog_or_none(principal.tenant_id, policy, degraded)
                route = self._route(question, catalog, as_of=as_of, classifier=self._classifier)
            if request.continuation is not None and request.choice and route.clarify is not None:
                try:
                    route = self._apply_choice(route, request.choice)
                except ValueError as exc:
                    return self._clarify(request, principal, started, policy, route, question, as_of,
                                         note=str(exc))
            if route.needs_clarification:
                return self._clarify(request, principal, started, policy, route, question, as_of)
            try:
                with tracing.span("plan"):
                    # Names were not resolved while the catalog is down, so a total could drop a
                    # filter the question asked for: passages only, no figures, until it is back.
                    holdings = _NO_RECORDS if degraded else self._catalog.holdings(principal.tenant_id)
                    plan, notes = plan_with_notes(route, question, as_of=as_of, holdings=holdings)
                policy.extend(f"plan: {note}; passages instead" for note in notes)
            except PlanningGap as exc:
                reply = self._text_only(request, principal, started, policy, route, question, deadline, str(exc),
                                        degraded)
                if reply is not None:
                    return reply
                try:  # no passage names an anchor: search the question as passages, without metrics
                    plan, _ = plan_with_notes(route, question, as_of=as_of, holdings=_NO_RECORDS)
                    policy.append(f"plan: no structured plan ({exc}); passages instead")
                except PlanningGap:
                    return self._reply(request, started, policy, status="no_answer", route=route,
                                       answer=f"No answer: {exc}.",
                                       gaps=[Gap(kind="missing_data", detail=str(exc))])
            policy.append("plan: routed, validated")
        execution = self._engine.execute(plan, tenant_id=principal.tenant_id, deadline=deadline)
        execution.gaps.extend(degraded)
        execution.gaps.extend(assemble.coverage_gaps(plan, execution))
        empty = empty_structured_steps(plan, execution) if route is not None else []
        fallback = fallback_plan(route, question) if empty else None
        if fallback is not None:
            policy.append(f"fallback: text routes for the anchors ({', '.join(empty)} found no data)")
            plan, execution = _merge(plan, execution, fallback,
                                     self._engine.execute(fallback, tenant_id=principal.tenant_id, deadline=deadline))
        with tracing.span("assemble"):
            evidence = self._final_check(execution, principal, policy)
            answer, result = assemble.compose(question, plan, execution)
        verdict = abstain.judge(question, evidence, result, self._common_word) if route is not None else None
        rescue = rescue_plan(route, question, verdict.missing) if verdict is not None and fallback is None else None
        if rescue is not None:
            # the evidence misses what the question names: look for passages that hold it first
            policy.append(f"rescue: passages holding {', '.join(verdict.missing)}")  # type: ignore[union-attr]
            rescued = self._engine.execute(rescue, tenant_id=principal.tenant_id, deadline=deadline)
            leads = _leads(verdict.missing, question)  # type: ignore[union-attr]
            searched, before = {ev.document_id for ev in evidence}, [ev.evidence_id for ev in evidence]
            if leads:
                plan, execution = _merge(rescue, rescued, plan, execution)
            else:
                plan, execution = _merge(plan, execution, rescue, rescued)
            with tracing.span("assemble"):
                evidence = self._final_check(execution, principal, policy)
                if leads:
                    evidence = _rescue_order(evidence, before, searched, verdict.missing)  # type: ignore[union-attr]
                answer, result = assemble.compose(question, plan, execution)
        if fallback is not None:
            answer, result = self._quoted(plan, execution, route, question, empty, answer, result, evidence)
        return self._checked(request, started, policy, route, plan, execution, answer, result, evidence,
                             question=question)

    def _catalog_or_none(self, tenant_id: str, policy: list[str], degraded: list[Gap]) -> Sequence[CatalogEntry]:
        """The tenant's entity catalog; while its store (Neo4j) is down, none: the question is
        routed without entity names, over the stores that are up, and the reply says so."""
        try:
            return self._catalog.load(tenant_id)
        except Transient as exc:
            log.warning("catalog unavailable, routing without it: %s", exc)
            policy.append("catalog: unavailable (Neo4j); routed without entity names, passages only (no totals)")
            degraded.append(Gap(step="catalog", kind="degraded",
                                detail="the entity catalog (Neo4j) is unavailable: names were not resolved"))
            return ()

    def _text_only(self, request: QueryRequest, principal: Principal, started: float, policy: list[str],
                   route: Any, question: str, deadline: float, why: str,
                   degraded: Sequence[Gap] = ()) -> QueryReply | None:
        """No structured plan could be made (`why`): the text routes for the anchors, answered
        `partial` from a passage that names an anchor; None when no passage does."""
        plan = fallback_plan(route, question) if anchor_terms(route, question) else None
        if plan is None:
            return None
        execution = self._engine.execute(plan, tenant_id=principal.tenant_id, deadline=deadline)
        execution.gaps.extend(degraded)
        evidence = self._final_check(execution, principal, policy)
        answer, result = self._quoted(plan, execution, route, question, [why], "", {}, evidence)
        if not result.get("fallback") or not evidence:
            return None
        policy.append("fallback: text routes for the anchors (no structured plan)")
        return self._checked(request, started, policy, route, plan, execution, answer, result, evidence,
                             question=question)

    @staticmethod
    def _quoted(plan: Plan, execution: Execution, route: Any, question: str, empty: Sequence[str], answer: str,
                result: dict[str, Any], evidence: Sequence[Evidence]) -> tuple[str, dict[str, Any]]:
        """`answer` plus the fallback passage that names an anchor (from a chunk that passed the
        final check), and the gap saying so."""
        quoted = assemble.fallback_quote(plan, execution, anchor_terms(route, question), empty,
                                         documents={ev.document_id for ev in evidence if ev.document_id},
                                         topic=(route.topic or "") if route is not None else "")
        if quoted is None:
            return answer, result
        text, info = quoted
        execution.gaps.append(Gap(step="fallback_text", kind="missing_data", detail=info["reason"]))
        return (f"{answer} {text}".strip(), {**result, "fallback": info})

    def _checked(self, request: QueryRequest, started: float, policy: list[str], route: Any, plan: Plan,
                 execution: Execution, answer: str, result: dict[str, Any], evidence: list[Evidence],
                 question: str = "") -> QueryReply:
        evidence = _best_first(evidence, result)
        verdict = abstain.judge(question, evidence, result, self._common_word) if route is not None else None
        if verdict is not None:
            policy.append(f"abstain: {verdict.status} ({verdict.detail()})")
            execution.gaps.append(Gap(step="terms", kind="missing_data", detail=verdict.detail()))
            if verdict.status == "no_answer":
                return self._reply(request, started, policy, status="no_answer", route=route, plan=plan,
                                   execution=execution,
                                   answer=verdict.answer())
            answer = f"Partial: {verdict.detail()}. {answer}".strip()
        wrong = assemble.check_numbers(answer, result, evidence)
        if wrong:
            policy.append(f"number check: failed for {', '.join(wrong)}")
            return self._reply(request, started, policy, status="error", route=route, plan=plan,
                               execution=execution, error="an answer number did not match its tool result")
        policy.append("number check: pass")
        status = assemble.status_for(answer, evidence, execution.gaps, result)
        if status == "no_answer" and not answer:
            answer = "No answer: nothing in this tenant's active documents matches."
        return self._reply(request, started, policy, status=status, route=route, plan=plan,
                           execution=execution, answer=answer, result=result, evidence=evidence)

    def _final_check(self, execution: Execution, principal: Principal, policy: list[str]) -> list[Evidence]:
        evidence = [ev for res in execution.results.values() for ev in res.evidence]
        docs = sorted({ev.document_id for ev in evidence if ev.document_id})
        active = self._active.active(principal.tenant_id, docs) if docs else {}
        kept, dropped, seen = [], 0, set()
        for ev in evidence:
            if ev.evidence_id in seen:
                continue  # the same chunk from two steps (a rescue search and its search) is cited once
            seen.add(ev.evidence_id)
            if ev.tenant_id != principal.tenant_id:
                dropped += 1
            elif ev.document_id is not None and active.get(ev.document_id) != ev.version:
                dropped += 1
            else:
                kept.append(ev)
        policy.append(f"final check: {len(kept)} evidence kept, {dropped} dropped (not readable now)")
        return kept

    def _clarify(self, request: QueryRequest, principal: Principal, started: float, policy: list[str],
                 route: Any, question: str, as_of: date, note: str | None = None) -> QueryReply:
        anchor = route.clarify
        continuation = self._continuations.seal({"question": question, "as_of": as_of.isoformat()},
                                                tenant_id=principal.tenant_id,
                                                session_id=request.session_id or "-")
        if anchor.candidates:
            names = ", ".join(f"{c.name} ({c.aliases[0]})" if c.aliases and c.aliases[0] != c.name else c.name
                              for c in anchor.candidates)
            text = f"Which {anchor.kind.replace('_', ' ')} do you mean by \u201c{anchor.text}\u201d: {names}?"
        else:
            text = (f"I could not find a {anchor.kind.replace('_', ' ')} called \u201c{anchor.text}\u201d. "
                    "Which one do you mean?")
        if note:
            text = f"{note}. {text}"
        policy.append("router: clarify")
        return self._reply(request, started, policy, status="clarify", route=route, answer=text,
                           clarification=Clarification(question=text, anchor=anchor.text,
                                                       candidates=tuple(anchor.candidates),
                                                       continuation=continuation))

    def _reply(self, request: QueryRequest, started: float, policy: list[str], *, status: str,
               route: Any = None, plan: Plan | None = None, execution: Execution | None = None,
               answer: str = "", result: dict[str, Any] | None = None, evidence: Sequence[Evidence] = (),
               gaps: Sequence[Gap] = (), clarification: Clarification | None = None,
               error: str | None = None) -> QueryReply:
        trace = Trace(
            request_id=request.request_id,
            intents=tuple(IntentScore(type=i.type, confidence=round(i.confidence, 3)) for i in route.intents)
            if route else (),
            entities=_entities(route),
            constraints=_constraints(route),
            steps=tuple(execution.steps) if execution else (),
            policy=tuple(policy),
            elapsed_ms=round((self._clock() - started) * 1000, 2),
        )
        all_gaps = list(gaps) + (list(execution.gaps) if execution else [])
        return QueryReply(request_id=request.request_id, status=status, answer=answer,  # type: ignore[arg-type]  # QueryReply validates status
                          result=result or {}, evidence=tuple(evidence), gaps=tuple(all_gaps),
                          clarification=clarification,
                          plan=plan.model_dump(mode="json") if plan else None, trace=trace, error=error)


_NO_RECORDS = Holdings(record_types=frozenset())


def _rescue_order(evidence: list[Evidence], before: Sequence[str], searched: set[str | None],
                  missing: Sequence[str]) -> list[Evidence]:
    """A leading rescue's evidence order. `before` is the question's own search's evidence (ids,
    in its order) and `searched` its documents. First the rescue's new passages that hold a
    missed term as the question writes it (`_holds_as_written`) from documents that search had
    not cited; then the search's own evidence in its own order (a chunk both found keeps the
    search's place); then the rescue's other passages: those of a document the search already
    cited (that document was found; its passages chosen by the whole question are better than
    the ones that merely repeat the missed term, often an example or the document's topic), and
    those that only matched the term in another sense ("cd" the command for "a CD")."""
    own = {eid: k for k, eid in enumerate(before)}
    lead = [ev for ev in evidence if ev.evidence_id not in own and ev.document_id not in searched
            and any(_holds_as_written(t, f"{ev.claims.get('section_title') or ''}\n{ev.text or ''}") for t in missing)]
    first = {ev.evidence_id for ev in lead}
    kept = sorted((ev for ev in evidence if ev.evidence_id in own), key=lambda ev: own[ev.evidence_id])
    return [*lead, *kept, *(ev for ev in evidence if ev.evidence_id not in own and ev.evidence_id not in first)]


def _holds_as_written(term: str, text: str) -> bool:
    """Whether `text` holds `term` (`routing.terms.covered`); an acronym (two or more capitals,
    no lowercase) only in capitals, since its lowercase form is often another word ("CD" / the
    `cd` command, "US" / "us")."""
    if term.isupper() and sum(ch.isalpha() for ch in term) >= 2:
        return re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text) is not None
    return covered(term, [text])


def _leads(missing: Sequence[str], question: str) -> bool:
    """Whether a rescue search's passages lead the evidence: when what was missed is an identifier,
    a quoted phrase or a name (capitalised), the passages that hold it are what the question is
    about; a missed lowercase rare word or a number (often a variant spelling) only follows."""
    technical = set(technical_terms(question))
    return any(t in technical or " " in t or t[:1].isupper() for t in missing)


def _best_first(evidence: list[Evidence], result: dict[str, Any]) -> list[Evidence]:
    """`evidence` with the chunks the answer lines quote (`best_chunk` of each text step) first,
    in step order; the rest keep their order."""
    best = [v["best_chunk"] for v in result.values() if isinstance(v, dict) and v.get("best_chunk")]
    if not best:
        return evidence
    order = {chunk: k for k, chunk in enumerate(best)}
    return sorted(evidence, key=lambda ev: order.get(ev.chunk_id or "", len(order)))


def _merge(plan: Plan, execution: Execution, fallback: Plan, extra: Execution) -> tuple[Plan, Execution]:
    """One plan and one execution: the structured steps, then the fallback's text steps."""
    merged = Plan.model_construct(steps=(*plan.steps, *fallback.steps), join=plan.join)
    out = Execution(results={**execution.results, **extra.results}, steps=[*execution.steps, *extra.steps],
                    gaps=[*execution.gaps, *extra.gaps])
    return merged, out


def _entities(route: Any) -> dict[str, Any]:
    if route is None:
        return {}
    out: dict[str, Any] = {"identifiers": list(route.identifiers)}
    for anchor in route.anchors:
        out.setdefault(anchor.kind, []).append(
            {"mention": anchor.text, "resolved": anchor.resolved.name if anchor.resolved else None,
             "entity_id": anchor.resolved.entity_id if anchor.resolved else None,
             "candidates": [c.name for c in anchor.candidates]})
    return out


def _constraints(route: Any) -> dict[str, Any]:
    if route is None:
        return {}
    out: dict[str, Any] = {}
    if route.time is not None:
        out["time_range"] = {"phrase": route.time.phrase, "start": route.time.start.isoformat(),
                             "end": route.time.end.isoformat()}
    if route.currency:
        out["currency"] = route.currency
    if route.statuses:
        out["statuses"] = list(route.statuses)
    if route.topic:
        out["topic"] = route.topic
    return out
