"""Executes a validated plan: a DAG of steps, under one deadline, one tenant and per-source breakers.

Guarantees:
- Only a `Plan` that passed `plan.validate_plan` is executed, and only through the registered
  executors (one per operator); the tenant every executor receives is the `tenant_id` argument,
  which the service takes from the verified token. Nothing in the plan can change it.
- Steps run as soon as everything they need has finished; independent steps run in parallel.
  A `$step.field` reference is replaced by that step's classified output before the step runs.
- **Budget.** Each step gets the smaller of its own `timeout_ms` and its share of what is left
  of the deadline (the time left divided over the dependency levels still to run). When less
  than `optional_floor` of the original budget is left, optional steps are cancelled first. A
  step that overruns is reported as `timeout` and a gap; the request still gets a reply in time.
- **Failure boundaries.** A failing step (store outage, timeout, open breaker) becomes a gap,
  never an exception out of `execute`. A step whose dependency failed, or whose referenced input
  came back empty, is skipped with a gap naming what was missing, instead of running unscoped.
- Breakers (`breaker.Breakers`) are counted per executor `source`.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from manifold.query.breaker import Breakers
from manifold.query.plan import REF_PATTERN, Plan, dependencies
from manifold.query.types import Gap, StepResult, TraceStep
from manifold.shared import tracing


class Executor(Protocol):
    """One operator's executor. `source` names the store it depends on (for breakers)."""

    source: str

    def run(self, params: Any, *, tenant_id: str, timeout_s: float) -> StepResult: ...


@dataclass
class Execution:
    results: dict[str, StepResult] = field(default_factory=dict)
    steps: list[TraceStep] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    def ok(self, step_id: str) -> bool:
        return step_id in self.results


class _Skip(Exception):
    def __init__(self, status: str, gap: Gap) -> None:
        super().__init__(gap.detail)
        self.status = status
        self.gap = gap


def _levels(deps: Mapping[str, set[str]]) -> dict[str, int]:
    level: dict[str, int] = {}
    for step_id in deps:  # validated plans list steps after their dependencies
        level[step_id] = 1 + max((level[d] for d in deps[step_id]), default=-1)
    return level


def resolve_refs(params: BaseModel, results: Mapping[str, StepResult], step_id: str) -> BaseModel:
    """`params` with every `$step.field` replaced by that step's output (a list of strings).
    Raises `_Skip` when a referenced output is missing or empty: a join with nothing to join."""
    updates: dict[str, Any] = {}
    for name in type(params).model_fields:
        value = getattr(params, name)
        if isinstance(value, BaseModel):
            resolved = resolve_refs(value, results, step_id)
            if resolved is not value:
                updates[name] = resolved
        elif isinstance(value, str) and (match := REF_PATTERN.match(value)):
            ref_step, ref_field = match.group(1), match.group(2)
            values = list(results[ref_step].outputs.get(ref_field, ())) if ref_step in results else []
            if not values:
                raise _Skip("skipped", Gap(step=step_id, kind="missing_data",
                                           detail=f"{step_id} needs {ref_field} from {ref_step}, which found none"))
            updates[name] = values
    return params.model_copy(update=updates) if updates else params


class Engine:
    def __init__(self, executors: Mapping[str, Executor], breakers: Breakers, *,
                 max_parallel: int = 4, optional_floor: float = 0.3,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._executors = dict(executors)
        self._breakers = breakers
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="manifold-step")
        self._optional_floor = optional_floor
        self._clock = clock

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def execute(self, plan: Plan, *, tenant_id: str, deadline: float) -> Execution:
        """Run `plan` for `tenant_id` until `deadline` (a `clock()` instant). Traced: one
        `execute` span with a child span per step (operator, status, hits)."""
        with tracing.span("execute", attributes={"manifold.steps": len(plan.steps)}):
            return self._execute(plan, tenant_id=tenant_id, deadline=deadline)

    def _execute(self, plan: Plan, *, tenant_id: str, deadline: float) -> Execution:
        out = Execution()
        deps = dependencies(plan)
        levels = _levels(deps)
        start_budget = max(deadline - self._clock(), 0.001)
        pending = {s.id: s for s in plan.steps}
        done: set[str] = set()
        running: dict[Future[StepResult], tuple[Any, float, float]] = {}
        while pending or running:
            for step_id in [s for s in list(pending) if deps[s] <= done]:
                step = pending.pop(step_id)
                started = self._clock()
                try:
                    timeout_s = self._admit(step, deps, out, levels, deadline, start_budget)
                    params = resolve_refs(step.params, out.results, step.id)
                except _Skip as skip:
                    self._record(out, step, skip.status, 0.0, gap=skip.gap)
                    done.add(step.id)
                    continue
                executor = self._executors[step.operator]
                future = self._pool.submit(contextvars.copy_context().run, executor.run, params,  # the reader's scope
                                           tenant_id=tenant_id, timeout_s=timeout_s)
                running[future] = (step, started, started + timeout_s)
            if not running:
                continue
            next_due = min(due for _, _, due in running.values())
            finished, _ = wait(list(running), timeout=max(next_due - self._clock(), 0.0),
                               return_when=FIRST_COMPLETED)
            now = self._clock()
            for future in list(running):
                step, started, due = running[future]
                if future in finished:
                    self._collect(out, step, future, started)
                elif now >= due:
                    future.cancel()
                    self._breakers.record(self._executors[step.operator].source, ok=False)
                    self._record(out, step, "timeout", (now - started) * 1000,
                                 gap=Gap(step=step.id, kind="timeout",
                                         detail=f"{step.operator} did not finish within its "
                                                f"{due - started:.2f}s budget"))
                else:
                    continue
                del running[future]
                done.add(step.id)
        return out

    def _admit(self, step: Any, deps: Mapping[str, set[str]], out: Execution, levels: Mapping[str, int],
               deadline: float, start_budget: float) -> float:
        failed = [d for d in deps[step.id] if not out.ok(d)]
        if failed:
            raise _Skip("skipped", Gap(step=step.id, kind="step_failed",
                                       detail=f"{step.id} skipped: it needs {', '.join(sorted(failed))}, "
                                              "which did not succeed"))
        left = deadline - self._clock()
        if step.optional and left < self._optional_floor * start_budget:
            raise _Skip("cancelled", Gap(step=step.id, kind="degraded",
                                         detail=f"optional step {step.id} cancelled to keep the deadline"))
        if left <= 0.005:
            raise _Skip("timeout", Gap(step=step.id, kind="timeout", detail=f"no time left for {step.id}"))
        source = self._executors[step.operator].source
        if not self._breakers.allow(source):
            raise _Skip("skipped", Gap(step=step.id, kind="degraded",
                                       detail=f"{source} is unavailable (circuit open); {step.id} not run"))
        remaining_levels = max(levels.values()) - levels[step.id] + 1
        share = left / remaining_levels
        if step.timeout_ms is not None:
            share = min(share, step.timeout_ms / 1000)
        return max(share, 0.005)

    def _collect(self, out: Execution, step: Any, future: Future[StepResult], started: float) -> None:
        elapsed_ms = (self._clock() - started) * 1000
        source = self._executors[step.operator].source
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - a failed step is a gap, never a failed request
            self._breakers.record(source, ok=False)
            self._record(out, step, "failed", elapsed_ms,
                         gap=Gap(step=step.id, kind="step_failed", detail=f"{step.operator} failed: {exc}"))
            return
        self._breakers.record(source, ok=True)
        out.results[step.id] = result
        out.gaps.extend(g if g.step else g.model_copy(update={"step": step.id}) for g in result.gaps)
        status = "ok" if result.rows or result.evidence or result.result else "empty"
        self._record(out, step, status, elapsed_ms, hits=result.rows)

    @staticmethod
    def _record(out: Execution, step: Any, status: str, elapsed_ms: float, *, hits: int = 0,
                gap: Gap | None = None) -> None:
        out.steps.append(TraceStep(step_id=step.id, operator=step.operator, status=status,  # type: ignore[arg-type]  # TraceStep validates status
                                   elapsed_ms=round(elapsed_ms, 2), hits=hits,
                                   detail=gap.detail if gap else None))
        # The step ran in a pool thread; its span is recorded here, in the `execute` span's thread,
        # with the step's own start and end.
        end = time.time_ns()
        span = tracing.tracer().start_span(f"step {step.id}", start_time=end - int(elapsed_ms * 1e6), attributes={
            "manifold.operator": step.operator, "manifold.status": status, "manifold.hits": hits})
        span.end(end_time=end)
        if gap is not None:
            out.gaps.append(gap)
