"""Honest abstention: a passage answer must contain what the question names (pure functions).

A search always returns its nearest passages, relevant or not. When the question names
something (a technical identifier, a quoted phrase, a capitalised name, a rare word; see
`routing.terms.salient_terms`) that occurs in none of the evidence, those passages are about
something else, and the reply must say so rather than look answered.

Guarantees of `judge(question, evidence, result, common)`:
- Only passage answers are judged: when a structured step found data (a metric with matched
  lines, a graph step with names, a price) the reply stands as it is (None).
- The terms looked for are the question's salient terms; each is looked for in every chunk's
  text and section title, and the document ids (`routing.terms.covered`: literal, or by stem).
- `Abstention.missing` lists the salient terms found in no evidence, in question order. The
  verdict is `no_answer` when nothing salient is covered, or when a technical identifier or a
  quoted phrase or a record identifier (`INV-…`) is missing (the question is about that thing,
  and no passage names it);
  `partial` when only some names, rare words or named numbers ("Debian 16") are missing; None when every salient term is
  covered or the question has none. The asker's own words for their setup (`routing.terms.own_terms`:
  "my VM", "my ISP's smarthost") count as missing only when no other salient term is covered: a
  manual says "relay host" where a user says "my ISP's smarthost", and the passage that covers
  the rest of the question answers it; alone, they are all the question names and count, but
  the verdict is then `partial`, never `no_answer`: the question's subject is in its everyday
  words ("how do I make the clock jump at startup"), which no term check can judge, so the reply
  keeps its passages and names the missing words.
- Deterministic; no I/O (`common` is the caller's word list predicate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from manifold.query.routing.terms import covered, named_number, own_terms, salient_terms, technical_terms
from manifold.query.types import Evidence
from manifold.shared.identifiers import find_identifiers

__all__ = ["Abstention", "judge"]


@dataclass(frozen=True)
class Abstention:
    status: Literal["no_answer", "partial"]
    missing: tuple[str, ...]

    def detail(self) -> str:
        names = ", ".join(f"\u201c{t}\u201d" for t in self.missing)
        return f"no evidence mentions {names}"

    def answer(self) -> str:
        """The reply's answer line: names the missing terms, except record identifiers (invoice,
        order, product numbers), which the exact-lookup gap already names: an answer never
        repeats a record number that this tenant does not hold."""
        words = tuple(t for t in self.missing if not find_identifiers(t))
        if not words:
            return "No answer: nothing in this tenant's active documents matches."
        return f"No answer: {Abstention(self.status, words).detail()} in this tenant's active documents."


def _structured(result: Mapping[str, Any]) -> bool:
    for value in result.values():
        if not isinstance(value, Mapping):
            continue
        if value.get("matched_line_count") or value.get("names") or value.get("prices"):
            return True
    return False


def judge(question: str, evidence: Sequence[Evidence], result: Mapping[str, Any],
          common: Callable[[str], bool]) -> Abstention | None:
    """The abstention verdict for a reply (see the module guarantees)."""
    if _structured(result):
        return None
    salient = salient_terms(question, common)
    if not salient:
        return None
    texts = [f"{ev.claims.get('section_title') or ''}\n{ev.text or ''}\n{ev.document_id or ''}"
             for ev in evidence if ev.kind in ("chunk", "record")]
    missing = tuple(t for t in salient if not covered(t, texts))
    own = set(own_terms(question, salient))
    if len(missing) < len(salient) and any(t not in own for t in salient if t not in missing):
        missing = tuple(t for t in missing if t not in own)  # the rest of the question is covered
    if not missing:
        return None
    strong = set(technical_terms(question)) | {t for t in salient if find_identifiers(t)}
    quoted = {t for t in salient if t not in strong and " " in t and named_number(t) is None}
    if any(t in strong or t in quoted for t in missing):
        return Abstention("no_answer", missing)
    if len(missing) == len(salient) and not all(t in own for t in missing):
        return Abstention("no_answer", missing)
    return Abstention("partial", missing)
