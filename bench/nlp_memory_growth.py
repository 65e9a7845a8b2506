"""Memory of the parse stage's spaCy model over many new words, with and without resets (issue 30).

unstructured classifies short paragraphs with a process-wide spaCy model whose vocabulary keeps
every word it has seen (`ingest/nlp_memory.py`). This classifies `--lines` title-like lines of
made-up words (every word new, the worst case of a corpus full of identifiers), first as the model
is, then with `nlp_memory.reset()` every `--reset-every` lines, in fresh subprocesses, and records
the process RSS and the model's vocabulary size after each block of lines.

Usage: .venv/bin/python bench/nlp_memory_growth.py [--lines 10000] [--reset-every 2000]
Writes bench/results/nlp_memory_growth.json (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from metrics_eval import commit, machine  # noqa: E402

_CHILD = r"""
import gc, json, random, string, sys
from manifold.ingest import nlp_memory
from manifold.ingest.parse_formats import unstructured_env
unstructured_env()
from unstructured.partition.text_type import is_possible_narrative_text
from unstructured.nlp import tokenize
lines, block, reset = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "reset"
rng = random.Random(1)
word = lambda: "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 10)))
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
is_possible_narrative_text("Warm up the model here.")
rows = [{"lines": 0, "rss_mib": round(rss(), 1), "vocab": len(tokenize._get_nlp().vocab)}]
for start in range(0, lines, block):
    for i in range(start, min(lines, start + block)):
        is_possible_narrative_text(" ".join(word() for _ in range(8)) + f" v{i}")
    vocab = len(tokenize._get_nlp().vocab)
    if reset:
        nlp_memory.reset()
    gc.collect()
    rows.append({"lines": min(lines, start + block), "rss_mib": round(rss(), 1), "vocab": vocab})
print(json.dumps(rows))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--reset-every", type=int, default=2_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "nlp_memory_growth.json")
    args = ap.parse_args()
    runs = {}
    for mode in ("as_is", "reset"):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(args.lines), str(args.reset_every), mode],
                             capture_output=True, text=True, check=True).stdout
        runs[mode] = json.loads(out.strip().splitlines()[-1])
    result = {"benchmark": "spaCy vocabulary growth in the parse stage", "commit": commit(), "machine": machine(),
              "lines": args.lines, "block": args.reset_every, "runs": runs,
              "rss_growth_mib": {m: round(r[-1]["rss_mib"] - r[0]["rss_mib"], 1) for m, r in runs.items()}}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["rss_growth_mib"]), f"-> {args.out}")


if __name__ == "__main__":
    main()
