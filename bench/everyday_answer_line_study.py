"""Does the answer line quote the fact? The quote rule of `query.passage` against its earlier
forms, offline over the saved evidence of the DEVELOPMENT halves only.

For every answerable dev question of the everyday sets whose results file (`bench/results/
everyday*_embedded.json`, not the blind runs) holds evidence texts, `passage.best_passage` is run
again over those texts (section title and text as saved; the question's technical terms as its
terms) under three quote rules, and the quote is scored like the run's `answer_quotes_support`
(`everyday_common.found`: the quote holds a support string):

- `one_unit`: the chosen sentence, clause or row alone (the rule before 2026-12-07);
- `asks_then_answer`: a unit ending `?` or `:`, or a head line, with the unit after it;
- `served`: that, and any other sentence with the next of its paragraph when both fit (today's).

The texts are the evidence of the run that wrote each file, so this isolates the quote rule.
Held-out questions are never read. Writes bench/results/everyday_answer_line_study.json.

Usage: .venv/bin/python bench/everyday_answer_line_study.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from everyday_common import found  # noqa: E402 - bench/ on sys.path
from everyday_rerank_study import dev_rows  # noqa: E402
from metrics_eval import commit, machine  # noqa: E402

Spans = Sequence[tuple[int, int]]


def main() -> int:
    from manifold.query import passage
    from manifold.query.routing.terms import technical_terms

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "everyday_answer_line_study.json")
    args = ap.parse_args()
    served = passage._answer_end

    def one_unit(text: str, spans: Spans, k: int, heads: Spans) -> int:
        return spans[k][1]

    def asks_then_answer(text: str, spans: Spans, k: int, heads: Spans) -> int:
        start, end = spans[k]
        asks = text[start:end].rstrip().endswith(("?", ":")) or (start, end) in heads
        return served(text, spans, k, heads) if asks else end

    rules: dict[str, Callable[..., int]] = {"one_unit": one_unit, "asks_then_answer": asks_then_answer,
                                             "served": served}
    rows = dev_rows()
    out: dict[str, Any] = {"study": "answer-line quote rules over saved dev evidence", "commit": commit(),
                           "machine": machine(), "questions": len(rows), "rules": {}}
    try:
        for name, rule in rules.items():
            passage._answer_end = rule  # type: ignore[assignment]
            hits = chars = 0
            for question, texts, support in rows:
                items = [SimpleNamespace(text=t.partition("\n")[2], section_title=t.partition("\n")[0],
                                         document_id="d", chunk_id=str(i)) for i, t in enumerate(texts)]
                picked = passage.best_passage(question, items, technical_terms(question))
                if picked is not None:
                    hits += found([picked[1]], support)
                    chars += len(picked[1])
            out["rules"][name] = {"quotes_support": hits, "rate": round(hits / len(rows), 3),
                                  "mean_quote_chars": round(chars / len(rows))}
    finally:
        passage._answer_end = served  # type: ignore[assignment]
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["rules"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
