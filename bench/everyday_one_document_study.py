"""Would "one document must name what the question names" catch unanswerable questions? An
offline study on the DEVELOPMENT halves of every everyday set, over the evidence the last runs saved.

`query.abstain` looks for each salient term of a question (`routing.terms.salient_terms`) in ALL
the evidence together, so a question whose terms are spread over unrelated documents ("Can ffmpeg
create subtitles ... using speech recognition?": "speech" in eSpeak's pages) looks covered. The
rule studied here judges the terms against the evidence of ONE document at a time, the document
covering most of them, and reports what that would change:

- `now`: the verdict `abstain.judge` gives the saved evidence (checked against the saved status);
- `one_document`: the same verdict with the evidence cut to the best-covering document's items.

Counted per set: answerable questions the rule would newly abstain on (`no_answer` or `partial`
where now None; each a false abstention or a new "Partial:"), and unanswerable ones it would newly
catch. Held-out questions are never read (filtered on `split == "dev"` first).

Usage: .venv/bin/python bench/everyday_one_document_study.py [--out FILE]
Writes bench/results/everyday_one_document_study.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine  # noqa: E402 - bench/ on sys.path

RUNS = {"everyday": "everyday_embedded.json", "everyday_probe": "everyday_probe_embedded.json",
        **{f"everyday_probe{n}": f"everyday_probe{n}_embedded.json" for n in range(2, 10)}}


def _verdict(question: str, items: list[tuple[str, str]]) -> tuple[str | None, list[str]]:
    from manifold.query import abstain
    from manifold.query.composition import common_word
    from manifold.query.types import Evidence

    now = datetime.now(UTC)
    evidence = [Evidence(evidence_id=f"e{i}", store="postgres", kind="chunk", tenant_id="t", document_id=doc,
                         text=text, retrieved_at=now) for i, (doc, text) in enumerate(items)]
    v = abstain.judge(question, evidence, {}, common_word)
    return (v.status, list(v.missing)) if v else (None, [])


def _best_document(question: str, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The items of the document whose items cover most salient terms (ties: earliest ranked)."""
    from manifold.query.composition import common_word
    from manifold.query.routing.terms import covered, salient_terms

    salient = salient_terms(question, common_word)
    by_doc: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for doc, text in items:
        by_doc[doc].append((doc, text))
    order = list(dict.fromkeys(doc for doc, _ in items))

    def score(doc: str) -> int:
        texts = [f"\n{t}\n{d}" for d, t in by_doc[doc]]
        return sum(1 for t in salient if covered(t, texts))

    best = max(order, key=lambda d: (score(d), -order.index(d))) if order else None
    return by_doc[best] if best is not None else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "everyday_one_document_study.json")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for name, run in RUNS.items():
        path = ROOT / "results" / run
        if not path.exists():
            continue
        for q in json.loads(path.read_text())["questions"]:
            if q.get("split") != "dev" or q.get("refused") or not q.get("texts"):
                continue
            items = list(zip(q.get("documents") or [], q["texts"], strict=False))
            now, _ = _verdict(q["question"], items)
            one, missing = _verdict(q["question"], _best_document(q["question"], items))
            rows.append({"set": name, "id": q["id"], "answerable": q["answerable"], "saved_status": q["status"],
                         "now": now, "one_document": one, "missing": missing, "question": q["question"]})
    changed = [r for r in rows if r["now"] is None and r["one_document"] is not None]
    out = {"study": "salient terms judged against one document's evidence (dev halves only)",
           "commit": commit(), "machine": machine(), "dev_questions": len(rows),
           "answerable": sum(r["answerable"] for r in rows),
           "answerable_newly_judged": sum(r["answerable"] for r in changed),
           "answerable_newly_no_answer": sum(r["answerable"] and r["one_document"] == "no_answer" for r in changed),
           "unanswerable": sum(not r["answerable"] for r in rows),
           "unanswerable_not_caught_now": sum(not r["answerable"] and r["now"] is None for r in rows),
           "unanswerable_newly_caught": sum(not r["answerable"] for r in changed),
           "changed": changed}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("changed", "machine")}))
    for r in changed:
        print(r["set"], r["id"], "answerable" if r["answerable"] else "UNANSWERABLE", r["one_document"],
              r["missing"], "|", r["question"][:110])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
