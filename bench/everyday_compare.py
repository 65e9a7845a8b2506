"""Answer-line and first-evidence rates of everyday results files, so that runs from different
commits compare on one rule (a developer's tool; no services).

For each results file of `bench/eval_everyday.py` (for an older run:
`git show ea1d828:bench/results/everyday_embedded.json > /tmp/old.json`), per half:
- found@1: a support string is in the first evidence item's text (`everyday_common.found`);
- answer line: a support string is in the reply's answer as the file stores it (cut to 300
  characters, so this can be lower than the run's own `answer_quotes_support`).

Usage: .venv/bin/python bench/everyday_compare.py FILE [FILE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from everyday_common import found, load_questions  # noqa: E402 - bench/ on sys.path


def rates(path: Path) -> dict[str, dict[str, float]]:
    support = {q["id"]: q["support"] for q in load_questions()}
    data = json.loads(path.read_text())
    out = {}
    for split in ("dev", "heldout"):
        rows = [r for r in data["questions"] if r["answerable"] and r["split"] == split]
        if not rows:
            continue
        first = sum(bool(r["texts"]) and found(r["texts"][:1], support[r["id"]]) for r in rows)
        answer = sum(found([r["answer"]], support[r["id"]]) for r in rows)
        out[split] = {"n": len(rows), "found_at_1": round(first / len(rows), 3),
                      "answer_quotes_support": round(answer / len(rows), 3)}
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for name in argv:
        data = json.loads(Path(name).read_text())
        print(name, data.get("commit"), json.dumps(rates(Path(name))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
