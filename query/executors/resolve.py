"""`resolve_entity`: fuzzy, tenant-scoped name resolution against the active catalog.

Guarantees:
- Candidates come only from `CatalogReader.load(tenant_id)` for the tenant passed as the keyword
  argument (the authenticated principal's), and only of the requested `kind`; so only entities
  named by an ACTIVE document version of that tenant can be resolved.
- Scoring is deterministic (rapidfuzz `WRatio` on lower-cased, punctuation-stripped text, best
  over the name, canonical key and aliases; an exact normalised match scores 100). Candidates
  scoring below `MIN_SCORE` are dropped; ties break by name, then entity id.
- `status`:
  - `resolved`: exactly one candidate, and the runner-up (if any) is more than `MARGIN` points
    behind. `outputs` then hold exactly one id, key and name.
  - `ambiguous`: two or more candidates within `MARGIN` of the best. `outputs` are EMPTY, so no
    later step runs on a guess; `result["candidates"]` lists them for a clarification.
  - `unresolved`: nothing scored `MIN_SCORE`; outputs are empty and a `missing_data` gap says so.
- Never touches a store other than through the catalog reader; never raises for a name that
  does not exist.
"""

from __future__ import annotations

import time

from rapidfuzz import fuzz, utils

from manifold.query.catalog import CatalogReader
from manifold.query.plan import ResolveEntityParams
from manifold.query.types import CatalogEntry, Gap, StepResult
from manifold.shared.stores.manifest import check_tenant

__all__ = ["MARGIN", "MIN_SCORE", "ResolveEntityExecutor", "score_entry"]

MIN_SCORE = 80.0
"""Below this a catalog entry is not a candidate at all."""
MARGIN = 3.0
"""Candidates within this many points of the best make the resolution ambiguous."""


def score_entry(text: str, entry: CatalogEntry) -> float:
    """Similarity of `text` to the entry's name, key or aliases (0-100, best of them)."""
    query = utils.default_process(text)
    best = 0.0
    for candidate in (entry.name, entry.key, *entry.aliases):
        processed = utils.default_process(candidate)
        if not processed:
            continue
        if processed == query:
            return 100.0
        best = max(best, fuzz.WRatio(query, processed))
    return best


class ResolveEntityExecutor:
    """Resolves one name of one kind to catalog entities of the caller's tenant."""

    def __init__(self, catalog: CatalogReader) -> None:
        self._catalog = catalog

    def run(self, params: ResolveEntityParams, *, tenant_id: str, timeout_s: float) -> StepResult:
        check_tenant(tenant_id)
        started = time.perf_counter()
        entries = self._catalog.load(tenant_id)
        store_ms = (time.perf_counter() - started) * 1000.0
        scored = [(score_entry(params.text, e), e) for e in entries if e.kind == params.kind]
        scored = [(s, e) for s, e in scored if s >= MIN_SCORE]
        scored.sort(key=lambda se: (-se[0], se[1].name.lower(), se[1].entity_id))
        scored = scored[: params.limit]
        candidates = [{**e.model_dump(mode="json"), "score": round(s, 2)} for s, e in scored]
        if not scored:
            return StepResult(
                result={"status": "unresolved", "text": params.text, "kind": params.kind, "candidates": []},
                gaps=(Gap(kind="missing_data",
                          detail=f"no {params.kind} named like {params.text!r} in the active catalog"),),
                store_ms=store_ms,
            )
        best = scored[0][0]
        close = [(s, e) for s, e in scored if best - s <= MARGIN]
        if len(close) > 1:
            return StepResult(
                result={"status": "ambiguous", "text": params.text, "kind": params.kind,
                        "candidates": candidates[: len(close)]},
                rows=len(close), store_ms=store_ms,
            )
        entry = scored[0][1]
        return StepResult(
            outputs={"ids": (entry.entity_id,), "keys": (entry.key,), "names": (entry.name,)},
            result={"status": "resolved", "text": params.text, "kind": params.kind,
                    "candidates": candidates[:1]},
            rows=1, store_ms=store_ms,
        )
