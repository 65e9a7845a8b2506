"""Would "a word of the question that occurs nowhere in the corpus" catch unanswerable questions?
An offline study on the DEVELOPMENT halves of every everyday set (no service, no model).

For each set (`bench/everyday*/`), the corpus's words are read from its files (PDFs through
`pdftotext`; office files skipped) and reduced to their Snowball stems (`shared.analysis`). For each
dev question, its content words (three letters or more, not stop or question words) whose stems
the corpus lacks are listed. Reported: how many answerable questions hold such a word (each would
be a false abstention under that rule) and how many unanswerable ones do, among them the questions
whose other terms are all present (the ones the evidence-level check of `query.abstain` misses).

Held-out questions are never read (filtered on `split == "dev"` first). Writes
bench/results/everyday_absent_words_study.json (or `--out`).

Usage: .venv/bin/python bench/everyday_absent_words_study.py
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine  # noqa: E402 - bench/ on sys.path

_SKIP = re.compile(r"\.(xlsx|xls|ods|odt|docx|pptx|gz|zip)$", re.IGNORECASE)


def corpus_stems(corpus: Path) -> set[str]:
    from manifold.shared import analysis

    stems: set[str] = set()
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and not _SKIP.search(p.name)):
        if path.suffix.lower() == ".pdf":
            text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True).stdout
        else:
            text = path.read_text(errors="replace")
        stems.update(analysis.terms(text))
    return stems


def main() -> int:
    from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
    from manifold.shared import analysis

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "everyday_absent_words_study.json")
    args = ap.parse_args()
    rows = []
    for folder in sorted(p for p in ROOT.glob("everyday*") if (p / "questions.jsonl").exists()):
        stems = corpus_stems(folder / "corpus")
        for q in map(json.loads, (folder / "questions.jsonl").read_text().splitlines()):
            if q.get("split") != "dev":
                continue
            words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", q["question"])
                     if len(w) >= 3 and w.lower() not in STOPWORDS and w.lower() not in QUESTION_WORDS]
            absent = [w for w in words if not set(analysis.terms(w)) <= stems]
            rows.append({"set": folder.name, "id": q["id"], "answerable": q["answerable"], "absent": absent})
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    out = {"study": "question words absent from the whole corpus (dev halves only)", "commit": commit(),
           "machine": machine(), "dev_questions": len(rows),
           "answerable": len(answerable), "answerable_with_an_absent_word": sum(bool(r["absent"]) for r in answerable),
           "unanswerable": len(unanswerable),
           "unanswerable_with_an_absent_word": sum(bool(r["absent"]) for r in unanswerable), "rows": rows}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print({k: v for k, v in out.items() if k not in ("rows", "machine")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
