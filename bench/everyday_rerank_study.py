"""Would MiniLM pick a better first citation? An offline study on the DEVELOPMENT halves only.

For every answerable dev question of the everyday sets whose results file (`bench/results/
everyday*_embedded.json`, not the blind runs) holds five evidence texts, the five are reordered
by each rule below and the rule scores a hit when its first text holds a support string
(`everyday_common.found`): found@1 over the same five texts.

- `current`: the reply's order (the lexical sentence rule of `query.passage.best_passage` first);
- `chunk_cos`: cosine of the question and the whole chunk (MiniLM, the bundled model);
- `unit_cos`: the best cosine of the question and one quotable unit of the chunk (`passage.units`);
- `chunk+unit`: their sum;
- `priorL+chunk` / `priorL+unit`: the cosine minus L per rank of the reply's order.

Held-out questions are never read (filtered on `split == "dev"` first). Writes
bench/results/everyday_rerank_study.json (or `--out`).

Usage: .venv/bin/python bench/everyday_rerank_study.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from everyday_common import found  # noqa: E402 - bench/ on sys.path
from metrics_eval import commit, machine  # noqa: E402

PRIORS = (0.02, 0.05, 0.1)


def dev_rows() -> list[tuple[str, list[str], list[str]]]:
    rows = []
    for path in sorted((ROOT / "results").glob("everyday*_embedded.json")):
        if "blind" in path.name:
            continue
        name = "everyday" if path.name == "everyday_embedded.json" else path.name.removesuffix("_embedded.json")
        support = {q["id"]: q["support"] for q in map(json.loads, (ROOT / name / "questions.jsonl").open())
                   if q.get("split") == "dev"}
        for q in json.loads(path.read_text())["questions"]:
            if q["split"] == "dev" and q["answerable"] and q["texts"]:
                rows.append((q["question"], q["texts"], support[q["id"]]))
    return rows


def main() -> int:
    import numpy as np

    from manifold.query.passage import units
    from manifold.shared.embedding import SentenceTransformerEmbedder

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "everyday_rerank_study.json")
    args = ap.parse_args()
    model = SentenceTransformerEmbedder()
    rows = dev_rows()
    score: Counter[str] = Counter()
    for question, texts, support in rows:
        hit = [found([t], support) for t in texts]
        pieces = [[t[s:e] for s, e in units(t)] or [t] for t in texts]
        flat = [question, *texts, *(p for ps in pieces for p in ps)]
        vecs = np.array(model.encode(flat))
        q, chunks, rest = vecs[0], vecs[1:1 + len(texts)], vecs[1 + len(texts):]
        chunk_cos = chunks @ q
        unit_cos, at = [], 0
        for ps in pieces:
            unit_cos.append(float((rest[at:at + len(ps)] @ q).max()))
            at += len(ps)
        unit = np.array(unit_cos)
        score["current"] += hit[0]
        score["chunk_cos"] += hit[int(np.argmax(chunk_cos))]
        score["unit_cos"] += hit[int(np.argmax(unit))]
        score["chunk+unit"] += hit[int(np.argmax(chunk_cos + unit))]
        for lam in PRIORS:
            prior = -lam * np.arange(len(texts))
            score[f"prior{lam}+chunk"] += hit[int(np.argmax(chunk_cos + prior))]
            score[f"prior{lam}+unit"] += hit[int(np.argmax(unit + prior))]
        score["any_of_five"] += any(hit)
    out = {"study": "first citation reordered by MiniLM (dev halves only)", "commit": commit(),
           "machine": machine(), "questions": len(rows),
           "found_at_1": {k: round(v / len(rows), 3) for k, v in score.items()}, "counts": dict(score)}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for k, v in out["found_at_1"].items():
        print(f"{k:20s} {v:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
